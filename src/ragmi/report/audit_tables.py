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

import pandas as pd

from ..analysis.leakage import PER_TARGET, POOLED, UNDEFENDED
from ..audit import stats
from ..audit.inventory import PRE_GENERATION
from ..cells import DASH, escape
from ..multiplicity import holm
from .comparison import audit_published
from .tables import APPENDIX_HEADING, APPENDIX_LEAD, constant_caption, grid, plain_markdown


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
