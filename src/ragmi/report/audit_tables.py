"""Tables of the active-path audit (Mind the Hook Tables I–III) and the defense-effect table.

* ``hook_inventory``: per defended target and defense, the retrieval-side and generation hooks with
  their measured fire rates, and the defense's status (Table I).
* ``leakage_dashboard``: NELstrict e-mail and person-name counts per run with a run-level bootstrap
  CI, their signed change against the undefended runs, and the MI AUC (Table II) — pooled per defense
  kind (ε variants, datasets and extraction prompts pooled, identical runs collapsed: Mind the Hook
  §V), then per (dataset, target).
* ``canaries``: exact-match recovery of the out-of-vocabulary e-mail canaries per seed, with the
  one-sided Fisher test against the undefended target (Table III).
* ``defense_effect``: attack variant × target, AUC and TPR at low FPR with CI, the paired change in
  AUC against the undefended target over the same candidates with its bootstrap interval and a
  verdict (reduces / increases / no detectable change), or "indirect" where the defense's active
  channels and the channels the attack reads do not overlap.

Provenance of the layouts: docs/provenance.md#hook-inventory.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from .. import metrics as metrics_mod
from ..audit import stats
from ..audit.inventory import PRE_GENERATION, interpretable
from ..multiplicity import holm
from .cells import DASH, escape, format_ci, signed
from .comparison import audit_published, is_main_variant
from .metric_rows import fpr_keys, tpr_estimable
from .tables import APPENDIX_HEADING, APPENDIX_LEAD, constant_caption, grid, plain_markdown

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
        cell = f"{r['hook']}: {r['status']} (probes {_pct(r['probe_fire_rate'])}, attack queries {rate}"
        changed = _channels_cell(r.get("attack_channels") if r["attack_n"] else r.get("probe_channels"))
        cells.append(cell + (f"; changed: {changed})" if changed else ")"))
    return "; ".join(cells)


def _channels_cell(value) -> str:
    """``"order 40%, scores 100%"`` from a hook row's JSON {channel: rate} (what changed, on the attack
    queries when there were any, else on the probes)."""
    if not isinstance(value, str) or not value:
        return ""
    rates = json.loads(value)
    return ", ".join(f"{c} {_pct(v)}" for c, v in sorted(rates.items()) if v)


def hook_inventory_frame(hooks: pd.DataFrame) -> pd.DataFrame:
    """``hooks``: concatenated per-target hook rows (dataset, target, defense, kind, hook,
    probe_fire_rate, attack_fire_rate, attack_n, status, defense_status; optionally probe_channels /
    attack_channels, JSON {channel: rate}).  A fire rate counts only changes that reach the generator;
    the cell names every channel that changed, released scores included."""
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


# Numeric columns the CSVs carry for machines (the release gate, ragmi.gate) beside the cells people
# read; the Markdown leaves them out.
MACHINE_COLUMNS = (
    "n_recovered",
    "n_planted",
    "canary_rate",
    "per_seed",
    "EMAIL_REAL_mean",
    "EMAIL_REAL_lo",
    "EMAIL_REAL_hi",
    "PERSON_NAME_mean",
    "PERSON_NAME_lo",
    "PERSON_NAME_hi",
)


def plain_table(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The registry's Markdown renderer for tables without metric columns (without :data:`MACHINE_COLUMNS`)."""
    return plain_markdown(df.drop(columns=[c for c in MACHINE_COLUMNS if c in df.columns]), title, notes)


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


_MI_CELL = re.compile(r"^(?P<auc>.+?) \((?P<variant>[^()]+)\)$")
DASHBOARD_MD = {  # Markdown header of each CSV column the core tables show
    "runs (distinct)": "runs",
    "Email NEL/run": "e-mails/run [95% CI]",
    "Email change": "Δ e-mails/run",
    "Name NEL/run": "names/run [95% CI]",
    "Name change": "Δ names/run",
    "verbatim reproduced": "verbatim",
}


def dashboard_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The leakage dashboard as people read it: a caption with what every row shares (the dataset, the MI
    attack's variant, …), the pooled block and the per-target block as two core tables (runs, e-mails and
    names per run with their signed change against the undefended runs, verbatim reproduction, MI AUC),
    the notes, then under ``## All columns`` the pool, hook status, raw run count, scorer-entangled strings
    and published values of every row (:data:`MACHINE_COLUMNS` are in the CSV only)."""
    rows = [r for _, r in df.iterrows()]
    caption = []
    mi = [_MI_CELL.match(str(r["MI AUC"])) for r in rows]
    variants = {m.group("variant") for m in mi if m}
    mi_head = "MI AUC"
    if len(variants) == 1 and all(m or str(r["MI AUC"]) == DASH for m, r in zip(mi, rows)):
        mi_head = f"MI AUC ({next(iter(variants))})"
        mi_cells = [m.group("auc") if m else DASH for m in mi]
    else:
        mi_cells = [str(r["MI AUC"]) for r in rows]
    shown = ["runs (distinct)", "Email NEL/run", "Email change", "Name NEL/run", "Name change", "verbatim reproduced"]
    every = {
        c: [escape(r[c]) for r in rows]
        for c in ("dataset", "pool", "hooks active", "runs (raw)", "scorer-entangled", "published")
        if c in df
    }
    const, const_caption = constant_caption({c: v for c, v in every.items() if c != "pool"}, len(rows))
    lines = [f"# {title}", ""]
    for text in [*caption, *const_caption]:
        lines += [text, ""]
    for block, head, key in ((POOLED, "Pooled per defense kind", "pool"), (PER_TARGET, "Per target", "target")):
        idx = [i for i, r in enumerate(rows) if r["block"] == block]
        if not idx:
            continue
        keys = [key] + (["dataset"] if block == PER_TARGET and "dataset" in every and "dataset" not in const else [])
        if block == POOLED:
            keys.append("target")
        header = [("targets" if k == "target" and block == POOLED else k) for k in keys]
        header += [DASHBOARD_MD[c] for c in shown] + [mi_head]
        body = [
            [
                escape(rows[i][k]).removeprefix("pooled (").removesuffix(")")
                if k == "target" and block == POOLED
                else escape(rows[i][k])
                for k in keys
            ]
            + [escape(rows[i][c]) for c in shown]
            + [escape(mi_cells[i])]
            for i in idx
        ]
        lines += [f"## {head}", "", *grid(header, body), ""]
    lines += [f"- {n}" for n in notes]
    rest = [
        c
        for c in ("pool", "hooks active", "runs (raw)", "scorer-entangled", "published")
        if c in every and c not in const
    ]
    if rest:
        keys = ["block", "target"] + (["dataset"] if "dataset" not in const else [])
        body = [[escape(r[k]) for k in keys] + [every[c][i] for c in rest] for i, r in enumerate(rows)]
        lines += ["", APPENDIX_HEADING, "", APPENDIX_LEAD, "", *grid(keys + rest, body)]
    return "\n".join(lines) + "\n"


def dashboard_published(df: pd.DataFrame, published: list[dict]) -> list[str]:
    """The ``published`` column of the dashboard: the paper's pooled values (Mind the Hook Table II
    pools every run of a defense) sit on the pooled rows only — the pool's kinds, ``none`` for the
    undefended pool, nothing for a control pool — and never on a per-target (per-ε) row."""

    def cell(r) -> str:
        if r["block"] != POOLED or str(r["pool"]).startswith("control"):
            return ""
        kinds = [] if r["pool"] == UNDEFENDED else str(r["pool"]).split("+")
        return audit_published(published, "leakage_dashboard", [(k, {}) for k in kinds])

    return [cell(r) for _, r in df.iterrows()]


FISHER_HOLM = "Fisher p, Holm over the table"


def canaries_frame(results: pd.DataFrame, baselines: dict) -> pd.DataFrame:
    """``results``: one row per (target, seed) with n_leaked, n_canaries, n_leaked_raw.  Besides the cells
    people read, the machine columns n_recovered, n_planted, canary_rate (the gate's) and per_seed (JSON
    {seed: {recovered, before_hooks, planted}}, the canaries figure's).  The one-sided Fisher p against
    the undefended target comes with its Holm adjustment over the table's tests (:data:`FISHER_HOLM`)."""
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
        row["n_recovered"], row["n_planted"] = k, n
        row["canary_rate"] = k / n if n else float("nan")
        # per seed, for the canaries figure: recovered in the answers, before the output hooks, planted
        row["per_seed"] = json.dumps(
            {
                str(r["seed"]): {
                    "recovered": int(r["n_leaked"]),
                    "before_hooks": int(r["n_leaked_raw"]),
                    "planted": int(r["n_canaries"]),
                }
                for _, r in g.sort_values("seed").iterrows()
            }
        )
        out.append(row)
    for row in out:
        base = baselines.get(row["target"])
        if base is None or base == row["target"] or base not in totals:
            row["Fisher p (one-sided, vs undefended)"] = DASH
            continue
        (kb, nb), (kd, nd) = totals[base], totals[row["target"]]
        row["_p"] = stats.fisher_one_sided(kb, nb, kd, nd)
        row["Fisher p (one-sided, vs undefended)"] = f"{row['_p']:.2g}"
    # the table's Fisher tests read together: Holm over its rows (ragmi.multiplicity.holm)
    adjusted = holm([row.get("_p", float("nan")) for row in out])
    for row, a in zip(out, adjusted):
        row.pop("_p", None)
        row[FISHER_HOLM] = DASH if math.isnan(a) else f"{a:.2g}"
    return pd.DataFrame(out)


def format_delta(delta: float, lo: float, hi: float) -> str:
    """``"ΔAUC −0.21 [−0.35, −0.08]"`` (the interval left out when it is missing)."""
    cell = f"ΔAUC {signed(delta)}"
    if not (math.isnan(lo) or math.isnan(hi)):
        cell += f" [{signed(lo)}, {signed(hi)}]"
    return cell


def effect_verdict(lo: float, hi: float) -> str:
    """``reduces`` when the whole 95% interval of ΔAUC is below 0, ``increases`` when above, else
    ``no detectable change``."""
    if hi < 0:
        return "reduces"
    if lo > 0:
        return "increases"
    return "no detectable change"


def paired_eval_scores(defended: pd.DataFrame, baseline: pd.DataFrame, variant: str):
    """``(labels, defended scores, undefended scores)`` of one variant over the evaluation candidates
    both targets scored (rows with ``role == "eval"`` and a finite score, doc_ids present in both),
    sorted by doc_id so that nothing depends on row order; None when either class is
    missing.  The frames have doc_id, variant, score, label and role."""

    def one(df):
        d = df[(df["variant"].astype(str) == variant) & (df["role"] == "eval")]
        d = d[np.isfinite(pd.to_numeric(d["score"], errors="coerce").astype(float))]
        return d.assign(doc_id=d["doc_id"].astype(str))[["doc_id", "score", "label"]]

    both = one(defended).merge(one(baseline), on="doc_id", suffixes=("_a", "_b"), validate="one_to_one")
    if (both["label_a"] != both["label_b"]).any():
        raise ValueError(f"variant {variant!r}: the two targets give the same candidate different labels")
    both = both.sort_values("doc_id", kind="stable")
    labels = both["label_a"].astype(int).to_numpy()
    if not ((labels == 1).any() and (labels == 0).any()):
        return None
    return labels, both["score_a"].to_numpy(float), both["score_b"].to_numpy(float)


def _tpr_level(columns) -> str | None:
    """The lowest non-zero FPR key of the metrics (ΔTPR is read there)."""
    return next((k for k in fpr_keys(columns) if float(k) > 0), None)


_EFFECT_COLUMNS = (
    "defenses",
    "channels",
    "delta_auc",
    "delta_auc_lo",
    "delta_auc_hi",
    "n_paired_members",
    "n_paired_nonmembers",
    "delta_tpr",
    "effect",
    "verdict",
)


def defense_effect_frame(
    metrics: pd.DataFrame,
    target_defenses: dict,
    defense_channels: dict,
    attack_channels,
    baselines: dict,
    scores: dict | None = None,
) -> pd.DataFrame:
    """Metrics rows of the headline variants of every attack on every target, with the columns
    ``defenses``, ``channels`` (what the attack reads ∩ what the defenses can change), ``delta_auc``,
    ``delta_auc_lo``, ``delta_auc_hi`` (AUC of the defended target minus AUC of its undefended target
    on the same evaluation candidates, with its 95% MOVER interval, the two AUCs' score intervals combined
    with DeLong's correlation of the paired estimates: :func:`ragmi.metrics.paired_auc_difference`, which
    keeps its width where an AUC is 1), ``n_paired_members`` / ``n_paired_nonmembers``,
    ``delta_tpr`` (the point difference of TPR at the lowest non-zero FPR level, NaN where either
    target's reference set cannot resolve it), ``effect`` (the Markdown cell) and ``verdict``:
    ``baseline`` (an undefended target), ``reduces`` / ``increases`` (the interval excludes 0),
    ``no detectable change``, ``indirect`` (the defense's active channels and the channels the attack
    reads do not overlap; ΔAUC is still printed, for information), or ``not compared`` (no undefended
    target, or no scores of both on the same candidates).

    ``target_defenses``: {target: [defense names]}; ``defense_channels``: {(target, defense): set of
    effective channels}; ``attack_channels(attack, variant)`` → channels the variant reads;
    ``baselines``: :func:`baseline_targets`; ``scores``: {(dataset, target, attack): scores frame with
    doc_id, variant, score, label, role} of the defended targets and their baselines.  Nothing is
    resampled: the frame is a function of its inputs."""
    scores = scores or {}
    df = metrics[metrics["variant"].map(is_main_variant)].copy()
    tpr_key = _tpr_level(df.columns)
    out: dict[str, list] = {k: [] for k in _EFFECT_COLUMNS}
    for _, r in df.iterrows():
        cells = _effect_cells(
            r, metrics, target_defenses, defense_channels, attack_channels, baselines, scores, tpr_key
        )
        for k in out:
            out[k].append(cells.get(k, float("nan")))
    for k, v in out.items():
        df[k] = v
    return df.reset_index(drop=True)


def _effect_cells(
    r: pd.Series,
    metrics: pd.DataFrame,
    target_defenses: dict,
    defense_channels: dict,
    attack_channels,
    baselines: dict,
    scores: dict,
    tpr_key: str | None,
) -> dict:
    """The defense-effect columns of one metrics row (:func:`defense_effect_frame`; absent ones are NaN)."""
    t = r["target"]
    defs = list(target_defenses.get(t, []))
    names = ", ".join(defs) if defs else UNDEFENDED
    if not defs:
        return {"defenses": names, "channels": DASH, "effect": "baseline", "verdict": "baseline"}
    reads = set(attack_channels(r["attack"], r["variant"]))
    changes = set().union(*[defense_channels.get((t, d), set()) for d in defs])
    chans = ", ".join(sorted(reads & changes))
    indirect = not interpretable(changes, reads)
    base = baselines.get(t)
    pair = None
    if base is not None and base != t:
        a, b = scores.get((r["dataset"], t, r["attack"])), scores.get((r["dataset"], base, r["attack"]))
        if a is not None and b is not None:
            pair = paired_eval_scores(a, b, str(r["variant"]))
    if pair is None:
        why = "no undefended target" if base is None else "no scores of both targets on the same candidates"
        effect = "indirect (no shared channel)" if indirect else f"{DASH} ({why})"
        verdict = "indirect" if indirect else "not compared"
        return {"defenses": names, "channels": chans, "effect": effect, "verdict": verdict}
    labels, sa, sb = pair
    delta, lo, hi = metrics_mod.paired_auc_difference(labels, sa, sb)
    d_tpr, tpr_text = _delta_tpr(r, metrics, base, tpr_key)
    cell = format_delta(delta, lo, hi) + tpr_text
    if indirect:
        verdict, cell = "indirect", f"indirect (no shared channel); for information: {cell}"
    else:
        verdict = effect_verdict(lo, hi)
    return {
        "defenses": names,
        "channels": chans,
        "delta_auc": delta,
        "delta_auc_lo": lo,
        "delta_auc_hi": hi,
        "n_paired_members": int((labels == 1).sum()),
        "n_paired_nonmembers": int((labels == 0).sum()),
        "delta_tpr": d_tpr,
        "effect": cell,
        "verdict": verdict,
    }


def _delta_tpr(r: pd.Series, metrics: pd.DataFrame, base: str, tpr_key: str | None) -> tuple[float, str]:
    """``(ΔTPR, its text for the effect cell)`` of row ``r`` against its undefended target ``base`` at
    FPR level ``tpr_key``; ``(NaN, "")`` where either reference set cannot resolve it."""
    tpr_col = f"tpr_at_fpr_{tpr_key}" if tpr_key else None
    if not (tpr_col and tpr_col in metrics.columns):
        return float("nan"), ""
    bm = metrics[
        (metrics["dataset"] == r["dataset"]) & (metrics["target"] == base) & (metrics["variant"] == r["variant"])
    ]
    if not len(bm):
        return float("nan"), ""
    b_row = bm.iloc[0]
    ok = all(tpr_estimable(x, tpr_key) for x in (r, b_row))
    if ok and not (pd.isna(r[tpr_col]) or pd.isna(b_row[tpr_col])):
        d_tpr = float(r[tpr_col] - b_row[tpr_col])
        return d_tpr, f", ΔTPR at ref. threshold for {tpr_key}% FPR {signed(d_tpr)}"
    return float("nan"), ""
