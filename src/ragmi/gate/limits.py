"""A gate limit (``gate.limits`` in config/schema.yaml): its id, its bound, the cells it selects, the
tables it reads, the two-sided rule of an AUC ``max`` and the ``min_n`` below which a cell is not
decided (:func:`default_min_n` when the limit gives none).

Imports nothing of ragmi but :mod:`ragmi.gate.metrics` (ragmi.config validates limits with it);
:func:`auc_decidable_n` imports :mod:`ragmi.metrics` when it is called.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .metrics import ANY, METRICS, SELECTORS, Metric, number


def limit_id(limit: Mapping) -> str:
    """The limit's ``id``, or metric, bound and selectors joined (``*`` written ``any``)."""
    if limit.get("id"):
        return str(limit["id"])
    bound = "max" if "max" in limit else "min"
    parts = [limit["metric"], bound] + [str(limit.get(k, ANY)).replace(ANY, "any") for k in SELECTORS]
    return ".".join(p.replace("/", "_") for p in parts)


def limit_bound(limit: Mapping) -> tuple[str, float]:
    """``(op, bound)``: ``("max", the max)`` or ``("min", the min)``."""
    return ("max", float(limit["max"])) if "max" in limit else ("min", float(limit["min"]))


def matches(limit: Mapping, metric: Metric, row: Mapping) -> bool:
    """Whether the table row is a cell the limit selects (each of the metric's keys equal, or ``*``)."""
    return all(limit.get(k, ANY) in (ANY, row.get(k)) for k in metric.keys)


def tables_read(limits: Sequence[Mapping]) -> list[str]:
    """The tables the limits read, in the order first named."""
    return list(dict.fromkeys(METRICS[lim["metric"]].table for lim in limits))


def two_sided(metric: str, op: str) -> bool:
    """Whether a limit is checked on the sign-flipped score too: a ``max`` on an AUC metric."""
    return op == "max" and METRICS[metric].flipped is not None


def flipped_value(metric: str, row: Mapping) -> float:
    """The metric of the sign-flipped score (1 - the score's AUC: interval [1 - auc_hi, 1 - auc_lo]):
    ``1 - auc`` for ``auc``, ``1 - auc_hi`` for ``auc_lo``, ``1 - auc_lo`` for ``auc_hi``; NaN for a
    metric that has none or a missing number."""
    col = METRICS[metric].flipped
    return float("nan") if col is None else 1.0 - number(row.get(col))


def _first_n(ok, cap: int = 2**40) -> int | None:
    """The smallest n >= 1 with ``ok(n)`` for a predicate false below some n and true from it on
    (doubling, then bisection); None when it is false up to ``cap``."""
    hi = 1
    while not ok(hi):
        if hi >= cap:
            return None
        hi *= 2
    lo = hi // 2  # 0, or an n where ok is false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def auc_decidable_n(limit: float) -> int | None:
    """The smallest n (members = non-members = n) at which an AUC at ``limit``'s distance from chance,
    ``0.5 + |limit - 0.5|`` (at most 1), has a 95% interval excluding 0.5:
    ``ragmi.metrics.min_detectable_auc(n, n) <= 0.5 + |limit - 0.5|``; None for a limit at 0.5 (no n
    tells an AUC of 0.5 from chance). Below it an attack at the limit and one at chance give the same
    tables, so neither a pass nor a breach is evidence."""
    from ..metrics import min_detectable_auc

    # rounded: 0.5 + |0.35 - 0.5| is 0.65, not 0.65000000000000002
    target = round(min(0.5 + abs(float(limit) - 0.5), 1.0), 12)
    if target <= 0.5:
        return None

    def ok(n: int) -> bool:
        m = min_detectable_auc(n, n)  # NaN where the Hanley-McNeil error is undefined (n < 3)
        return not math.isnan(m) and m <= target

    return _first_n(ok)


def default_min_n(metric: str, limit: float) -> tuple[int | None, str]:
    """``(min_n, the rule in words)`` of a limit that gives no ``min_n``:

    * an AUC metric (``auc``, ``auc_lo``, ``auc_hi``; max or min): :func:`auc_decidable_n` -- the
      smallest n per class at which an AUC at the limit is told apart from chance (None for a limit
      of 0.5: no cell is decided until ``min_n`` is given);
    * a rate (``tpr_low_fpr*``, ``canary_rate``) with 0 < limit < 1: ``ceil(1 / limit)``, the smallest
      n at which a rate at the limit is one whole member (canary): below it the rate steps from 0
      straight past the limit, so one member decides the cell;
    * anything else (counts, NEL per run, utility; a rate limit of 0 or 1): 1.
    """
    kind = METRICS[metric].kind
    if kind == "auc":
        n = auc_decidable_n(limit)
        d = abs(float(limit) - 0.5)
        if n is None:
            return None, "no n tells an AUC at 0.5 from chance: give min_n"
        from ..metrics import min_detectable_auc

        return n, (
            f"the smallest n per class at which an AUC {d:g} from chance is told apart from it: "
            f"min_detectable_auc({n}, {n}) = {min_detectable_auc(n, n):.4f}"
        )
    if kind == "rate" and 0 < float(limit) < 1:
        n = math.ceil(1 / float(limit) - 1e-9)
        return n, f"the smallest n at which a rate of {float(limit):g} is one whole trial: ceil(1/{float(limit):g})"
    return 1, "1: the table has no chance level for this metric"


def limit_min_n(limit: Mapping, bound: float) -> tuple[int | None, str, str]:
    """``(min_n, source, rule)``: the limit's configured ``min_n`` (source ``config``), else
    :func:`default_min_n` of its metric and ``bound`` (source ``default``)."""
    if limit.get("min_n") is not None:
        return int(limit["min_n"]), "config", "configured"
    n, rule = default_min_n(limit["metric"], bound)
    return n, "default", rule
