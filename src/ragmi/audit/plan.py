"""Which audit artifacts a configuration produces (read by the rules and the table registry).

The audit runs when at least one target has defenses: a hook inventory per (dataset, defended
target), the leakage of every extraction attack (an attack class with ``extraction = True``) per
(dataset, target) that runs it, and the canary experiment per (canary target, seed).  A canary
target with a store (``targets.<t>.store``: a remote service over the user's collection) gets the
canaries of one seed, the first of ``audit.canary_seeds`` (:func:`canary_seeds`): the membership game
plants that seed's knowledge base in the collection (rules/stores.smk), and every seed's knowledge base
holds the same 50 addresses in the same base documents, so two seeds in one collection would each
count the other's canaries.

A leakage file counts only the attack's *leakage runs*, the variants whose queries never contain
their candidate (:func:`leakage_variants`: ``extraction/targeted`` and ``extraction/generic`` when
``attacks.extraction.prompts`` lists them; ``ragmi.audit.leakage``).  The file is planned for every
run of an extraction attack all the same; with no leakage prompt configured it holds the header
and no rows (:func:`attacks_without_leakage_runs` names such attacks).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..attacks import attack_class
from ..plan import runs, store_target_of, target_attacks, target_datasets
from ..targets import own_pipeline, target_kind


def defended_targets(cfg: Mapping) -> list[str]:
    return sorted(t for t, c in cfg["targets"].items() if c["defenses"])


def audited(cfg: Mapping) -> bool:
    return bool(defended_targets(cfg))


def leakage_attacks(cfg: Mapping) -> list[str]:
    return sorted(a for a in cfg["attacks"] if getattr(attack_class(a), "extraction", False))


def leakage_variants(cfg: Mapping, attack: str) -> list[str]:
    """The variants of ``attack`` the leakage files count under ``cfg`` (none for an attack that is
    not an extraction attack, or one whose class does not say)."""
    cls = attack_class(attack)
    if not getattr(cls, "extraction", False) or not hasattr(cls, "leakage_variants"):
        return []
    return list(cls.leakage_variants(cfg["attacks"].get(attack) or {}))


def attacks_without_leakage_runs(cfg: Mapping) -> list[str]:
    """The extraction attacks of ``cfg`` configured without a leakage prompt (their leakage files
    have no rows: an anchor-quoting prompt is a membership test, not a leakage run)."""
    return [a for a in leakage_attacks(cfg) if not leakage_variants(cfg, a)]


def canary_dataset(cfg: Mapping) -> str:
    return cfg["audit"]["canary_dataset"] or sorted(cfg["datasets"])[0]


def canary_targets(cfg: Mapping) -> list[str]:
    chosen = cfg["audit"]["canary_targets"]
    return (
        sorted(chosen)
        if chosen is not None
        else sorted(
            t
            for t, c in cfg["targets"].items()
            if target_attacks(cfg, t) and c["control"] == "none" and target_kind(c).takes_canaries(c)
        )
    )


def canary_seeds(cfg: Mapping, target: str) -> list[int]:
    """The canary seeds of ``target``: every one of ``audit.canary_seeds``; the first only for a
    target with a store (see the module's docstring)."""
    seeds = [int(s) for s in cfg["audit"]["canary_seeds"]]
    return seeds[:1] if store_target_of(cfg, target) else seeds


def store_canary_seed(cfg: Mapping, target: str) -> int | None:
    """The seed whose canaries the store game of ``target`` plants (None: it plants none)."""
    if not store_target_of(cfg, target) or target not in canary_targets(cfg) or not audited(cfg):
        return None
    return canary_seeds(cfg, target)[0]


def mi_attack(cfg: Mapping) -> str | None:
    """``audit.mi_attack``, or the configured attack of the lowest ``audit_mi_rank`` (its class says)."""
    if cfg["audit"]["mi_attack"]:
        return cfg["audit"]["mi_attack"]
    ranked = [(attack_class(a).audit_mi_rank, a) for a in cfg["attacks"] if attack_class(a).audit_mi_rank is not None]
    return min(ranked)[1] if ranked else None


def hooks_files(cfg: Mapping) -> list[str]:
    return [
        f"results/audit/{d}/{t}/hooks.csv"
        for d in sorted(cfg["datasets"])
        for t in defended_targets(cfg)
        if d in target_datasets(cfg, t)
    ]


def leakage_files(cfg: Mapping) -> list[str]:
    if not audited(cfg):
        return []
    ext = set(leakage_attacks(cfg))
    # a remote or python target's documents are not ragmi's to read: no generated-text leakage of them
    return [
        f"results/audit/{d}/{t}/leakage/{a}.csv"
        for d, t, a in runs(cfg)
        if a in ext and not own_pipeline(cfg["targets"][t])
    ]


def canary_files(cfg: Mapping) -> list[str]:
    if not audited(cfg):
        return []
    return [f"results/audit/canaries/{t}/{s}.json" for t in canary_targets(cfg) for s in canary_seeds(cfg, t)]


def mi_metrics_files(cfg: Mapping) -> list[str]:
    """The metrics of the dashboard's MI attack (none when nothing is audited)."""
    return metrics_files(cfg, {mi_attack(cfg)}) if audited(cfg) else []


def metrics_files(cfg: Mapping, attacks=None) -> list[str]:
    return [f"results/metrics/{d}/{t}/{a}.csv" for d, t, a in runs(cfg) if attacks is None or a in attacks]
