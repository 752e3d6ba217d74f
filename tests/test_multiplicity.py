"""ragmi.multiplicity: Holm and Benjamini-Hochberg against statsmodels' definitions, computed by hand."""

import numpy as np
import pytest

from ragmi.multiplicity import benjamini_hochberg, bonferroni_level, holm


def test_holm_known_values():
    # m = 4, sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    got = holm([0.03, 0.01, 0.5, 0.02])
    assert np.allclose(got, [0.06, 0.04, 0.5, 0.06])


def test_holm_keeps_nan_out_of_the_family():
    got = holm([0.01, float("nan"), 0.04])
    assert np.isnan(got[1])
    assert np.allclose(got[[0, 2]], [0.02, 0.04])


def test_holm_controls_fwer_under_the_null():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=(4000, 20))
    fwer = np.mean([(holm(row) < 0.05).any() for row in p])
    naive = np.mean((p < 0.05).any(axis=1))
    assert fwer < 0.06 and naive > 0.5


def test_bh_known_values():
    got = benjamini_hochberg([0.01, 0.04, 0.03, 0.2])
    # sorted 0.01, 0.03, 0.04, 0.2: 4*0.01/1=0.04, 4*0.03/2=0.06, 4*0.04/3=0.0533, 0.2 -> min from the right
    assert np.allclose(got, [0.04, 0.05333333, 0.05333333, 0.2])


def test_bad_input():
    with pytest.raises(ValueError):
        holm([1.5])
    with pytest.raises(ValueError):
        bonferroni_level(0.05, 0)
    assert bonferroni_level(0.05, 10) == pytest.approx(0.005)
