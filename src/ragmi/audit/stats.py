"""Statistics of the active-path audit, as Mind the Hook §V-§VI use them (docs/provenance.md#statistics).

* :func:`fisher_one_sided`: one-sided Fisher exact test of "the undefended run leaks more" on
  leaked/total counts (paper §VI-A: 53/150 vs 0/150, reported as p < 1e-14; the exact value is
  about 4e-19).  The canary opportunities are grouped by seed, so the paper — and ragmi's tables —
  read the per-seed pattern first and the asymptotic p second.
* :func:`clopper_pearson_lower`: one-sided exact lower confidence bound of a binomial proportion,
  for the NELstrict precision spot-check (10/10 -> 0.741 at 95%).
* :func:`collapse_identical`, :func:`run_bootstrap` (per-run values) and :func:`bootstrap_runs`
  (from the runs' texts): the run is the resampling unit; runs whose output texts are
  hash-identical (under greedy decoding an inert parameter, e.g. epsilon of a non-DP defense,
  yields deterministic duplicates) are collapsed to one before resampling; then 2,000 resamples of
  the runs, 95% percentile interval, seeded.  The interval is within-instantiation
  only and is read descriptively (overlap is never a significance test).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..metrics import clopper_pearson_lower  # noqa: F401  (the audit's bounds: ragmi.metrics)

N_BOOT = 2000
LEVEL = 0.95


def fisher_one_sided(leaked_a: int, total_a: int, leaked_b: int, total_b: int) -> float:
    """P-value of the one-sided Fisher exact test that run A (e.g. undefended) leaks at a higher rate
    than run B (defended): table [[leaked_a, total_a - leaked_a], [leaked_b, total_b - leaked_b]],
    alternative "greater"."""
    for k, n in ((leaked_a, total_a), (leaked_b, total_b)):
        if not 0 <= k <= n:
            raise ValueError(f"leaked count {k} outside 0..{n}")
    table = [[int(leaked_a), int(total_a - leaked_a)], [int(leaked_b), int(total_b - leaked_b)]]
    from scipy import stats  # here, not at import: the Snakefile imports this module (0.5 s)

    return float(stats.fisher_exact(table, alternative="greater").pvalue)


def output_digest(texts: Sequence[str]) -> str:
    """SHA-256 of a run's output texts, in order."""
    return hashlib.sha256(json.dumps([str(t) for t in texts], ensure_ascii=False).encode()).hexdigest()


@dataclass
class Collapsed:
    """``runs``: one run per distinct output (the first of each group, input order kept);
    ``duplicates``: dropped run id -> the kept run id it duplicates."""

    runs: dict
    duplicates: dict = field(default_factory=dict)


def collapse_identical(runs: Mapping[str, Sequence[str]]) -> Collapsed:
    """Collapse runs whose output texts are identical (same texts in the same order) to one."""
    kept: dict = {}
    by_digest: dict[str, str] = {}
    duplicates: dict = {}
    for run_id, texts in runs.items():
        d = output_digest(texts)
        if d in by_digest:
            duplicates[run_id] = by_digest[d]
        else:
            by_digest[d] = run_id
            kept[run_id] = list(texts)
    return Collapsed(kept, duplicates)


@dataclass
class BootstrapResult:
    """Unpacks as ``estimate, low, high``."""

    estimate: float  # the statistic on the runs themselves
    low: float
    high: float
    n_runs: int
    n_boot: int
    level: float
    collapsed: dict = field(default_factory=dict)  # dropped run id -> kept run id

    def __iter__(self):
        return iter((self.estimate, self.low, self.high))


def run_bootstrap(
    values: Sequence[float],
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    statistic: Callable[[np.ndarray], float] = np.mean,
) -> BootstrapResult:
    """Percentile bootstrap interval of ``statistic`` (the mean) over per-run ``values``, one value
    per run: the runs are resampled with replacement ``n_boot`` times (seeded).  Collapse
    hash-identical runs first (:func:`collapse_identical`, or :func:`bootstrap_runs` from texts)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("bootstrap needs at least one run")
    if not np.isfinite(x).all():
        raise ValueError("bootstrap values must be finite")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(int(n_boot), x.size))
    boots = np.array([statistic(x[row]) for row in idx], dtype=float)
    alpha = 1.0 - level
    low, high = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return BootstrapResult(float(statistic(x)), float(low), float(high), int(x.size), int(n_boot), float(level))


def bootstrap_runs(
    runs: Mapping[str, Sequence[str]],
    per_run: Callable[[list], float],
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
    collapse: bool = True,
) -> BootstrapResult:
    """Run-level bootstrap of the mean of ``per_run(texts)`` (e.g. NELstrict items per run) from the
    runs' output texts, after collapsing hash-identical runs (``collapse``); the result names the
    collapsed runs."""
    c = collapse_identical(runs) if collapse else Collapsed({k: list(v) for k, v in runs.items()})
    values = [float(per_run(texts)) for texts in c.runs.values()]
    res = run_bootstrap(values, n_boot=n_boot, level=level, seed=seed)
    res.collapsed = dict(c.duplicates)
    return res
