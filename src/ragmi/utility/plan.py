"""Which utility artifacts a configuration produces (read by the rules and the table registry)."""

from __future__ import annotations

from collections.abc import Mapping

from ..plan import baseline_targets, runs, target_attacks, target_datasets

QUERY_SET = "utility"  # the query file results/queries/<dataset>/utility.parquet (rule generate's attack wildcard)


def enabled(cfg: Mapping) -> bool:
    # tables and tests also hand the registry partial configs without the block
    return bool((cfg.get("utility") or {}).get("enabled"))


def utility_targets(cfg: Mapping) -> list[str]:
    """``utility.targets`` (null: every target that is not a negative control and runs attacks), plus
    the undefended counterpart of each (its Δ is taken against it), sorted; none when disabled."""
    if not enabled(cfg):
        return []

    targets = cfg["targets"]
    chosen = cfg["utility"]["targets"]
    if chosen is None:
        chosen = [t for t, c in targets.items() if c["control"] == "none" and target_attacks(cfg, t)]
    base = baseline_targets(targets)
    out = set(chosen) | {base[t] for t in chosen if base.get(t)}
    return sorted(out)


def utility_runs(cfg: Mapping) -> list[tuple[str, str]]:
    """(dataset, target) of every utility run, sorted by dataset then target."""
    chosen = set(utility_targets(cfg))
    return [(d, t) for d in sorted(cfg["datasets"]) for t in sorted(chosen) if d in target_datasets(cfg, t)]


def utility_datasets(cfg: Mapping) -> list[str]:
    return sorted({d for d, _ in utility_runs(cfg)})


def questions_file(dataset: str) -> str:
    return f"results/utility/{dataset}/questions.parquet"


def scores_file(dataset: str, target: str) -> str:
    return f"results/utility/{dataset}/{target}/scores.csv"


def scores_files(cfg: Mapping) -> list[str]:
    return [scores_file(d, t) for d, t in utility_runs(cfg)]


def attack_runs(cfg: Mapping) -> list[tuple[str, str, str]]:
    """(dataset, target, attack) of every attack run on a utility run's dataset and target."""
    chosen = set(utility_runs(cfg))
    return [(d, t, a) for d, t, a in runs(cfg) if (d, t) in chosen]
