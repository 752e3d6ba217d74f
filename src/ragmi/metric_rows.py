"""What one row of a metrics CSV (``ragmi.metrics.evaluate``) says, read the same way by every table.

* its FPR levels (:func:`fpr_keys`: the ``tpr_at_fpr_<k>`` columns) and whether its reference set
  resolves one (:func:`tpr_estimable`);
* its two headline TPRs: the evaluation ROC's TPR at the lowest level its non-members resolve
  (:func:`roc_tpr`) and the TPR at the reference threshold of the lowest level its reference set
  resolves (:func:`lowest_tpr`);
* whether its scores tell candidates apart at all (:func:`is_informative`), and the verdict of its AUC
  interval (:func:`auc_verdict`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import pandas as pd

from .cells import is_missing
from .metrics import fpr_estimable, roc_estimable

_TPR_COL = re.compile(r"^tpr_at_fpr_(?P<k>[0-9.]+)$")


def to_float(x) -> float:
    """``float(x)``, NaN for anything that is not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def fpr_keys(columns: Iterable[str]) -> list[str]:
    """FPR suffixes present in the metrics (``tpr_at_fpr_{k}``), in numeric order."""
    keys = [m.group("k") for c in columns if (m := _TPR_COL.match(c))]
    return sorted(keys, key=float)


def tpr_estimable(row, key: str) -> bool:
    """Whether the row's reference set resolves TPR@``key``%FPR (True when its size is unknown)."""
    n_ref = row.get("n_ref_nonmembers")
    return is_missing(n_ref) or fpr_estimable(float(key) / 100, int(n_ref))


def roc_tpr(r: pd.Series, keys: Sequence[str]) -> tuple[float, float, float, float]:
    """``(level, tpr, lo, hi)``: the evaluation ROC's TPR at the lowest non-zero level the row's
    evaluation non-members resolve (x·n ≥ 1, :func:`ragmi.metrics.roc_estimable`); all NaN when none."""
    n = to_float(r.get("n_nonmembers"))
    for k in sorted((k for k in keys if float(k) > 0), key=float):
        if not math.isnan(n) and roc_estimable(float(k) / 100, int(n)):
            g = r.get
            return (
                float(k) / 100,
                to_float(g(f"tpr_roc_{k}")),
                to_float(g(f"tpr_roc_{k}_lo")),
                to_float(g(f"tpr_roc_{k}_hi")),
            )
    return (float("nan"),) * 4


def lowest_tpr(r: pd.Series, keys: Sequence[str]) -> tuple[float, float, float, float, str]:
    """``(level, tpr, lo, hi, note)``: TPR at the reference threshold of the lowest non-zero FPR level
    the row's reference set resolves, else at 0% reference FPR (the note says why)."""
    n_ref = to_float(r.get("n_ref_nonmembers"))
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
        to_float(g(f"tpr_at_fpr_{key}")),
        to_float(g(f"tpr_at_fpr_{key}_lo")),
        to_float(g(f"tpr_at_fpr_{key}_hi")),
        note,
    )


def is_informative(row) -> bool:
    """Whether a metrics row's scores can tell candidates apart at all (``informative``, ragmi.metrics:
    False for constant scores or when no answer could be read); True when the column is absent."""
    v = row.get("informative")
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
        return True
    if isinstance(v, str):
        return v.strip().lower() not in ("false", "0")
    return bool(v)


def auc_verdict(lo: float, hi: float) -> str:
    """``leaks`` (lo > 0.5), ``inverted`` (hi < 0.5), else ``no evidence at this n``."""
    if lo > 0.5:
        return "leaks"
    if hi < 0.5:
        return "inverted"
    return "no evidence at this n"
