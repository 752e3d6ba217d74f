"""The leakage dashboard's analysis: NELstrict e-mail and person-name counts per extraction run, each
row's run-level bootstrap interval (hash-identical runs collapsed first, Mind the Hook §V), the change
against the undefended counterpart, the pooled block per defense, and the MI AUC beside them (table
``leakage_dashboard``: :mod:`ragmi.report.audit_registry` declares it, :func:`ragmi.report.audit_tables.
dashboard_markdown` prints it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ..attacks.base import is_main_variant
from ..audit import stats
from ..cells import DASH, format_ci
from ..plan import baseline_targets
from .readers import read_csvs

UNDEFENDED = "none"


def _bootstrap_cell(values: list[float], n_boot: int, seed: int) -> tuple[str, float, float, float]:
    if not values:
        return DASH, float("nan"), float("nan"), float("nan")
    mean, lo, hi = stats.run_bootstrap(values, n_boot=n_boot, seed=seed)
    return format_ci(mean, lo, hi), mean, lo, hi


SCORER_ENTANGLED = "n/a (scorer-entangled)"


POOLED, PER_TARGET = "pooled", "per target"


NEL_LABELS = (("EMAIL_REAL", "Email NEL/run", "Email change"), ("PERSON_NAME", "Name NEL/run", "Name change"))


DASHBOARD_COLUMNS = [
    "block",
    "pool",
    "dataset",
    "target",
    "hooks active",
    "runs (distinct)",
    "runs (raw)",
    "Email NEL/run",
    "Email change",
    "Name NEL/run",
    "Name change",
    "verbatim reproduced",
    "MI AUC",
    "scorer-entangled",
    *(f"{col}_{stat}" for col, _, _ in NEL_LABELS for stat in ("mean", "lo", "hi")),
]


def target_pools(targets: dict, defenses: dict) -> dict:
    """{target: pool}: the sorted ``kind`` names of the target's defenses joined by ``+`` (ε variants
    of one kind share a pool, as Mind the Hook §V pools them per defense), ``none`` for an undefended
    target, ``control: <control>`` for a negative-control target (never pooled with the baseline)."""
    out = {}
    for name, t in targets.items():
        control = t["control"]
        kinds = sorted({defenses[d]["kind"] for d in t["defenses"]})
        out[name] = f"control: {control}" if control != "none" else "+".join(kinds) or UNDEFENDED
    return out


def _nel_cells(row: dict, runs: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """The run cells of one dashboard row; ``runs`` collapsed on ``outputs_digest`` first
    (hash-identical runs count once, MtH §V), so ``runs (distinct)`` is the n of the bootstrap."""
    row["runs (raw)"] = len(runs)
    g = runs.drop_duplicates("outputs_digest")
    row["runs (distinct)"] = len(g)
    for col, label, _ in NEL_LABELS:
        cell, mean, lo, hi = _bootstrap_cell(g[col].astype(float).tolist(), n_boot, seed)
        row[label] = cell
        row[f"{col}_mean"], row[f"{col}_lo"], row[f"{col}_hi"] = mean, lo, hi
    row["verbatim reproduced"] = f"{100 * g['reproduced_fraction'].mean():.0f}%" if len(g) else DASH
    return g


def _mi_cell(m: pd.DataFrame) -> str:
    if len(m) == 1:
        return f"{format_ci(m['auc'].iloc[0], m['auc_lo'].iloc[0], m['auc_hi'].iloc[0])} ({m['variant'].iloc[0]})"
    if len(m) > 1:  # AUCs of different targets are not pooled: their range, each in its per-target row
        return f"{m['auc'].min():.2f}–{m['auc'].max():.2f} over {len(m)} targets (per-target rows)"
    return DASH


def _entangled_cell(ent: dict) -> str:
    return "; ".join(f"{c}: {', '.join(v)}" for c, v in sorted(ent.items()) if v) if ent else DASH


# The unit of each NELstrict column's change cell: a count per extraction run
NEL_UNITS = {"EMAIL_REAL": "e-mails/run", "PERSON_NAME": "names/run"}


def _amount(x: float) -> str:
    """``23``, ``2.5``, ``0.25``: a count per run without trailing zeros."""
    x = abs(x)
    if math.isclose(x, round(x), abs_tol=1e-9):
        return f"{round(x):d}"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}".rstrip("0").rstrip(".")


def format_change(b: float | None, m: float, unit: str = "per run") -> str:
    """The signed change of a count per run, defended − undefended, with its unit and relative change:
    ``−23 e-mails/run (−100%)`` (fewer: a minus sign), ``+1.5 names/run (+50%)``, ``±0 e-mails/run (0%)``;
    against an undefended mean of 0, ``+2 e-mails/run (undefended 0)``."""
    if b is None or (isinstance(b, float) and math.isnan(b)) or m is None or math.isnan(m):
        return DASH
    d = m - b
    amount = _amount(d)
    sign = "±" if amount == "0" else ("−" if d < 0 else "+")
    cell = f"{sign}{amount} {unit}"
    if not b:
        return f"{cell} (undefended 0)"
    pct = 100 * d / b
    pct_cell = "0%" if round(pct) == 0 else f"{pct:+.0f}%".replace("-", "−")
    return f"{cell} ({pct_cell})"


def _pooled_rows(runs, mi, statuses, baselines, pools, n_boot, seed, entangled) -> list[dict]:
    """One row per pool of :func:`target_pools`: every leakage run of the pool's targets over all
    datasets and extraction prompts, hash-identical runs collapsed before the run-level bootstrap;
    the change against the baseline runs of the *same cells* (each defended run's dataset and prompt
    on its target's undefended counterpart), both sides restricted to the cells both have."""
    runs = runs.assign(_pool=runs["target"].map(lambda t: pools.get(t, t)))
    out = []
    order = sorted(runs["_pool"].unique(), key=lambda p: (p != UNDEFENDED, p))
    for pool in order:
        g = runs[runs["_pool"] == pool]
        targets = sorted(g["target"].unique())
        row = {
            "block": POOLED,
            "pool": pool,
            "dataset": ", ".join(sorted(g["dataset"].unique())),
            "target": f"pooled ({', '.join(targets)})",
            "hooks active": "; ".join(dict.fromkeys(statuses.get(t, UNDEFENDED) for t in targets)),
        }
        _nel_cells(row, g, n_boot, seed)
        cells = g[["dataset", "target"]].drop_duplicates()
        row["MI AUC"] = _mi_cell(mi.merge(cells, on=["dataset", "target"]).drop_duplicates(["dataset", "target"]))
        ent: dict = {}
        for t in targets:
            for c, v in entangled.get(t, {}).items():
                ent[c] = list(dict.fromkeys([*ent.get(c, []), *v]))
        row["scorer-entangled"] = _entangled_cell(ent)
        base = g["target"].map(baselines)
        if (base == g["target"]).all():
            for col, _, label in NEL_LABELS:
                row[label] = SCORER_ENTANGLED if col in ent else "baseline"
            out.append(row)
            continue
        defended = g[base.notna() & (base != g["target"])].assign(_base=base)
        pairs = defended.merge(
            runs[["dataset", "target", "run", "outputs_digest", "EMAIL_REAL", "PERSON_NAME"]].rename(
                columns={"target": "_base"}
            ),
            on=["dataset", "_base", "run"],
            suffixes=("", "_b"),
        )
        d_runs = pairs.drop_duplicates("outputs_digest")
        b_runs = pairs.drop_duplicates("outputs_digest_b")
        partial = "" if len(d_runs) == row["runs (distinct)"] else f" (over {len(d_runs)} matched runs)"
        for col, _, label in NEL_LABELS:
            if col in ent:
                row[label] = SCORER_ENTANGLED
            elif pairs.empty:
                row[label] = DASH
            else:
                b_mean, d_mean = float(b_runs[f"{col}_b"].mean()), float(d_runs[col].mean())
                row[label] = format_change(b_mean, d_mean, NEL_UNITS[col]) + partial
        out.append(row)
    return out


def leakage_dashboard_frame(
    runs: pd.DataFrame,
    mi: pd.DataFrame,
    statuses: dict,
    baselines: dict,
    n_boot: int,
    seed: int,
    entangled: dict | None = None,
    pools: dict | None = None,
) -> pd.DataFrame:
    """``runs``: per-run leakage rows with dataset, target (``ragmi.audit.leakage.run_leakage``);
    ``mi``: the MI attack's headline metrics rows (dataset, target, variant, auc, auc_lo, auc_hi);
    ``statuses``: {target: "defense: status; …"}; ``baselines``: {target: undefended target or None};
    ``entangled``: {target: {column: vocabulary strings}} (:func:`ragmi.nel.entangled_columns`
    of its defenses' vocabularies) — a change cell of an entangled column is printed
    ``n/a (scorer-entangled)``, never as a reduction (Mind the Hook Table II's "n/a (SE)"), and the
    ``scorer-entangled`` column names the strings.

    ``pools``: {target: pool} (:func:`target_pools`).  Given, the frame starts with the ``pooled``
    block — one row per pool, its runs pooled over datasets, extraction prompts and ε as Mind the Hook
    §V pools them (the published values compare with these rows) — followed by the ``per target``
    block, one row per (dataset, target); without it, the per-target block alone.  ``runs
    (distinct)`` is each row's n: its runs after hash-identical ones are collapsed."""
    entangled = entangled or {}
    out = []
    base_means: dict = {}
    for (dataset, target), g in runs.groupby(["dataset", "target"], sort=True):
        row = {
            "block": PER_TARGET,
            "pool": (pools or {}).get(target, DASH),
            "dataset": dataset,
            "target": target,
            "hooks active": statuses.get(target, UNDEFENDED),
        }
        _nel_cells(row, g, n_boot, seed)
        for col, _, _ in NEL_LABELS:
            base_means[(dataset, target, col)] = row[f"{col}_mean"]
        m = mi[(mi["dataset"] == dataset) & (mi["target"] == target)]
        row["MI AUC"] = _mi_cell(m.head(1))
        row["scorer-entangled"] = _entangled_cell(entangled.get(target, {}))
        out.append(row)
    for row in out:
        base = baselines.get(row["target"])
        for col, _, label in NEL_LABELS:
            b = base_means.get((row["dataset"], base, col)) if base else None
            if col in entangled.get(row["target"], {}):
                row[label] = SCORER_ENTANGLED
            elif base is None or base == row["target"]:
                row[label] = "baseline" if base == row["target"] else DASH
            else:
                row[label] = format_change(b, row[f"{col}_mean"], NEL_UNITS[col])
    if pools is not None and len(runs):
        out = _pooled_rows(runs, mi, statuses, baselines, pools, n_boot, seed, entangled) + out
    return pd.DataFrame(out)[DASHBOARD_COLUMNS] if out else pd.DataFrame(columns=DASHBOARD_COLUMNS)


def _defense_statuses(hooks: pd.DataFrame) -> dict:
    """{target: "defense: status; …"} from the hook inventory rows."""
    out: dict = {}
    for (target, defense), g in hooks.groupby(["target", "defense"], sort=True):
        out.setdefault(target, []).append(f"{defense}: {g['defense_status'].iloc[0]}")
    return {t: "; ".join(v) for t, v in out.items()}


def scorer_entanglement(config: Mapping) -> dict:
    """{target: {NELstrict column: vocabulary strings}}: the columns whose reduction under the target's
    defenses the scorer's own rules would produce (``ragmi.nel.entangled_columns`` of each
    defense's declared vocabulary)."""
    from ..defenses import build_defense
    from ..nel import entangled_columns

    out = {}
    for t, c in config["targets"].items():
        vocab = [v for d in c["defenses"] for v in build_defense(d, config["defenses"][d], validated=True).vocabulary]
        ent = entangled_columns(vocab)
        if ent:
            out[t] = ent
    return out


def run(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``leakage_dashboard``: ``files`` ``leakage`` (the
    extraction runs), ``hooks`` (the hook inventory) and ``metrics`` (audit.mi_attack's); ``config`` its
    keys ``targets``, ``defenses``, ``audit.n_boot`` and ``seed``."""
    mi = read_csvs(files["metrics"])
    mi = mi[mi["variant"].map(is_main_variant)].groupby(["dataset", "target"], sort=True).head(1)
    return leakage_dashboard_frame(
        read_csvs(files["leakage"]),
        mi,
        _defense_statuses(read_csvs(files["hooks"])),
        baseline_targets(config["targets"]),
        n_boot=config["audit"]["n_boot"],
        seed=config["seed"],
        entangled=scorer_entanglement(config),
        pools=target_pools(config["targets"], config["defenses"]),
    )
