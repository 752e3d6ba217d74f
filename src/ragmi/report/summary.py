"""The headline table ``summary``: does each attack's headline variant leak membership on each target?

One row per (dataset, target, attack headline variant) over every target that is not a negative
control: the defenses, n, AUC with its 95% interval, TPR at the lowest FPR level the row's reference
set resolves (the level named in the cell), queries and tokens per candidate, and a verdict:

* ``leaks``: the AUC interval lies above 0.5;
* ``inverted``: it lies below 0.5 (the score ranks non-members higher: informative, the wrong way);
* ``no evidence at this n``: it contains 0.5 (an attack with a small true AUC cannot be told from
  chance at this n: the footnote gives the smallest AUC that could, :func:`ragmi.metrics.min_detectable_auc`);
* ``control failed``, overriding the others: a negative control of the same target, dataset and
  variant (``<target>--null-db``, ``<target>--no-retrieval``) has an AUC interval that excludes 0.5, so
  the attack separates members from non-members by something other than membership of the database;
* ``not computed``: the variant was skipped (e.g. a gray-box variant on a target without
  log-probabilities).

The frame (and CSV) is deterministic in its inputs: no resampling happens here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..costs import OUTPUT_TOKENS, PROMPT_TOKENS, QUERIES
from ..metrics import fpr_estimable, min_detectable_auc
from .comparison import CONTROL_SUFFIX, control_excludes_chance, is_main_variant
from .tables import DASH, _fpr_keys, format_ci, format_extra, format_n

VERDICTS = ("leaks", "inverted", "no evidence at this n", "control failed", "not computed")
CONTROL_SHORT = {"null_database": "null-db", "no_retrieval": "k=0"}
TOKENS = "tokens_per_candidate"

COLUMNS = [
    "dataset",
    "target",
    "defenses",
    "attack",
    "variant",
    "n_members",
    "n_nonmembers",
    "n_ref_members",
    "n_ref_nonmembers",
    "auc",
    "auc_lo",
    "auc_hi",
    "tpr_fpr",
    "tpr",
    "tpr_lo",
    "tpr_hi",
    "tpr_note",
    "tpr_retrieved",
    "tpr_retrieved_lo",
    "tpr_retrieved_hi",
    "n_retrieved_members",
    QUERIES,
    PROMPT_TOKENS,
    OUTPUT_TOKENS,
    TOKENS,
    "controls",
    "min_detectable_auc",
    "verdict",
    "verdict_detail",
]


def auc_verdict(lo: float, hi: float) -> str:
    """``leaks`` (lo > 0.5), ``inverted`` (hi < 0.5), else ``no evidence at this n``."""
    if lo > 0.5:
        return "leaks"
    if hi < 0.5:
        return "inverted"
    return "no evidence at this n"


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _lowest_tpr(r: pd.Series, keys: Sequence[str]) -> tuple[float, float, float, float, str]:
    """``(level, tpr, lo, hi, note)``: TPR at the lowest non-zero FPR level the row's reference set
    resolves, else at 0% FPR (the note says why)."""
    n_ref = _num(r.get("n_ref_nonmembers"))
    nonzero = [k for k in keys if float(k) > 0]
    ok = [k for k in nonzero if math.isnan(n_ref) or fpr_estimable(float(k) / 100, int(n_ref))]
    note = ""
    if ok:
        key = ok[0]
        skipped = [k for k in nonzero if float(k) < float(key)]
        if skipped:
            levels = " and ".join(f"{k}%" for k in skipped)
            note = f"TPR@{levels} FPR not estimable with {int(n_ref)} reference non-members"
    elif "0" in keys:
        key = "0"
        if nonzero:
            note = f"no non-zero FPR level estimable with {int(n_ref)} reference non-members"
    else:
        return float("nan"), float("nan"), float("nan"), float("nan"), "no TPR@FPR column"
    g = r.get
    return (
        float(key) / 100,
        _num(g(f"tpr_at_fpr_{key}")),
        _num(g(f"tpr_at_fpr_{key}_lo")),
        _num(g(f"tpr_at_fpr_{key}_hi")),
        note,
    )


def summary_frame(metrics: pd.DataFrame, targets: Mapping) -> pd.DataFrame:
    """The summary rows (columns :data:`COLUMNS`) from the concatenated metrics CSVs of every run
    (controls included: their AUCs decide ``control failed``) and the validated ``targets`` section."""

    def control(t):
        return targets[t]["control"] if t in targets else "none"

    m = metrics[metrics["variant"].astype(str).map(is_main_variant)]
    key = {(r["dataset"], r["target"], r["variant"]): r for _, r in m.iterrows()}
    keys = _fpr_keys(metrics.columns)
    rows = []
    for _, r in m.iterrows():
        t = r["target"]
        if control(t) != "none":
            continue
        level, tpr, tpr_lo, tpr_hi, tpr_note = _lowest_tpr(r, keys)
        pt, ot = _num(r.get(PROMPT_TOKENS)), _num(r.get(OUTPUT_TOKENS))
        tokens = float("nan") if math.isnan(pt) and math.isnan(ot) else float(np.nansum([pt, ot]))
        auc, lo, hi = _num(r.get("auc")), _num(r.get("auc_lo")), _num(r.get("auc_hi"))
        nm, nn = _num(r.get("n_members")), _num(r.get("n_nonmembers"))
        controls, failed = [], []
        for kind, suffix in CONTROL_SUFFIX.items():
            c = key.get((r["dataset"], t + suffix, r["variant"]))
            if c is None or control(t + suffix) != kind:
                continue
            cell = f"{CONTROL_SHORT[kind]} AUC {format_ci(c.get('auc'), c.get('auc_lo'), c.get('auc_hi'))}"
            controls.append(cell)
            if control_excludes_chance(c):
                failed.append(cell)
        skipped = r.get("skipped")
        if isinstance(skipped, str) and skipped or math.isnan(auc) or math.isnan(lo) or math.isnan(hi):
            verdict = "not computed"
            detail = skipped if isinstance(skipped, str) and skipped else "no AUC interval"
        elif failed:
            verdict = "control failed"
            detail = "; ".join(f"{c} excludes 0.5" for c in failed) + f" (own verdict: {auc_verdict(lo, hi)})"
        else:
            verdict, detail = auc_verdict(lo, hi), ""
        defs = targets[t]["defenses"] if t in targets else []
        rows.append(
            {
                "dataset": r["dataset"],
                "target": t,
                "defenses": ", ".join(defs),
                "attack": r["attack"],
                "variant": r["variant"],
                "n_members": nm,
                "n_nonmembers": nn,
                "n_ref_members": _num(r.get("n_ref_members")),
                "n_ref_nonmembers": _num(r.get("n_ref_nonmembers")),
                "auc": auc,
                "auc_lo": lo,
                "auc_hi": hi,
                "tpr_fpr": level,
                "tpr": tpr,
                "tpr_lo": tpr_lo,
                "tpr_hi": tpr_hi,
                "tpr_note": tpr_note,
                # TPR | retrieved at the same level (ragmi.metrics.retrieved_tpr): in the CSV only, the
                # Markdown table keeps its 10 columns (attack_comparison.md shows it)
                **{c: _num(r.get(c)) for c in ("tpr_retrieved", "tpr_retrieved_lo", "tpr_retrieved_hi")},
                "n_retrieved_members": _num(r.get("n_retrieved_members")),
                QUERIES: _num(r.get(QUERIES)),
                PROMPT_TOKENS: pt,
                OUTPUT_TOKENS: ot,
                TOKENS: tokens,
                "controls": "; ".join(controls),
                "min_detectable_auc": (min_detectable_auc(int(nm), int(nn)) if nm >= 1 and nn >= 1 else float("nan")),
                "verdict": verdict,
                "verdict_detail": detail,
            }
        )
    out = pd.DataFrame(rows, columns=COLUMNS)
    for c in ("n_members", "n_nonmembers", "n_ref_members", "n_ref_nonmembers", "n_retrieved_members"):
        out[c] = out[c].astype("Int64")  # integers in the CSV (50, not 50.0); missing stays empty
    return out


def _pct_level(level: float) -> str:
    return f"{round(100 * level, 6):g}%"


def _tpr_cell(r: pd.Series) -> str:
    if pd.isna(r["tpr_fpr"]) or pd.isna(r["tpr"]):
        return DASH
    return f"TPR@{_pct_level(r['tpr_fpr'])}FPR {format_ci(r['tpr'], r['tpr_lo'], r['tpr_hi'])}"


def _escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def power_note(df: pd.DataFrame) -> str | None:
    """The footnote with the smallest detectable AUC for each evaluation size of the table."""
    sizes = (
        df.loc[df["min_detectable_auc"].notna(), ["n_members", "n_nonmembers", "min_detectable_auc"]]
        .drop_duplicates(["n_members", "n_nonmembers"])
        .sort_values(["n_members", "n_nonmembers"])
    )
    if sizes.empty:
        return None
    parts = [f"at n = {int(a)}+{int(b)} is about {x:.2f}" for a, b, x in sizes.itertuples(index=False)]
    return (
        "Power: the smallest AUC whose 95% interval excludes 0.5 "
        + "; ".join(parts)
        + " (A − 1.96·SE(A) > 0.5 with the Hanley–McNeil 1982 standard error): an attack whose true AUC is "
        "smaller is reported as 'no evidence at this n', which is not evidence of no leakage."
    )


def controls_note(df: pd.DataFrame) -> str | None:
    """The footnote that puts the failed controls beside what chance alone gives: with m 95% control
    intervals, about 0.05·m exclude 0.5 when nothing is wrong (1 − 0.95^m that at least one does, were
    they independent; the variants of one attack share their answers, so they are not)."""
    cells = [c for v in df["controls"] if isinstance(v, str) and v for c in v.split("; ")]
    if not cells:
        return None
    m = len(cells)
    failed = sum(str(d).count(" excludes 0.5") for d in df["verdict_detail"])
    return (
        f"Controls: {failed} of {m} control AUC intervals exclude 0.5. With 95% intervals about "
        f"{0.05 * m:.2g} would by chance alone ({1 - 0.95**m:.0%} that at least one does, were they independent; "
        "the variants of one attack share their answers): a failed control is a reason to read that attack's "
        "answers, and its row is not read as a finding either way."
    )


def summary_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """At most 10 columns: dataset, target, defenses, attack/variant, n eval, AUC, TPR at the lowest
    resolvable FPR, queries/candidate, tokens/candidate, verdict; then the footnotes."""
    header = [
        "dataset",
        "target",
        "defenses",
        "attack/variant",
        "n eval (m/nm)",
        "AUC [95% CI]",
        "TPR at lowest resolvable FPR",
        "queries/candidate",
        "tokens/candidate (prompt+output)",
        "verdict",
    ]
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for _, r in df.iterrows():
        verdict = r["verdict"]
        if verdict in ("control failed", "not computed") and r["verdict_detail"]:
            verdict = f"{verdict} ({r['verdict_detail']})"
        variant = str(r["variant"])
        cells = [
            r["dataset"],
            r["target"],
            r["defenses"] or "none",
            variant if variant.startswith(f"{r['attack']}/") or variant == r["attack"] else f"{r['attack']}: {variant}",
            format_n(r["n_members"], r["n_nonmembers"]),
            format_ci(r["auc"], r["auc_lo"], r["auc_hi"]),
            _tpr_cell(r),
            format_extra(QUERIES, r[QUERIES]),
            format_extra(TOKENS, r[TOKENS]),
            verdict,
        ]
        lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    lines.append("")
    power = power_note(df)
    if power:
        lines.append(f"- {power}")
    controls = controls_note(df)
    if controls:
        lines.append(f"- {controls}")
    limited = sorted({n for n in df["tpr_note"] if n})
    if limited:
        lines.append(
            "- TPR is reported at the lowest configured non-zero FPR level x that the row's reference set resolves "
            "(at least 1/x reference non-members); coarser here: " + "; ".join(limited) + "."
        )
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
