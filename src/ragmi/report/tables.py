"""Metric tables: a full-precision CSV and a human-readable Markdown table.

The Markdown table has one row per (``dataset``, ``target``, ``attack``, ``variant``) — whichever of
these grouping columns the metrics frame has, in that order — and cells such as
``0.81 [0.75, 0.86]`` (point estimate and 95% CI, 2 decimals: ragmi.metrics).  "Accuracy (decision
rule)" and "Rule TPR / FPR" are those of the variant's own decision rule (the papers' accuracy);
"Best-threshold acc. (ragmi)" is the accuracy of ragmi's reference-set threshold on the score, labelled
apart and never compared with a paper.  A footnote states the protocol: thresholds chosen on the
reference set and applied to the evaluation set, the intervals, and the meaning of the two TPR figures
(TPR at low FPR, Carlini et al. 2022, as used in RAG-MIA §5).  A TPR@x%FPR cell the reference set
cannot resolve (fewer than 1/x reference non-members: :func:`ragmi.metrics.fpr_estimable`) prints
"n/e" (not estimable), with a footnote saying why.  "TPR | retrieved" (:func:`retrieved_cell`) is the TPR
over the evaluation members whose own document the target retrieved for at least one of the
variant's queries, where the target says what it retrieved.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence

import pandas as pd

from ..costs import COST_LABELS
from ..io import atomic_write_text
from ..metrics import fpr_estimable

GROUP_COLUMNS = ["dataset", "target", "attack", "variant"]
DASH = "–"
NOT_ESTIMABLE = "n/e"
NOT_AVAILABLE = "n/a"

_TPR_COL = re.compile(r"^tpr_at_fpr_(?P<k>[0-9.]+)$")


# --------------------------------------------------------------------------------------------
# Cell formatting
# --------------------------------------------------------------------------------------------
def _missing(x) -> bool:
    if x is None or x is pd.NA:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def format_ci(value, lo, hi, digits: int = 2) -> str:
    """``"0.81 [0.75, 0.86]"``; ``"0.81"`` when the CI is missing; ``"–"`` when the value is."""
    if _missing(value):
        return DASH
    cell = f"{float(value):.{digits}f}"
    if not (_missing(lo) or _missing(hi)):
        cell += f" [{float(lo):.{digits}f}, {float(hi):.{digits}f}]"
    return cell


def format_n(members, nonmembers) -> str:
    """``"50/50"`` (members/non-members)."""
    if _missing(members) or _missing(nonmembers):
        return DASH
    return f"{int(members)}/{int(nonmembers)}"


def format_extra(name: str, value) -> str:
    """A cost or bookkeeping cell: rates as percentages, counts as integers, else 2 decimals."""
    if _missing(value):
        return DASH
    if isinstance(value, str):
        return value
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if name.endswith("_rate") or name.endswith("_fraction"):
        return f"{100 * v:.1f}%"
    if math.isfinite(v) and v == int(v):
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}"


def _escape(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fpr_keys(columns: Iterable[str]) -> list[str]:
    """FPR suffixes present in the metrics (``tpr_at_fpr_{k}``), in numeric order."""
    keys = [m.group("k") for c in columns if (m := _TPR_COL.match(c))]
    return sorted(keys, key=float)


def tpr_estimable(row, key: str) -> bool:
    """Whether the row's reference set resolves TPR@``key``%FPR (True when its size is unknown)."""
    n_ref = row.get("n_ref_nonmembers")
    return _missing(n_ref) or fpr_estimable(float(key) / 100, int(n_ref))


def tpr_cell(row, key: str, realized: bool = True) -> str:
    """The TPR at the reference threshold for ``key``% FPR: ``"0.30 [0.18, 0.44] at eval FPR 0.05 [0.00,
    0.25]"`` (the FPR that threshold realised on the evaluation non-members, Clopper–Pearson); "n/e" when
    the reference set cannot resolve the level (whatever the CSV holds: metrics written before that rule
    repeat TPR@0%FPR there)."""
    if not tpr_estimable(row, key):
        return NOT_ESTIMABLE
    g = row.get
    cell = format_ci(g(f"tpr_at_fpr_{key}"), g(f"tpr_at_fpr_{key}_lo"), g(f"tpr_at_fpr_{key}_hi"))
    fpr = g(f"fpr_realized_{key}")
    if realized and cell != DASH and not _missing(fpr):
        cell += f" at eval FPR {format_ci(fpr, g(f'fpr_realized_{key}_lo'), g(f'fpr_realized_{key}_hi'))}"
    return cell


def roc_tpr_cell(row, key: str) -> str:
    """The evaluation ROC's TPR at ``key``% FPR (``tpr_roc_<key>``, Clopper–Pearson), "n/e" when the
    evaluation non-members do not resolve the level (x·n < 1)."""
    g = row.get
    if _missing(g(f"tpr_roc_{key}")):
        return DASH if _missing(g("auc")) else NOT_ESTIMABLE
    return format_ci(g(f"tpr_roc_{key}"), g(f"tpr_roc_{key}_lo"), g(f"tpr_roc_{key}_hi"))


def retrieved_cell(row) -> str:
    """``"0.40 [0.20, 0.63] (n=10 at 5% FPR)"``: TPR among the evaluation members the target retrieved
    (``tpr_retrieved``, Clopper–Pearson interval, ``n_retrieved_members``, at the reference threshold of the level
    ``tpr_retrieved_fpr``); "n/a" where the target does not say what it retrieved; "n/e" where no
    configured FPR level is resolvable; "–" for a row without metrics (a skipped variant)."""
    g = row.get
    n = g("n_retrieved_members")
    if _missing(n):
        return DASH if _missing(g("auc")) else NOT_AVAILABLE
    if _missing(g("tpr_retrieved_fpr")):  # no configured FPR level is resolvable by the reference set
        return NOT_ESTIMABLE
    level = f"{round(100 * float(g('tpr_retrieved_fpr')), 6):g}%"
    return f"{format_ci(g('tpr_retrieved'), g('tpr_retrieved_lo'), g('tpr_retrieved_hi'))} (n={int(n)} at {level} FPR)"


RETRIEVED_NOTE = (
    "TPR | retrieved: the TPR of the evaluation members whose own document the target retrieved for at "
    "least one of the variant's queries (its retrieved ids: ragmi's own targets, a remote target with "
    "sources_path, a python target that returns them), at the reference-set threshold of the level named in "
    "the cell (the lowest configured non-zero FPR level the reference set resolves, else 0%; the same "
    "threshold as that reference-threshold TPR column, never refitted), with the number n of such members and a "
    "95% Clopper–Pearson interval (tpr_retrieved, tpr_retrieved_lo/_hi, n_retrieved_members, tpr_retrieved_fpr in the CSV; the "
    "share of all queries is candidate_retrieved_rate); n/a = the target does not say what it retrieved; "
    "n/e = no configured FPR level is resolvable; "
    f"{DASH} (n=0) = none of the members was retrieved."
)


def not_estimable_note(n_ref_values: Iterable, keys: Sequence[str]) -> str | None:
    """The footnote explaining "n/e" cells, or None when no row has one."""
    sizes = sorted({int(n) for n in n_ref_values if not _missing(n)})
    coarse = [k for k in keys if any(not fpr_estimable(float(k) / 100, n) for n in sizes)]
    if not coarse:
        return None
    small = ", ".join(str(n) for n in sizes if any(not fpr_estimable(float(k) / 100, n) for k in coarse))
    need = ", ".join(f"{k}% needs {math.ceil(100 / float(k) - 1e-9)}" for k in coarse)
    return (
        f"n/e = not estimable: a threshold at x% FPR needs at least 1/x reference non-members ({need}); "
        f"with {small} reference non-members the smallest non-zero reference FPR is larger than the level, "
        "so that TPR would only repeat TPR@0%FPR and is not reported (NaN in the CSV)."
    )


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def markdown_table(
    metrics_df: pd.DataFrame,
    title: str,
    extra_columns: Sequence[str] | None = None,
    notes: Sequence[str] | None = None,
) -> str:
    """The Markdown text that :func:`write_tables` writes."""
    if metrics_df.empty:
        raise ValueError("metrics table is empty")
    extra = list(extra_columns or [])
    absent = [c for c in extra if c not in metrics_df.columns]
    if absent:
        raise ValueError(f"extra columns not in the metrics table: {absent}")
    groups = [c for c in GROUP_COLUMNS if c in metrics_df.columns]
    keys = _fpr_keys(metrics_df.columns)
    has_bb = "bb_tpr" in metrics_df.columns and metrics_df["bb_tpr"].notna().any()
    has_thr = "threshold_accuracy" in metrics_df.columns
    has_retr = "n_retrieved_members" in metrics_df.columns
    df = metrics_df.sort_values(groups, kind="stable") if groups else metrics_df

    header = list(groups) + ["n eval (m/nm)", "n ref (m/nm)", "AUC", "Accuracy (decision rule)"]
    roc_keys = [k for k in keys if float(k) > 0 and f"tpr_roc_{k}" in metrics_df.columns]
    header += [f"TPR@{k}%FPR (eval ROC)" for k in roc_keys]
    header += [f"TPR at ref. threshold for {k}% FPR" for k in keys]
    if has_retr:
        header += ["TPR \\| retrieved"]
    if has_bb:
        header += ["Rule TPR", "Rule FPR"]
    if has_thr:
        header += ["Best-threshold acc. (ragmi)"]
    header += [COST_LABELS.get(c, c) for c in extra]  # other extra columns keep their names

    lines = [f"# {title}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    for _, r in df.iterrows():
        g = r.get
        cells = [_escape(r[c]) for c in groups]
        cells.append(format_n(g("n_members"), g("n_nonmembers")))
        cells.append(format_n(g("n_ref_members"), g("n_ref_nonmembers")))
        cells.append(format_ci(g("auc"), g("auc_lo"), g("auc_hi")))
        cells.append(format_ci(g("accuracy"), g("accuracy_lo"), g("accuracy_hi")))
        cells += [roc_tpr_cell(r, k) for k in roc_keys]
        cells += [tpr_cell(r, k) for k in keys]
        if has_retr:
            cells.append(retrieved_cell(r))
        if has_bb:
            cells.append(format_ci(g("bb_tpr"), g("bb_tpr_lo"), g("bb_tpr_hi")))
            cells.append(format_ci(g("bb_fpr"), g("bb_fpr_lo"), g("bb_fpr_hi")))
        if has_thr:
            cells.append(format_ci(g("threshold_accuracy"), g("threshold_accuracy_lo"), g("threshold_accuracy_hi")))
        cells += [_escape(format_extra(c, r[c])) for c in extra]
        lines.append("| " + " | ".join(cells) + " |")

    lines += [
        "",
        "- Thresholds are chosen on the reference set and applied unchanged to the evaluation set; "
        "no number is fitted on the data it is scored on. AUC is computed on the evaluation set.",
        "- Brackets: 95% confidence intervals: for the AUC the score interval of the Mann–Whitney statistic "
        "(ragmi.metrics.auc_ci: it keeps its width at 0.5 and 1), for every rate (TPR, FPR, accuracy) the "
        "exact Clopper–Pearson interval; reference thresholds held fixed.",
        "- n: members/non-members, for the evaluation set (n eval) and the reference set (n ref).",
        "- TPR@x%FPR (eval ROC): the true-positive rate read from the evaluation ROC at false-positive rate "
        "x (TPR at low FPR, Carlini et al. 2022, as LiRA and MIMIR report it; the threshold is chosen on the "
        "evaluation set, so it is optimistic), printed when the evaluation non-members resolve x (x·n ≥ 1), "
        "else n/e.",
        "- TPR at ref. threshold for x% FPR: the operational rate, at the threshold whose false-positive rate "
        "on the reference non-members is at most x%, with the false-positive rate that threshold actually "
        "realised on the evaluation non-members ('at eval FPR').",
        "- Accuracy (decision rule): the accuracy of the variant's own decision rule on the evaluation set "
        "(RAG-MIA's Yes/No, DCMI's C > γ, MBA's γ, S2MIA's T, an attack model's predicted class), the "
        f"accuracy the papers report; {DASH} for a variant without a rule. Best-threshold acc. (ragmi): the "
        "evaluation accuracy of the score threshold that maximises accuracy on the reference set; it is "
        "ragmi's, not a paper's, and is never compared with a published accuracy.",
    ]
    if "n_ref_nonmembers" in metrics_df.columns:
        ne = not_estimable_note(metrics_df["n_ref_nonmembers"], keys)
        if ne:
            lines.append(f"- {ne}")
    if has_bb:
        lines.append(
            "- Rule TPR / Rule FPR (bb_tpr / bb_fpr in the CSV): true- and false-positive rates of the "
            "variant's decision rule on the evaluation set (for RAG-MIA's black box, the paper's "
            f"'Black-Box TPR / FPR'); {DASH} for variants without a rule."
        )
    if has_retr:
        lines.append(f"- {_escape(RETRIEVED_NOTE)}")
    lines += [f"- {note}" for note in (notes or [])]
    return "\n".join(lines) + "\n"


def write_tables(
    metrics_df: pd.DataFrame,
    out_csv: str | os.PathLike,
    out_md: str | os.PathLike,
    title: str,
    extra_columns: Sequence[str] | None = None,
    notes: Sequence[str] | None = None,
) -> None:
    """Write ``metrics_df`` as a full-precision CSV (every column) and as a Markdown table.

    ``extra_columns`` (e.g. ``queries_per_candidate``, ``candidate_retrieved_rate``) are appended to
    the Markdown table, cost columns under their :data:`ragmi.costs.COST_LABELS` header; ``notes``
    are appended as bullet lines after the footnote.  Both files are written atomically
    (temporary file in the same directory, then ``os.replace``).
    """
    md = markdown_table(metrics_df, title, extra_columns=extra_columns, notes=notes)
    atomic_write_text(metrics_df.to_csv(index=False, lineterminator="\n"), out_csv)
    atomic_write_text(md, out_md)
