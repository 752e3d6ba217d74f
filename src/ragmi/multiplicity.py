"""Multiple testing: reading many p-values (or many verdicts) of one run together.

A run prints many tests at once (dataset-inference p-values, the canaries' Fisher tests, the
"leaks" verdicts of every attack cell, the negative controls).  Read one by one at level α, some
reject by chance alone; these functions give the family-wise reading beside the per-test one.

* :func:`holm`: Holm's step-down adjustment (Holm 1979, "A simple sequentially rejective multiple
  test procedure", Scandinavian Journal of Statistics 6:65-70).  It controls the family-wise error
  rate (the probability of one or more false rejections) at α for any dependence between the tests:
  reject test i when its adjusted p-value is below α.
* :func:`benjamini_hochberg`: the false-discovery-rate adjustment of Benjamini & Hochberg (1995,
  JRSS B 57:289-300), valid for independent or positively dependent tests; printed only where a
  table says it uses it.

NaN p-values (a test that could not be computed) are left out of the family and stay NaN.
Bonferroni (:func:`bonferroni_level`) is the per-test level of a family of m tests read at α.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _finite(pvalues: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(pvalues, dtype=float).reshape(-1)
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values lie in [0, 1]")
    return p, ok


def _adjusted(pvalues: Sequence[float], step) -> np.ndarray:
    """``step(sorted finite p-values) -> their adjusted values``, put back in the given order; NaN
    entries are not part of the family and stay NaN."""
    p, ok = _finite(pvalues)
    out = np.full(p.shape, np.nan)
    q = p[ok]
    if q.size == 0:
        return out
    order = np.argsort(q, kind="stable")
    res = np.empty(q.size)
    res[order] = step(q[order])
    out[ok] = res
    return out


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values, in the order given: with the m finite p-values sorted,
    p_(1) <= ... <= p_(m), the adjusted value of p_(i) is max_{j <= i} min(1, (m - j + 1) p_(j)).
    Rejecting where the adjusted value is below α controls the family-wise error rate at α.  NaN
    entries are not part of the family and stay NaN."""

    def step(q: np.ndarray) -> np.ndarray:
        m = q.size
        return np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * q))

    return _adjusted(pvalues, step)


def benjamini_hochberg(pvalues: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given: with the m finite
    p-values sorted, the adjusted value of p_(i) is min_{j >= i} min(1, m p_(j) / j).  NaN entries
    are not part of the family and stay NaN."""

    def step(q: np.ndarray) -> np.ndarray:
        m = q.size
        return np.minimum.accumulate(np.minimum(1.0, m * q / np.arange(1, m + 1))[::-1])[::-1]

    return _adjusted(pvalues, step)


def bonferroni_level(alpha: float, m: int) -> float:
    """The per-test level α/m of a family of ``m`` tests read together at family-wise level α."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if m < 1:
        raise ValueError(f"a family has at least one test, got {m}")
    return alpha / m
