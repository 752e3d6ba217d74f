"""Which audit artifacts a configuration produces (read by the rules and the table registry).

The audit runs when at least one target has defenses: a hook inventory per (dataset, defended
target), the leakage of every extraction attack (an attack class with ``extraction = True``) per
(dataset, target) that runs it, and the canary experiment per (canary target, seed).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..attacks import attack_class
from ..config import is_remote, runs, target_attacks, target_datasets

MI_PREFERENCE = ("rag_mia", "s2mia", "dcmi", "menta", "ia", "mba")


def defended_targets(cfg: Mapping) -> list[str]:
    return sorted(t for t, c in cfg["targets"].items() if c["defenses"])


def audited(cfg: Mapping) -> bool:
    return bool(defended_targets(cfg))


def leakage_attacks(cfg: Mapping) -> list[str]:
    return sorted(a for a in cfg["attacks"] if getattr(attack_class(a), "extraction", False))


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
            if target_attacks(cfg, t) and c["control"] == "none" and not is_remote(c)
        )
    )


def mi_attack(cfg: Mapping) -> str | None:
    if cfg["audit"]["mi_attack"]:
        return cfg["audit"]["mi_attack"]
    return next((a for a in MI_PREFERENCE if a in cfg["attacks"]), None)


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
    # a remote target's retrieved documents are unknown: no generated-text leakage of them
    return [
        f"results/audit/{d}/{t}/leakage/{a}.csv"
        for d, t, a in runs(cfg)
        if a in ext and not is_remote(cfg["targets"][t])
    ]


def canary_files(cfg: Mapping) -> list[str]:
    if not audited(cfg):
        return []
    return [f"results/audit/canaries/{t}/{s}.json" for t in canary_targets(cfg) for s in cfg["audit"]["canary_seeds"]]


def mi_metrics_files(cfg: Mapping) -> list[str]:
    """The metrics of the dashboard's MI attack (none when nothing is audited)."""
    return metrics_files(cfg, {mi_attack(cfg)}) if audited(cfg) else []


def metrics_files(cfg: Mapping, attacks=None) -> list[str]:
    return [f"results/metrics/{d}/{t}/{a}.csv" for d, t, a in runs(cfg) if attacks is None or a in attacks]
