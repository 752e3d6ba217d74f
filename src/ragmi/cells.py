"""How a number becomes a table cell: the shared formatting of every report table.

``0.81 [0.75, 0.86]`` (a point estimate and its 95% interval, 2 decimals), ``50/50`` (members/non-members),
cost and bookkeeping cells (rates as percentages, counts as integers), signed differences with a true
minus sign (``−0.21``), FPR levels as percentages (``0.5%``), and the markers of an empty cell: ``–``
(no value), ``n/e`` (not estimable), ``n/a`` (not available); and the two kinds of TPR, each named for
what it is (ragmi.metrics): the TPR at a *reference* threshold with the FPR it realised on the evaluation
non-members (:func:`realised_fpr`, :func:`ref_tpr`), and the TPR read from the *evaluation ROC*
(:func:`roc_tpr_text`).  It imports nothing of ragmi: the analyses that write a table's cells
(:mod:`ragmi.analysis`) and the report that prints them (:mod:`ragmi.report`) share it.
"""

from __future__ import annotations

import math

import pandas as pd

DASH = "–"
NOT_ESTIMABLE = "n/e"
NOT_AVAILABLE = "n/a"


def is_missing(x) -> bool:
    """Whether ``x`` is no value: None, ``pd.NA`` or NaN (False for anything pandas cannot test)."""
    if x is None or x is pd.NA:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def format_ci(value, lo, hi, digits: int = 2) -> str:
    """``"0.81 [0.75, 0.86]"``; ``"0.81"`` when the CI is missing; ``"–"`` when the value is."""
    if is_missing(value):
        return DASH
    cell = f"{float(value):.{digits}f}"
    if not (is_missing(lo) or is_missing(hi)):
        cell += f" [{float(lo):.{digits}f}, {float(hi):.{digits}f}]"
    return cell


def format_n(members, nonmembers) -> str:
    """``"50/50"`` (members/non-members)."""
    if is_missing(members) or is_missing(nonmembers):
        return DASH
    return f"{int(members)}/{int(nonmembers)}"


def format_extra(name: str, value) -> str:
    """A cost or bookkeeping cell: rates as percentages, counts as integers, else 2 decimals."""
    if is_missing(value):
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


def signed(x: float, digits: int = 2) -> str:
    """``+0.12`` / ``−0.21``: a true minus sign."""
    return f"{x:+.{digits}f}".replace("-", "−")


def format_level(level: float) -> str:
    """An FPR level (a fraction) as a percentage: ``0.005`` → ``"0.5%"``."""
    return f"{round(100 * float(level), 6):g}%"


def escape(text) -> str:
    """A Markdown table cell: ``|`` escaped, newlines as spaces."""
    return str(text).replace("|", "\\|").replace("\n", " ")


EVAL_ROC = "eval ROC"  # the label of a TPR read from the evaluation ROC (ragmi.metrics tpr_roc_<k>)
FPR_NOT_RECORDED = "eval FPR not recorded"  # a reference-threshold TPR whose realised FPR the row lacks


def realised_fpr(fpr, lo, hi, n) -> str:
    """``"eval FPR 0.05 [0.00, 0.25], n = 20"``: the false-positive rate a reference threshold realised on
    the ``n`` evaluation non-members, with its Clopper–Pearson interval (ragmi.metrics ``fpr_realized_<k>``);
    :data:`FPR_NOT_RECORDED` when the FPR is missing (a TPR is then never read as "at x% FPR")."""
    if is_missing(fpr):
        return FPR_NOT_RECORDED
    text = f"eval FPR {format_ci(fpr, lo, hi)}"
    return text if is_missing(n) else f"{text}, n = {int(n)}"


def ref_tpr(tpr, lo, hi, level, fpr, fpr_lo, fpr_hi, n) -> str:
    """``"0.30 [0.18, 0.44] at the ref. threshold for 5% FPR (eval FPR 0.05 [0.00, 0.25], n = 20)"``: an
    operational TPR, the origin of its threshold and the FPR it realised (:func:`realised_fpr`); ``"–"``
    without a TPR; the level left out when it is missing."""
    if is_missing(tpr):
        return DASH
    where = "" if is_missing(level) else f" at the ref. threshold for {format_level(level)} FPR"
    return f"{format_ci(tpr, lo, hi)}{where} ({realised_fpr(fpr, fpr_lo, fpr_hi, n)})"


def roc_tpr_text(tpr, lo, hi, level, n) -> str:
    """``"0.55 [0.40, 0.69] read from the eval ROC at 5% FPR (n = 20)"``: the field's TPR at x% FPR, its
    threshold chosen on the ``n`` evaluation non-members it is scored on (eval FPR at most x by construction);
    ``"–"`` without a TPR."""
    if is_missing(tpr):
        return DASH
    at = "" if is_missing(level) else f" at {format_level(level)} FPR"
    size = "" if is_missing(n) else f" (n = {int(n)})"
    return f"{format_ci(tpr, lo, hi)} read from the {EVAL_ROC}{at}{size}"
