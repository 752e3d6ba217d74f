"""Tables of the active-path audit (Mind the Hook Tables I–III) and the defense-effect table.

* ``hook_inventory``: per defended target and defense, the retrieval-side and generation hooks with
  their measured fire rates, and the defense's status (Table I).
* ``leakage_dashboard``: per target, NELstrict e-mail and person-name counts per run with a
  run-level bootstrap CI, their signed change against the undefended target, and the MI AUC (Table II).
* ``canaries``: exact-match recovery of the out-of-vocabulary e-mail canaries per seed, with the
  one-sided Fisher test against the undefended target (Table III).
* ``defense_effect``: attack variant × target, AUC and TPR at low FPR with CI, the change against
  the undefended target, or "indirect" where the defense's active channels and the channels the
  attack reads do not overlap.

Provenance of the layouts: docs/provenance.md#hook-inventory.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..audit import stats
from ..audit.inventory import PRE_GENERATION, interpretable
from .comparison import is_main_variant
from .tables import DASH, format_ci

UNDEFENDED = "none"


def _pct(x: float) -> str:
    return DASH if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f}%"


def _hook_cell(rows: pd.DataFrame, hooks) -> str:
    sub = rows[rows["hook"].isin(hooks)]
    if sub.empty:
        return DASH
    cells = []
    for _, r in sub.iterrows():
        rate = f"{_pct(r['attack_fire_rate'])} of {int(r['attack_n'])}" if r["attack_n"] else "none"
        cells.append(f"{r['hook']}: {r['status']} (probes {_pct(r['probe_fire_rate'])}, attack queries {rate})")
    return "; ".join(cells)


def hook_inventory_frame(hooks: pd.DataFrame) -> pd.DataFrame:
    """``hooks``: concatenated per-target hook rows (dataset, target, defense, kind, hook,
    probe_fire_rate, attack_fire_rate, attack_n, status, defense_status)."""
    out = []
    for (dataset, target, defense), g in hooks.groupby(["dataset", "target", "defense"], sort=True):
        out.append(
            {
                "dataset": dataset,
                "target": target,
                "defense": defense,
                "kind": g["kind"].iloc[0],
                "retrieval-side hooks": _hook_cell(g, PRE_GENERATION),
                "generation hook": _hook_cell(g, ("output",)),
                "status": g["defense_status"].iloc[0],
            }
        )
    return pd.DataFrame(out)


def plain_markdown(df: pd.DataFrame, title: str, notes=()) -> str:
    header = list(df.columns)
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in header) + " |")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def plain_table(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The registry's Markdown renderer for tables without metric columns."""
    return plain_markdown(df, title, notes)


def _bootstrap_cell(values: list[float], n_boot: int, seed: int) -> tuple[str, float, float, float]:
    if not values:
        return DASH, float("nan"), float("nan"), float("nan")
    mean, lo, hi = stats.run_bootstrap(values, n_boot=n_boot, seed=seed)
    return format_ci(mean, lo, hi), mean, lo, hi


def leakage_dashboard_frame(
    runs: pd.DataFrame, mi: pd.DataFrame, statuses: dict, baselines: dict, n_boot: int, seed: int
) -> pd.DataFrame:
    """``runs``: per-run leakage rows with dataset, target (``ragmi.audit.leakage.run_leakage``);
    ``mi``: the MI attack's headline metrics rows (dataset, target, variant, auc, auc_lo, auc_hi);
    ``statuses``: {target: "defense: status; …"}; ``baselines``: {target: undefended target or None}."""
    out = []
    base_means: dict = {}
    for (dataset, target), g in runs.groupby(["dataset", "target"], sort=True):
        g = g.drop_duplicates("outputs_digest")  # hash-identical runs count once (MtH §V)
        row = {
            "dataset": dataset,
            "target": target,
            "hooks active": statuses.get(target, UNDEFENDED),
            "runs (distinct)": len(g),
        }
        for col, label in (("EMAIL_REAL", "Email NEL/run"), ("PERSON_NAME", "Name NEL/run")):
            cell, mean, lo, hi = _bootstrap_cell(g[col].astype(float).tolist(), n_boot, seed)
            row[label] = cell
            row[f"{col}_mean"], row[f"{col}_lo"], row[f"{col}_hi"] = mean, lo, hi
            base_means[(dataset, target, col)] = mean
        row["verbatim reproduced"] = f"{100 * g['reproduced_fraction'].mean():.0f}%"
        m = mi[(mi["dataset"] == dataset) & (mi["target"] == target)]
        row["MI AUC"] = (
            (f"{format_ci(m['auc'].iloc[0], m['auc_lo'].iloc[0], m['auc_hi'].iloc[0])} ({m['variant'].iloc[0]})")
            if len(m)
            else DASH
        )
        out.append(row)
    for row in out:
        base = baselines.get(row["target"])
        for col, label in (("EMAIL_REAL", "Email change"), ("PERSON_NAME", "Name change")):
            b = base_means.get((row["dataset"], base, col)) if base else None
            if base is None or base == row["target"]:
                row[label] = "baseline" if base == row["target"] else DASH
            elif b is None or not b:
                row[label] = f"{DASH} (baseline 0)"
            else:
                row[label] = f"{100 * (b - row[f'{col}_mean']) / b:+.1f}%"
    cols = [
        "dataset",
        "target",
        "hooks active",
        "runs (distinct)",
        "Email NEL/run",
        "Email change",
        "Name NEL/run",
        "Name change",
        "verbatim reproduced",
        "MI AUC",
    ]
    return pd.DataFrame(out)[cols] if out else pd.DataFrame(columns=cols)


def canaries_frame(results: pd.DataFrame, baselines: dict) -> pd.DataFrame:
    """``results``: one row per (target, seed) with n_leaked, n_canaries, n_leaked_raw."""
    out = []
    seeds = sorted(results["seed"].unique())
    totals = {}
    for target, g in results.groupby("target", sort=True):
        row = {"target": target}
        for s in seeds:
            r = g[g["seed"] == s]
            row[f"seed {s}"] = f"{int(r['n_leaked'].iloc[0])}/{int(r['n_canaries'].iloc[0])}" if len(r) else DASH
        k, n = int(g["n_leaked"].sum()), int(g["n_canaries"].sum())
        totals[target] = (k, n)
        row["total"] = f"{k}/{n} ({100 * k / n:.1f}%)"
        row["before output hooks"] = f"{int(g['n_leaked_raw'].sum())}/{n}"
        out.append(row)
    for row in out:
        base = baselines.get(row["target"])
        if base is None or base == row["target"] or base not in totals:
            row["Fisher p (one-sided, vs undefended)"] = DASH
            continue
        (kb, nb), (kd, nd) = totals[base], totals[row["target"]]
        row["Fisher p (one-sided, vs undefended)"] = f"{stats.fisher_one_sided(kb, nb, kd, nd):.2g}"
    return pd.DataFrame(out)


def defense_effect_frame(
    metrics: pd.DataFrame, target_defenses: dict, defense_channels: dict, attack_channels, baselines: dict
) -> pd.DataFrame:
    """Metrics rows of the headline variants of every attack on every target, with the columns
    ``defenses``, ``effect`` (ΔAUC and ΔTPR against the undefended target, or "indirect") and
    ``channels`` (what the attack reads ∩ what the defenses can change).

    ``target_defenses``: {target: [defense names]}; ``defense_channels``: {(target, defense): set of
    effective channels}; ``attack_channels(attack, variant)`` → channels the variant reads."""
    df = metrics[metrics["variant"].map(is_main_variant)].copy()
    tpr_col = next(
        (
            c
            for c in df.columns
            if c.startswith("tpr_at_fpr_") and not c.endswith(("_lo", "_hi")) and c != "tpr_at_fpr_0"
        ),
        None,
    )
    effects, chans, names = [], [], []
    for _, r in df.iterrows():
        t = r["target"]
        defs = target_defenses.get(t, [])
        names.append(", ".join(defs) if defs else UNDEFENDED)
        reads = set(attack_channels(r["attack"], r["variant"]))
        changes = set().union(*[defense_channels.get((t, d), set()) for d in defs]) if defs else set()
        chans.append(", ".join(sorted(reads & changes)) if defs else DASH)
        base = baselines.get(t)
        if not defs:
            effects.append("baseline")
        elif not interpretable(changes, reads):
            effects.append("indirect (no shared channel)")
        elif base is None:
            effects.append(f"{DASH} (no undefended target)")
        else:
            b = metrics[
                (metrics["dataset"] == r["dataset"])
                & (metrics["target"] == base)
                & (metrics["variant"] == r["variant"])
            ]
            if b.empty:
                effects.append(DASH)
                continue
            cell = f"ΔAUC {r['auc'] - b['auc'].iloc[0]:+.2f}"
            if tpr_col and not (np.isnan(r[tpr_col]) or np.isnan(b[tpr_col].iloc[0])):
                cell += f", ΔTPR {r[tpr_col] - b[tpr_col].iloc[0]:+.2f}"
            effects.append(cell)
    df["defenses"] = names
    df["channels"] = chans
    df["effect"] = effects
    return df.reset_index(drop=True)


def baseline_targets(targets: dict) -> dict:
    """{target: its undefended counterpart} — the undefended target with the same retriever,
    generator, k and template; an undefended target maps to itself; None when there is none."""

    def setting(t):
        # a remote target has no retriever or generator of ragmi's: never the baseline of a defended one
        return (t.get("retriever"), t.get("generator"), t["k"], t["template"], t.get("database", "members"))

    def plain(t):
        return not t.get("defenses") and t.get("control", "none") == "none"

    out = {}
    for name, t in sorted(targets.items()):
        if not t.get("defenses"):
            out[name] = name
            continue
        same = [n for n, u in sorted(targets.items()) if plain(u) and setting(u) == setting(t)]
        out[name] = same[0] if same else None
    return out
