"""Metric tables: a full-precision CSV and a human-readable Markdown table.

The Markdown has one row per (``dataset``, ``target``, ``attack``, ``variant``) — whichever of these
grouping columns the metrics frame has, in that order — in two tables (:func:`split_markdown`): a core
table a person reads on one screen (the row's name, its verdict, n, AUC, the two headline TPRs, the
decision rule's accuracy: at most about ten columns), and under ``## All columns`` every other column for
the same rows; a column with one value in every row is said once, in a caption line under the title
(``Same in every row: dataset synthetic; n eval (m/nm) 20/20; …``).  Cells such as
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

The cell formats every table shares live in :mod:`ragmi.cells`; what a metrics row says (its FPR
levels, its headline TPRs, its verdict) in :mod:`ragmi.metric_rows`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from ..cells import (
    DASH,
    EVAL_ROC,
    FPR_NOT_RECORDED,
    NOT_AVAILABLE,
    NOT_ESTIMABLE,
    escape,
    format_ci,
    format_extra,
    format_level,
    format_n,
    is_missing,
    realised_fpr,
    signed,
)
from ..costs import COST_LABELS
from ..io import atomic_write_text
from ..metric_rows import auc_verdict, fpr_keys, is_informative, lowest_tpr, roc_tpr, tpr_estimable
from ..metrics import fpr_estimable, fpr_key

GROUP_COLUMNS = ["dataset", "target", "attack", "variant"]


# --------------------------------------------------------------------------------------------
# Cells of the metric tables
# --------------------------------------------------------------------------------------------
def tpr_cell(row, key: str, realized: bool = True) -> str:
    """The TPR at the reference threshold for ``key``% FPR: ``"0.30 [0.18, 0.44] (eval FPR 0.05 [0.00,
    0.25], n = 20)"`` (the FPR that threshold realised on the n evaluation non-members, Clopper–Pearson:
    :func:`ragmi.cells.realised_fpr`, "eval FPR not recorded" for metrics without it); "n/e" when
    the reference set cannot resolve the level (whatever the CSV holds: metrics written before that rule
    repeat TPR@0%FPR there)."""
    if not tpr_estimable(row, key):
        return NOT_ESTIMABLE
    g = row.get
    cell = format_ci(g(f"tpr_at_fpr_{key}"), g(f"tpr_at_fpr_{key}_lo"), g(f"tpr_at_fpr_{key}_hi"))
    if realized and cell != DASH:
        fpr = realised_fpr(
            g(f"fpr_realized_{key}"), g(f"fpr_realized_{key}_lo"), g(f"fpr_realized_{key}_hi"), g("n_nonmembers")
        )
        cell += f" ({fpr})"
    return cell


def roc_tpr_cell(row, key: str) -> str:
    """The evaluation ROC's TPR at ``key``% FPR (``tpr_roc_<key>``, Clopper–Pearson), labelled ``(eval
    ROC)`` in the cell itself; "n/e" when the evaluation non-members do not resolve the level (x·n < 1)."""
    g = row.get
    if is_missing(g(f"tpr_roc_{key}")):
        return DASH if is_missing(g("auc")) else NOT_ESTIMABLE
    return f"{format_ci(g(f'tpr_roc_{key}'), g(f'tpr_roc_{key}_lo'), g(f'tpr_roc_{key}_hi'))} ({EVAL_ROC})"


def retrieved_cell(row) -> str:
    """``"0.40 [0.20, 0.63] of 10 retrieved members at the ref. threshold for 5% FPR (eval FPR 0.05 [0.00,
    0.25], n = 20)"``: TPR among the evaluation members the target retrieved (``tpr_retrieved``,
    Clopper–Pearson interval, ``n_retrieved_members``) at the reference threshold of the level
    ``tpr_retrieved_fpr``, with the FPR that threshold realised on all n evaluation non-members
    (``fpr_realized_<k>`` of the row: the retrieval condition selects members only, so the non-members'
    FPR is the row's); "n/a" where the target does not say what it retrieved; "n/e" where no configured
    FPR level is resolvable; "– (0 retrieved members)" where none was retrieved; "–" for a row without
    metrics (a skipped variant)."""
    g = row.get
    n = g("n_retrieved_members")
    if is_missing(n):
        return DASH if is_missing(g("auc")) else NOT_AVAILABLE
    if is_missing(g("tpr_retrieved_fpr")):  # no configured FPR level is resolvable by the reference set
        return NOT_ESTIMABLE
    if int(n) == 0:
        return f"{DASH} (0 retrieved members)"
    if is_missing(g("tpr_retrieved")):
        return DASH
    level = float(g("tpr_retrieved_fpr"))
    k = fpr_key(level)
    fpr = realised_fpr(g(f"fpr_realized_{k}"), g(f"fpr_realized_{k}_lo"), g(f"fpr_realized_{k}_hi"), g("n_nonmembers"))
    return (
        f"{format_ci(g('tpr_retrieved'), g('tpr_retrieved_lo'), g('tpr_retrieved_hi'))} of {int(n)} retrieved "
        f"members at the ref. threshold for {format_level(level)} FPR ({fpr})"
    )


RETRIEVED_NOTE = (
    "TPR | retrieved: the TPR of the evaluation members whose own document the target retrieved for at "
    "least one of the variant's queries (its retrieved ids: ragmi's own targets, a remote target with "
    "sources_path, a python target that returns them), at the reference-set threshold of the level named in "
    "the cell (the lowest configured non-zero FPR level the reference set resolves, else 0%; the same "
    "threshold as that reference-threshold TPR column, never refitted), with the number of such members and a "
    "95% Clopper–Pearson interval (tpr_retrieved, tpr_retrieved_lo/_hi, n_retrieved_members, tpr_retrieved_fpr in the CSV; the "
    "share of all queries is candidate_retrieved_rate), and the false-positive rate that threshold realised "
    "on the n evaluation non-members with its Clopper–Pearson interval (fpr_realized_<x> in the CSV): the TPR "
    "is 'at x% FPR' only as far as that eval FPR says so; n/a = the target does not say what it retrieved; "
    "n/e = no configured FPR level is resolvable; "
    f"{DASH} (0 retrieved members) = none of the members was retrieved."
)


def not_estimable_note(n_ref_values: Iterable, keys: Sequence[str]) -> str | None:
    """The footnote explaining "n/e" cells, or None when no row has one."""
    sizes = sorted({int(n) for n in n_ref_values if not is_missing(n)})
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
# A readable core table and the rest below it
# --------------------------------------------------------------------------------------------
APPENDIX_HEADING = "## All columns"
APPENDIX_LEAD = (
    "The columns the table above leaves out, for the same rows (the CSV has every column, at full precision)."
)
_EMPTY = ("", DASH)


def grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines; cells and header are given escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def constant_caption(cells: Mapping[str, Sequence[str]], n_rows: int) -> tuple[dict, list[str]]:
    """``({column: value}, caption lines)`` of the columns with one value in every row (two rows or more):
    ``Same in every row: dataset synthetic; n eval (m/nm) 20/20.`` and, for the columns that are empty
    or "–" throughout, ``No value in any row: published, note.``"""
    if n_rows < 2:
        return {}, []
    const = {c: v[0] for c, v in cells.items() if len(set(v)) == 1}
    same = [f"{c} {v}" for c, v in const.items() if v not in _EMPTY]
    empty = [c for c, v in const.items() if v in _EMPTY]
    caption = []
    if same:
        caption.append(f"Same in every row: {'; '.join(same)}.")
    if empty:
        caption.append(f"No value in any row: {', '.join(empty)}.")
    return const, caption


def split_markdown(
    title: str,
    cells: Mapping[str, Sequence[str]],
    core: Sequence[str],
    key: Sequence[str],
    notes: Sequence[str] = (),
    caption: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> str:
    """A table people read: the ``core`` columns of ``cells`` ({header: escaped cell per row}, in column
    order) in a first table, the columns with one value in every row (but those in ``keep``, the numbers
    the table is read for) moved to a caption line under the title, the notes as bullets, then under
    :data:`APPENDIX_HEADING` the remaining columns with the ``key`` columns that name each row (left out when
    nothing remains)."""
    n = len(next(iter(cells.values()), ()))
    const, const_caption = constant_caption({c: v for c, v in cells.items() if c not in keep}, n)
    shown = [c for c in core if c in cells and c not in const] or [c for c in core if c in cells][:1]
    keys = [c for c in key if c in cells and c not in const]
    rest = [c for c in cells if c not in core and c not in const and c not in keys]
    lines = [f"# {title}", ""]
    for text in [*caption, *const_caption]:
        lines += [text, ""]
    lines += grid(shown, [[cells[c][i] for c in shown] for i in range(n)])
    lines += ["", *(f"- {note}" for note in notes)]
    if rest:
        head = keys or ["#"]
        rows = [([cells[c][i] for c in keys] or [str(i + 1)]) + [cells[c][i] for c in rest] for i in range(n)]
        lines += ["", APPENDIX_HEADING, "", APPENDIX_LEAD, "", *grid([*head, *rest], rows)]
    return "\n".join(lines) + "\n"


def plain_markdown(df: pd.DataFrame, title: str, notes=()) -> str:
    """A table without metric columns as Markdown: every column of ``df`` as it is (``|`` escaped), then the
    notes as bullets."""
    header = list(df.columns)
    lines = [f"# {title}", "", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in header) + " |")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
CONTROL_FLAG = "control AUC ["  # what ragmi.report.comparison.attach_controls writes in a failing row's note


def verdict_cell(row) -> str:
    """The summary's verdict of a metrics row, from its own numbers: ``not computed`` (a skipped variant,
    no AUC interval), ``uninformative`` (constant scores, no answer read), ``control failed`` (the row's
    note flags a negative control of this table whose AUC interval excludes 0.5), else ``leaks`` /
    ``inverted`` / ``no evidence at this n`` (the AUC interval above / below / around 0.5)."""
    skipped = row.get("skipped")
    lo, hi = row.get("auc_lo"), row.get("auc_hi")
    if isinstance(skipped, str) and skipped or is_missing(lo) or is_missing(hi):
        return "not computed"
    if not is_informative(row):
        return "uninformative"
    if CONTROL_FLAG in str(row.get("note") or ""):
        return "control failed"
    return auc_verdict(float(lo), float(hi))


def _short_realised_fpr(fpr, n) -> str:
    """``"FPR 0.05, n = 20"``: the FPR a reference threshold realised on the n evaluation non-members, in the
    core table's narrow cell (its Clopper–Pearson interval is under *All columns* and in the CSV)."""
    if is_missing(fpr):
        return FPR_NOT_RECORDED
    return f"FPR {float(fpr):.2f}" + ("" if is_missing(n) else f", n = {int(n)}")


def _headline_tprs(df: pd.DataFrame, keys: Sequence[str]) -> tuple[str, list[str], str, list[str]]:
    """The two headline TPR columns of the core table, one level per row (the summary's): the evaluation
    ROC's TPR at the lowest level its non-members resolve, labelled "(eval ROC)" in every cell, and the TPR
    at the reference threshold of the lowest level the reference set resolves, with the FPR that threshold
    realised on the n evaluation non-members and its interval (:func:`ragmi.cells.realised_fpr`)."""
    roc, ref, roc_levels, ref_levels = [], [], set(), set()
    for _, r in df.iterrows():
        if is_missing(r.get("auc")):  # a skipped variant: no number at all
            roc.append((float("nan"), DASH))
            ref.append((float("nan"), DASH))
            continue
        level, tpr, lo, hi = roc_tpr(r, keys)
        roc.append((level, NOT_ESTIMABLE if is_missing(tpr) else format_ci(tpr, lo, hi)))
        if not is_missing(level):
            roc_levels.add(level)
        level, tpr, lo, hi, _ = lowest_tpr(r, keys)
        cell = DASH
        if not is_missing(tpr):
            k = fpr_key(level)
            cell = (format_ci(tpr, lo, hi), _short_realised_fpr(r.get(f"fpr_realized_{k}"), r.get("n_nonmembers")))
        ref.append((level, cell))
        if not is_missing(level):
            ref_levels.add(level)
    one_roc = len(roc_levels) == 1
    one_ref = len(ref_levels) == 1
    roc_head = f"TPR@{format_level(next(iter(roc_levels)))}FPR (eval ROC)" if one_roc else "TPR at low FPR (eval ROC)"
    ref_head = (
        f"TPR at ref. threshold for {format_level(next(iter(ref_levels)))} FPR (FPR it realised, n)"
        if one_ref
        else "TPR at ref. threshold for low FPR (FPR it realised, n)"
    )
    # one level: the header names the ROC reading; several: each cell names its level and the reading
    roc_cells = [
        c
        if c in (NOT_ESTIMABLE, DASH) or one_roc
        else f"{c}{'' if is_missing(lv) else f' at {format_level(lv)}'} ({EVAL_ROC})"
        for lv, c in roc
    ]
    ref_cells = [
        c
        if c == DASH
        else f"{c[0]}{'' if one_ref or is_missing(lv) else f' at ref. threshold for {format_level(lv)}'} ({c[1]})"
        for lv, c in ref
    ]
    return roc_head, roc_cells, ref_head, ref_cells


def _target_cells(df: pd.DataFrame) -> list[str]:
    """``pad (pad, rerank)``: the target with its defenses where the frame names them."""
    if "defenses" not in df.columns:
        return [escape(t) for t in df["target"]]
    return [
        escape(t if str(d) in ("", "none", "nan") or is_missing(d) else f"{t} ({d})")
        for t, d in zip(df["target"], df["defenses"])
    ]


def markdown_table(
    metrics_df: pd.DataFrame,
    title: str,
    extra_columns: Sequence[str] | None = None,
    notes: Sequence[str] | None = None,
) -> str:
    """The Markdown text that :func:`write_tables` writes: a core table a person reads — the row's name
    (dataset, target with its defenses, variant: those that vary), its verdict, ΔAUC where the frame has
    one, n, AUC, the two headline TPRs (one level per row) and the decision rule's accuracy — then the
    footnotes, and under :data:`APPENDIX_HEADING` every other column: n ref, the TPR at every FPR level,
    TPR | retrieved, the rule's rates, ragmi's best-threshold accuracy, the cost columns, then
    ``extra_columns``.  A column with one value in every row is said once, in a caption line."""
    if metrics_df.empty:
        raise ValueError("metrics table is empty")
    extra = list(extra_columns or [])
    absent = [c for c in extra if c not in metrics_df.columns]
    if absent:
        raise ValueError(f"extra columns not in the metrics table: {absent}")
    groups = [c for c in GROUP_COLUMNS if c in metrics_df.columns]
    keys = fpr_keys(metrics_df.columns)
    has_bb = "bb_tpr" in metrics_df.columns and metrics_df["bb_tpr"].notna().any()
    has_thr = "threshold_accuracy" in metrics_df.columns
    has_retr = "n_retrieved_members" in metrics_df.columns
    df = metrics_df.sort_values(groups, kind="stable") if groups else metrics_df
    df = df.reset_index(drop=True)
    rows = [r for _, r in df.iterrows()]

    cells = _name_cells(df, groups)
    own_verdict = "verdict" in extra
    cells["verdict"] = [escape(v) for v in df["verdict"]] if own_verdict else _col(rows, verdict_cell)
    has_delta = "delta_auc" in df.columns
    if has_delta:
        cells["ΔAUC [95% CI]"] = _col(rows, _delta_cell)
    cells["n eval (m/nm)"] = _col(rows, lambda r: format_n(r.get("n_members"), r.get("n_nonmembers")))
    cells["AUC"] = _col(rows, lambda r: format_ci(r.get("auc"), r.get("auc_lo"), r.get("auc_hi")))
    roc_head, roc_cells, ref_head, ref_cells = _headline_tprs(df, keys)
    cells[roc_head], cells[ref_head] = roc_cells, ref_cells
    cells["Accuracy (decision rule)"] = _col(
        rows, lambda r: format_ci(r.get("accuracy"), r.get("accuracy_lo"), r.get("accuracy_hi"))
    )
    # a table of ΔAUC (defense_effect) reads the change: the decision rule's accuracy goes below
    core = [c for c in cells if not (has_delta and c == "Accuracy (decision rule)")]
    _add_appendix_cells(cells, rows, metrics_df, keys, has_bb, has_thr, has_retr)
    folded = {"verdict"} | ({"defenses"} if "target" in groups else set())  # already in the core's cells
    for c in extra:
        if c not in folded:
            cells[COST_LABELS.get(c, c)] = _col(
                rows, lambda r, c=c: escape(format_extra(c, r[c]))
            )  # others keep their names

    footnotes = _footnotes(metrics_df, keys, own_verdict, has_delta, has_bb, has_retr)
    key = [c for c in ("dataset", "target", "attack", "variant") if c in cells]
    keep = ["verdict", "ΔAUC [95% CI]", "AUC"]
    return split_markdown(title, cells, core, key, notes=[*footnotes, *(notes or [])], keep=keep)


def _col(rows: Sequence, fn) -> list[str]:
    return [fn(r) for r in rows]


def _name_cells(df: pd.DataFrame, groups: Sequence[str]) -> dict[str, list[str]]:
    """The cells naming each row (its ``groups`` columns); the attack only where a variant does not say it."""
    cells: dict[str, list[str]] = {}
    for c in groups:
        cells[c] = _target_cells(df) if c == "target" else [escape(x) for x in df[c]]
    # the attack is the variant's first part: its own column only where a variant does not say it
    if "attack" in cells and "variant" in cells:
        implied = all(str(v) == str(a) or str(v).startswith(f"{a}/") for a, v in zip(df["attack"], df["variant"]))
        if implied:
            del cells["attack"]
    return cells


def _add_appendix_cells(
    cells: dict, rows: Sequence, metrics_df: pd.DataFrame, keys, has_bb: bool, has_thr: bool, has_retr: bool
) -> None:
    """Add the appendix's metric columns to ``cells``: n ref, the TPR at every FPR level, TPR | retrieved,
    the rule's rates and the best-threshold accuracy."""
    cells["n ref (m/nm)"] = _col(rows, lambda r: format_n(r.get("n_ref_members"), r.get("n_ref_nonmembers")))
    roc_keys = [k for k in keys if float(k) > 0 and f"tpr_roc_{k}" in metrics_df.columns]
    for k in roc_keys:
        cells.setdefault(f"TPR@{k}%FPR (eval ROC)", _col(rows, lambda r, k=k: roc_tpr_cell(r, k)))
    for k in keys:
        cells[f"TPR at ref. threshold for {k}% FPR"] = _col(rows, lambda r, k=k: tpr_cell(r, k))
    if has_retr:
        cells["TPR \\| retrieved"] = _col(rows, retrieved_cell)
    if has_bb:
        cells["Rule TPR"] = _col(rows, lambda r: format_ci(r.get("bb_tpr"), r.get("bb_tpr_lo"), r.get("bb_tpr_hi")))
        cells["Rule FPR"] = _col(rows, lambda r: format_ci(r.get("bb_fpr"), r.get("bb_fpr_lo"), r.get("bb_fpr_hi")))
    if has_thr:
        cells["Best-threshold acc. (ragmi)"] = _col(
            rows,
            lambda r: format_ci(
                r.get("threshold_accuracy"), r.get("threshold_accuracy_lo"), r.get("threshold_accuracy_hi")
            ),
        )


def _footnotes(
    metrics_df: pd.DataFrame, keys, own_verdict: bool, has_delta: bool, has_bb: bool, has_retr: bool
) -> list[str]:
    """The footnotes of :func:`markdown_table` (before the table's own ``notes``)."""
    footnotes = [
        "Core table: the row's name, its verdict"
        + (" and ΔAUC" if has_delta else "")
        + ", n, AUC, the two headline TPRs (each at the lowest non-zero FPR level its sets resolve, as in the "
        "summary table)"
        + ("" if has_delta else " and the decision rule's accuracy")
        + f"; every other column is under '{APPENDIX_HEADING[3:]}' below, and in the CSV at full precision.",
    ]
    if not own_verdict:
        footnotes.append(
            "verdict (the summary's, from this row alone): leaks = the AUC interval lies above 0.5; inverted = "
            "below 0.5; no evidence at this n = it contains 0.5; uninformative = every evaluation candidate got the "
            "same score or no answer was read; control failed = a negative control of this row (its columns in "
            "this table) has an AUC interval excluding 0.5; not computed = a skipped variant."
        )
    if has_delta:
        footnotes.append(
            "ΔAUC [95% CI]: AUC(defended) − AUC(undefended) over the evaluation candidates both scored, with its "
            "paired interval (MOVER with DeLong's correlation of the two AUCs: ragmi.metrics.paired_auc_difference; the effect column below adds ΔTPR); printed for information beside "
            "verdict indirect."
        )
    footnotes += [
        "Thresholds are chosen on the reference set and applied unchanged to the evaluation set; "
        "no number is fitted on the data it is scored on. AUC is computed on the evaluation set.",
        "Brackets: 95% confidence intervals: for the AUC the score interval of the Mann–Whitney statistic "
        "(ragmi.metrics.auc_ci: it keeps its width at 0.5 and 1), for every rate (TPR, FPR, accuracy) the "
        "exact Clopper–Pearson interval; reference thresholds held fixed.",
        "n: members/non-members, for the evaluation set (n eval) and the reference set (n ref).",
        "TPR@x%FPR (eval ROC): the true-positive rate read from the evaluation ROC at false-positive rate "
        "x (TPR at low FPR, Carlini et al. 2022, as LiRA and MIMIR report it; the threshold is chosen on the "
        "evaluation set, so it is optimistic), printed when the evaluation non-members resolve x (x·n ≥ 1), "
        "else n/e.",
        "TPR at ref. threshold for x% FPR: the operational rate, at the threshold whose false-positive rate "
        "on the reference non-members is at most x%, with the false-positive rate that threshold actually "
        "realised on the n evaluation non-members and its Clopper–Pearson interval in every cell ('eval FPR "
        "0.05 [0.00, 0.25], n = 20'): the TPR is 'at x% FPR' only as far as that eval FPR says so.",
        "Accuracy (decision rule): the accuracy of the variant's own decision rule on the evaluation set "
        "(RAG-MIA's Yes/No, DCMI's C > γ, MBA's γ, S2MIA's T, an attack model's predicted class), the "
        f"accuracy the papers report; {DASH} for a variant without a rule. Best-threshold acc. (ragmi): the "
        "evaluation accuracy of the score threshold that maximises accuracy on the reference set; it is "
        "ragmi's, not a paper's, and is never compared with a published accuracy.",
    ]
    if "n_ref_nonmembers" in metrics_df.columns:
        ne = not_estimable_note(metrics_df["n_ref_nonmembers"], keys)
        if ne:
            footnotes.append(ne)
    if has_bb:
        footnotes.append(
            "Rule TPR / Rule FPR (bb_tpr / bb_fpr in the CSV): true- and false-positive rates of the "
            "variant's decision rule on the evaluation set (for RAG-MIA's black box, the paper's "
            f"'Black-Box TPR / FPR'); {DASH} for variants without a rule."
        )
    if has_retr:
        footnotes.append(escape(RETRIEVED_NOTE))
    return footnotes


def _delta_cell(r) -> str:
    """``−0.35 [−0.52, −0.18]``; ``baseline`` or the reason where there is no ΔAUC."""
    d = r.get("delta_auc")
    if is_missing(d):  # a baseline row (its verdict says so) or no paired scores
        return DASH
    cell = signed(float(d))
    lo, hi = r.get("delta_auc_lo"), r.get("delta_auc_hi")
    if not (is_missing(lo) or is_missing(hi)):
        cell += f" [{signed(float(lo))}, {signed(float(hi))}]"
    return cell


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
