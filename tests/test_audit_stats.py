"""Audit statistics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragmi.audit import stats


def test_fisher_one_sided_paper_table_iii():
    p = stats.fisher_one_sided(53, 150, 0, 150)
    # With 0 leaks in the defended run, the only table at least as extreme is the observed one:
    # p = C(150, 53) C(150, 0) / C(300, 53)
    exact = math.comb(150, 53) / math.comb(300, 53)
    assert p == pytest.approx(exact, rel=1e-9)
    assert 3.5e-19 < p < 4.5e-19 and p < 1e-14
    # the other direction is not significant at all
    assert stats.fisher_one_sided(0, 150, 53, 150) == pytest.approx(1.0)


def test_fisher_small_table_by_hand():
    # [[2, 0], [0, 2]], "greater": P(X >= 2) for X ~ Hypergeom(4, 2, 2) = 1 / C(4, 2)
    assert stats.fisher_one_sided(2, 2, 0, 2) == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        stats.fisher_one_sided(151, 150, 0, 150)


def test_clopper_pearson_lower():
    assert round(stats.clopper_pearson_lower(10, 10), 3) == 0.741
    assert stats.clopper_pearson_lower(10, 10) == pytest.approx(0.05 ** (1 / 10))
    assert stats.clopper_pearson_lower(20, 20) == pytest.approx(0.05 ** (1 / 20))
    assert stats.clopper_pearson_lower(0, 10) == 0.0
    assert stats.clopper_pearson_lower(10, 10, confidence=0.99) == pytest.approx(0.01 ** (1 / 10))
    with pytest.raises(ValueError):
        stats.clopper_pearson_lower(3, 0)


def test_collapse_identical_runs():
    runs = {
        "nd-eps1": ["a", "b"],
        "nd-eps5": ["a", "b"],
        "dp-eps1": ["b", "a"],
        "dp-eps5": ["a"],
        "pad-eps1": ["a", "b"],
    }
    c = stats.collapse_identical(runs)
    assert list(c.runs) == ["nd-eps1", "dp-eps1", "dp-eps5"]
    assert c.duplicates == {"nd-eps5": "nd-eps1", "pad-eps1": "nd-eps1"}
    assert stats.output_digest(["a", "b"]) != stats.output_digest(["ab"])


def test_bootstrap_interval_contains_mean_and_is_seeded():
    values = [1.0, 2.5, 3.1, 4.7, 10.0, 0.4, 7.3, 2.2, 5.9, 6.6, 1.8, 9.1]
    r1 = stats.run_bootstrap(values, seed=7)
    r2 = stats.run_bootstrap(values, seed=7)
    r3 = stats.run_bootstrap(values, seed=8)
    assert r1.estimate == pytest.approx(4.55)
    assert r1.low <= r1.estimate <= r1.high
    assert 0.4 <= r1.low < r1.high <= 10.0
    assert (r1.low, r1.high) == (r2.low, r2.high)
    assert (r1.low, r1.high) != (r3.low, r3.high)
    assert r1.n_boot == 2000 and r1.level == 0.95 and r1.n_runs == 12
    # the interval of an independent computation: the normal approximation of the bootstrap
    # distribution of the mean (sd = population sd / sqrt(n)), within the resampling error
    se = np.std(values) / math.sqrt(len(values))
    assert r1.low == pytest.approx(4.55 - 1.96 * se, abs=0.35 * se)
    assert r1.high == pytest.approx(4.55 + 1.96 * se, abs=0.35 * se)


def test_bootstrap_percentiles_match_the_exact_bootstrap_distribution():
    """For 4 runs the bootstrap distribution of the mean is enumerable (4**4 resamples): its 2.5% and
    97.5% quantiles are 0.5 and 7.75, each at least 4 standard errors of a 20,000-resample estimate
    away from the neighbouring values, so any seed must give them."""
    import itertools

    v = [0.0, 1.0, 2.0, 10.0]
    means = np.sort([np.mean(c) for c in itertools.product(v, repeat=4)])
    cdf = np.arange(1, len(means) + 1) / len(means)
    exact = means[np.searchsorted(cdf, 0.025)], means[np.searchsorted(cdf, 0.975)]
    assert exact == (0.5, 7.75)
    for seed in (0, 1):
        r = stats.run_bootstrap(v, n_boot=20000, seed=seed)
        assert (r.low, r.high) == exact


def test_bootstrap_degenerate_and_invalid():
    r = stats.run_bootstrap([2.0, 2.0, 2.0])
    assert (r.low, r.estimate, r.high) == (2.0, 2.0, 2.0)
    mean, lo, hi = stats.run_bootstrap([1.0, 3.0], seed=2)  # unpacks as estimate, low, high
    assert mean == 2.0 and 1.0 <= lo <= 2.0 <= hi <= 3.0
    with pytest.raises(ValueError):
        stats.run_bootstrap([])
    with pytest.raises(ValueError):
        stats.run_bootstrap([1.0, float("nan")])


def test_run_bootstrap_collapses_before_resampling():
    runs = {"a": ["x", "y"], "b": ["x", "y"], "c": ["x", "y", "z"]}
    r = stats.bootstrap_runs(runs, per_run=len, seed=1)
    assert r.n_runs == 2 and r.estimate == pytest.approx(2.5)
    assert r.collapsed == {"b": "a"}
    assert 2.0 <= r.low <= 2.5 <= r.high <= 3.0
    raw = stats.bootstrap_runs(runs, per_run=len, seed=1, collapse=False)
    assert raw.n_runs == 3 and raw.estimate == pytest.approx(7 / 3) and raw.collapsed == {}
