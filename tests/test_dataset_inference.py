"""ragmi.dataset_inference: features, the reference-fitted combiner, the one-sided Welch test, the
smallest significant size, the default experiments and the calibration of the whole procedure on
non-members.  Synthetic, seeded data only (no results/ files)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ragmi import dataset_inference as di
from ragmi.metrics import clopper_pearson

# --------------------------------------------------------------------------------------------
# Synthetic candidates and score frames
# --------------------------------------------------------------------------------------------
SHIFTS = {"atk/strong": 1.5, "atk/weak": 0.4, "atk/noise": 0.0}


def candidates(n_ref=40, n_eval=20) -> pd.DataFrame:
    """``n_ref`` members + ``n_ref`` non-members of role reference, ``n_eval`` + ``n_eval`` eval."""
    rows = []
    for role, n in (("reference", n_ref), ("eval", n_eval)):
        for label in (1, 0):
            rows += [{"doc_id": f"{role[:3]}{label}-{i:03d}", "label": label, "role": role} for i in range(n)]
    return pd.DataFrame(rows)


def score_frames(cands: pd.DataFrame, seed: int = 0, shifts=SHIFTS, constant=True) -> list[pd.DataFrame]:
    """One frame per attack: normal scores, members shifted by the variant's shift; plus a variant
    that gives every document the same score (dropped) and one missing score per frame."""
    rng = np.random.default_rng(seed)
    frames = []
    for v, shift in shifts.items():
        score = rng.normal(size=len(cands)) + shift * cands["label"].to_numpy()
        frames.append(pd.DataFrame({"doc_id": cands["doc_id"], "variant": v, "score": score, "extra": 1}))
    frames[0].loc[3, "score"] = np.nan
    if constant:
        frames.append(pd.DataFrame({"doc_id": cands["doc_id"], "variant": "atk/constant", "score": 0.0}))
    return frames


# --------------------------------------------------------------------------------------------
# feature_matrix
# --------------------------------------------------------------------------------------------
def test_feature_matrix_pivots_imputes_reference_median_and_drops_constant_columns():
    long = pd.DataFrame(
        {
            "doc_id": ["r1", "r2", "r3", "e1", "e2", "r1", "r2", "r3", "e1", "e2", "r1", "r2", "e1"],
            "variant": ["b"] * 5 + ["a"] * 5 + ["c"] * 3,
            "score": [1.0, 2.0, 10.0, np.nan, 50.0, 3.0, 3.0, 3.0, 7.0, 8.0, np.nan, np.nan, 1.0],
        }
    )
    x = di.feature_matrix(long, reference_ids=["r1", "r2", "r3"])
    assert list(x.index) == ["e1", "e2", "r1", "r2", "r3"]
    assert list(x.columns) == ["b"]
    # e1's missing "b" is the reference median (2), not the median over every document (6)
    assert x.loc["e1", "b"] == 2.0
    assert x.loc["e2", "b"] == 50.0
    # "a" varies on eval documents but not on the reference ones; "c" has no reference score
    assert x.attrs["dropped"] == {"a": "constant on the reference documents", "c": "no reference scores"}


def test_feature_matrix_fills_a_document_a_variant_did_not_score():
    f1 = pd.DataFrame({"doc_id": ["r1", "r2", "r3", "e1"], "variant": "x", "score": [1.0, 4.0, 5.0, 9.0]})
    f2 = pd.DataFrame({"doc_id": ["r1", "r2", "r3"], "variant": "y", "score": [0.0, 1.0, 3.0]})
    x = di.feature_matrix([f1, f2], reference_ids={"r1", "r2", "r3"})
    assert x.loc["e1"].tolist() == [9.0, 1.0]
    assert not x.isna().any().any()


def test_feature_matrix_rejects_duplicates_infinite_scores_and_no_reference():
    dup = pd.DataFrame({"doc_id": ["a", "a"], "variant": "v", "score": [1.0, 2.0]})
    with pytest.raises(ValueError, match="more than one score"):
        di.feature_matrix(dup, ["a"])
    inf = pd.DataFrame({"doc_id": ["a", "b"], "variant": "v", "score": [1.0, np.inf]})
    with pytest.raises(ValueError, match="infinite"):
        di.feature_matrix(inf, ["a"])
    ok = pd.DataFrame({"doc_id": ["a", "b"], "variant": "v", "score": [1.0, 2.0]})
    with pytest.raises(ValueError, match="none of the reference"):
        di.feature_matrix(ok, ["zzz"])
    with pytest.raises(ValueError, match="lacks columns"):
        di.feature_matrix(ok.drop(columns="score"), ["a"])


# --------------------------------------------------------------------------------------------
# The combiner
# --------------------------------------------------------------------------------------------
def _fitted(seed=0):
    c = candidates()
    x = di.feature_matrix(score_frames(c, seed), c.loc[c["role"] == "reference", "doc_id"])
    ref = c[c["role"] == "reference"].set_index("doc_id")["label"]
    return c, x, ref, di.fit_combiner(x, ref)


def test_combiner_refuses_to_score_the_documents_it_was_fitted_on():
    c, x, ref, comb = _fitted()
    with pytest.raises(ValueError, match="fitted on 1 of the documents"):
        comb.score(x.loc[[ref.index[0], "eva1-000"]])
    ev = comb.score(x.loc[x.index.str.startswith("eva")])
    assert len(ev) == 40 and ev.index.name == "doc_id"


def test_combiner_learns_the_informative_variant_and_is_deterministic():
    c, x, ref, comb = _fitted()
    assert comb.columns == ("atk/noise", "atk/strong", "atk/weak")  # the constant one was dropped
    coef = dict(zip(comb.columns, comb.coef))
    assert coef["atk/strong"] > 0.5 and coef["atk/strong"] > 2 * abs(coef["atk/noise"])
    again = di.fit_combiner(x, ref)
    np.testing.assert_array_equal(again.coef, comb.coef)
    assert again.intercept == comb.intercept
    ev = x.loc[x.index.str.startswith("eva")]
    s = comb.score(ev)
    labels = (ev.index.str.startswith("eva1")).astype(int)
    assert s[labels == 1].mean() > s[labels == 0].mean() + 1.0


def test_combiner_standardises_with_the_reference_statistics():
    """An affine change of a feature's units changes nothing: the model sees standardised inputs."""
    c, x, ref, comb = _fitted()
    y = x.copy()
    y["atk/strong"] = 1000.0 * y["atk/strong"] + 7.0
    comb2 = di.fit_combiner(y, ref)
    ev = x.index[x.index.str.startswith("eva")]
    np.testing.assert_allclose(comb2.score(y.loc[ev]).to_numpy(), comb.score(x.loc[ev]).to_numpy(), rtol=1e-5)
    ref_ids = list(ref.index)
    np.testing.assert_allclose(comb.mean, x.loc[ref_ids].to_numpy().mean(axis=0))
    np.testing.assert_allclose(comb.sd, x.loc[ref_ids].to_numpy().std(axis=0))


def test_fit_combiner_rejects_one_class_constant_columns_and_missing_rows():
    c, x, ref, _ = _fitted()
    with pytest.raises(ValueError, match="both members and non-members"):
        di.fit_combiner(x, ref[ref == 1])
    y = x.assign(flat=1.0)
    with pytest.raises(ValueError, match="constant"):
        di.fit_combiner(y, ref)
    with pytest.raises(ValueError, match="no features"):
        di.fit_combiner(x, pd.concat([ref, pd.Series({"ghost": 1})]))


# --------------------------------------------------------------------------------------------
# welch_one_sided
# --------------------------------------------------------------------------------------------
def test_welch_one_sided_is_scipys_greater_alternative():
    rng = np.random.default_rng(3)
    s, o = rng.normal(0.8, 1.0, 15), rng.normal(0.0, 2.0, 9)
    r = di.welch_one_sided(s, o)
    ref = stats.ttest_ind(s, o, equal_var=False, alternative="greater")
    assert r.t == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue) and r.reason == ""
    # the direction: a suspect set scoring lower is no evidence
    assert di.welch_one_sided(o, s).p == pytest.approx(1 - ref.pvalue)


def test_welch_one_sided_degenerate_cases_give_nan_with_a_reason():
    one = di.welch_one_sided([1.0], [0.0, 1.0, 2.0])
    assert np.isnan(one.p) and np.isnan(one.t) and one.reason == di.TOO_FEW_SUSPECT
    both = di.welch_one_sided([1.0], [0.0])
    assert np.isnan(both.p) and both.reason == f"{di.TOO_FEW_SUSPECT}; {di.TOO_FEW_OUTSIDE}"
    flat = di.welch_one_sided([2.0, 2.0, 2.0], [1.0, 1.0])  # means differ, no variance anywhere
    assert np.isnan(flat.p) and flat.reason == di.ZERO_VARIANCE
    half = di.welch_one_sided([2.0, 2.0, 2.0], [0.0, 1.0, 0.5])  # one constant side is a valid test
    assert 0 < half.p < 0.05 and half.reason == ""
    with pytest.raises(ValueError, match="NaN or infinite"):
        di.welch_one_sided([1.0, np.nan], [0.0, 1.0])
    assert di.verdict(float("nan")) == di.UNINFORMATIVE
    assert di.verdict(0.0099) == di.IN_DATABASE and di.verdict(0.01) == di.NO_EVIDENCE


# --------------------------------------------------------------------------------------------
# smallest_significant_size
# --------------------------------------------------------------------------------------------
def _rule_by_enumeration(s, o, alpha):
    """The documented rule, computed over every subset of every size."""
    if not di.exact_one_sided(s, o).p < alpha:
        return None
    for m in range(2, len(s) + 1):
        ps = [di.exact_one_sided(s[list(c)], o).p for c in itertools.combinations(range(len(s)), m)]
        if np.mean(np.array(ps) < alpha) >= 0.5:
            return m
    raise AssertionError("m = n qualifies")


def test_smallest_significant_size_follows_the_documented_rule_exactly():
    rng = np.random.default_rng(11)
    o = rng.normal(0, 1, 8)
    found = []
    for shift in (0.8, 1.5, 2.5, 4.0):
        s = rng.normal(shift, 1, 7)  # at most C(7, 3) = 35 <= draws subsets: every size enumerated
        m = di.smallest_significant_size(s, o, alpha=0.05, draws=200, seed=0)
        assert m == _rule_by_enumeration(s, o, 0.05)
        assert m == di.smallest_significant_size(s, o, alpha=0.05, draws=200, seed=99)  # exact: no randomness
        found.append(m)
    assert found[-1] is not None and found[-1] <= 3
    assert None in found or max(found) > found[-1]  # weaker evidence needs more documents (or all do not suffice)


def test_smallest_significant_size_with_ties_follows_the_rule():
    """Repeated scores within the suspect set: each subsample is tested with the tie-aware permutation test."""
    o = np.array([0.0, 0.5, 1.0, 1.0, 1.5, 0.0, 2.0, 0.5])
    s = np.array([3.0, 3.0, 2.0, 2.5, 3.0, 1.0, 2.5])
    m = di.smallest_significant_size(s, o, alpha=0.05, draws=200, seed=0)
    assert m is not None and m == _rule_by_enumeration(s, o, 0.05)


def test_smallest_significant_size_none_when_the_whole_set_does_not_suffice():
    rng = np.random.default_rng(5)
    s, o = rng.normal(0, 1, 20), rng.normal(0, 1, 10)
    assert di.exact_one_sided(s, o).p >= 0.01
    assert di.smallest_significant_size(s, o) is None
    assert di.smallest_significant_size([1.0], o) is None


def test_smallest_significant_size_subsampling_is_seeded():
    rng = np.random.default_rng(8)
    s, o = rng.normal(1.2, 1, 30), rng.normal(0, 1, 10)
    m = di.smallest_significant_size(s, o, draws=200, seed=4)
    assert m is not None and 2 < m <= 30
    assert di.smallest_significant_size(s, o, draws=200, seed=4) == m
    # the whole set is significant, so some m always qualifies; stronger separation needs fewer
    assert di.smallest_significant_size(s + 3.0, o, draws=200, seed=4) < m


# --------------------------------------------------------------------------------------------
# The experiments
# --------------------------------------------------------------------------------------------
def _combined(cands):
    rng = np.random.default_rng(0)
    return pd.Series(rng.normal(size=len(cands)) + 2 * cands["label"].to_numpy(), index=cands["doc_id"])


def test_mixture_members_rule():
    assert di.mixture_members(0.5, 10, 20) == 10
    assert di.mixture_members(0.25, 10, 20) == 3  # round(10/3)
    assert di.mixture_members(0.9, 10, 20) == 20  # round(90), capped at the members available
    assert di.mixture_members(0.01, 10, 20) == 1  # round(0.1) = 0, at least one member
    with pytest.raises(ValueError):
        di.mixture_members(1.0, 10, 20)


def test_default_sets_sizes_disjointness_and_seed():
    c = candidates(n_ref=20, n_eval=20)
    sets = di.default_sets(c, _combined(c), seed=3)
    by = {s["name"]: s for s in sets}
    assert list(by) == ["members", "non-members", "mixture f=0.5", "mixture f=0.25"]
    ev = c[c["role"] == "eval"]
    ev_m, ev_n = set(ev.loc[ev["label"] == 1, "doc_id"]), set(ev.loc[ev["label"] == 0, "doc_id"])
    outside = set(by["members"]["outside_ids"])
    assert len(outside) == 10 and outside <= ev_n
    for s in sets:
        assert set(s["outside_ids"]) == outside  # one fixed known-outside half
        assert not set(s["suspect_ids"]) & outside
        assert set(s["suspect_ids"]) <= ev_m | ev_n  # evaluation candidates only
    assert set(by["members"]["suspect_ids"]) == ev_m
    assert set(by["non-members"]["suspect_ids"]) == ev_n - outside
    for name, k in (("mixture f=0.5", 10), ("mixture f=0.25", 3)):
        sus = set(by[name]["suspect_ids"])
        assert len(sus & ev_m) == k == by[name]["n_suspect_members"]
        assert sus - ev_m == ev_n - outside
        assert by[name]["f"] == pytest.approx(k / (k + 10))
    assert by["mixture f=0.25"]["f_target"] == 0.25
    again = di.default_sets(c, _combined(c), seed=3)
    assert again == sets
    other = di.default_sets(c, _combined(c), seed=4)
    assert set(other[0]["outside_ids"]) != outside


def test_default_sets_needs_every_eval_candidate_scored():
    c = candidates(n_ref=5, n_eval=6)
    comb = _combined(c).drop("eva1-002")
    with pytest.raises(ValueError, match="no combined score"):
        di.default_sets(c, comb)


def test_user_sets_validate_the_lists():
    (s,) = di.user_sets(["b", "a"], ["c"])
    assert s["suspect_ids"] == ["a", "b"] and s["outside_ids"] == ["c"] and np.isnan(s["f"])
    with pytest.raises(ValueError, match="both suspect and known outside"):
        di.user_sets(["a", "b"], ["b", "c"])
    with pytest.raises(ValueError, match="empty"):
        di.user_sets([], ["c"])
    with pytest.raises(ValueError, match="repeats"):
        di.user_sets(["a", "a"], ["c"])


def test_dataset_inference_end_to_end_verdicts():
    c = candidates()
    out = di.dataset_inference(score_frames(c), c, seed=0)
    assert list(out.columns) == di.ROW_COLUMNS
    by = out.set_index("suspect_set")
    assert by.loc["members", "verdict"] == di.IN_DATABASE and by.loc["members", "p_value"] < 0.01
    assert by.loc["non-members", "verdict"] == di.NO_EVIDENCE
    assert pd.isna(by.loc["non-members", "min_suspect_size"])
    assert 2 <= by.loc["members", "min_suspect_size"] <= 20
    assert by.loc["members", "n_suspect"] == 20 and by.loc["members", "n_outside"] == 10
    assert by.loc["mixture f=0.25", "n_suspect"] == 13 and by.loc["mixture f=0.25", "n_suspect_members"] == 3
    assert by.loc["members", "mean_suspect"] > by.loc["members", "mean_outside"]
    assert set(out["variants"]) == {"atk/noise,atk/strong,atk/weak"}
    assert out.attrs["dropped"] == {"atk/constant": "constant on the reference documents"}
    assert (out["alpha"] == 0.01).all()


def test_dataset_inference_user_sets_and_the_fit_guard():
    c = candidates()
    frames = score_frames(c)
    sus = [f"eva1-{i:03d}" for i in range(15)]
    out_ids = [f"eva0-{i:03d}" for i in range(20)]
    out = di.dataset_inference(frames, c, suspect_ids=sus, outside_ids=out_ids)
    assert len(out) == 1 and out.loc[0, "suspect_set"] == "user" and out.loc[0, "verdict"] == di.IN_DATABASE
    assert pd.isna(out.loc[0, "n_suspect_members"]) and np.isnan(out.loc[0, "f"])
    with pytest.raises(ValueError, match="fitted on"):  # a reference candidate among the suspects
        di.dataset_inference(frames, c, suspect_ids=sus + ["ref1-000"], outside_ids=out_ids)


def test_rows_mark_a_degenerate_set_uninformative():
    comb = pd.Series({"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.2})
    sets = di.user_sets(["a"], ["b", "c", "d"])
    row = di.dataset_inference_rows(sets, comb, ["v1", "v2"]).iloc[0]
    assert row["verdict"] == di.UNINFORMATIVE and row["reason"] == di.TOO_FEW_SUSPECT
    assert np.isnan(row["p_value"]) and pd.isna(row["min_suspect_size"]) and row["variants"] == "v1,v2"
    with pytest.raises(ValueError, match="no combined score"):
        di.dataset_inference_rows(di.user_sets(["a", "zz"], ["b"]), comb, ["v1"])


# --------------------------------------------------------------------------------------------
# The exact test and its floor
# --------------------------------------------------------------------------------------------
def test_exact_p_of_20_against_10_perfectly_separated_is_the_floor_not_a_normal_tail():
    """20 suspect documents above 10 outside ones: one arrangement of C(30, 10), p = 1/C(30, 10) = 3.3e-8,
    where Welch's normal tail reads about 1e-18."""
    s, o = np.linspace(5, 6, 20), np.linspace(0, 1, 10)
    r = di.exact_one_sided(s, o)
    assert r.p == pytest.approx(1 / math.comb(30, 10), rel=1e-12) and r.p == r.floor
    assert r.floor == di.rank_floor(20, 10) and r.test == di.MW_EXACT and r.u == 200
    assert di.welch_one_sided(s, o).p < 1e-15  # what the old table printed
    row = di.dataset_inference_rows(
        di.user_sets([f"s{i}" for i in range(20)], [f"o{i}" for i in range(10)]),
        pd.Series(np.r_[s, o], index=[f"s{i}" for i in range(20)] + [f"o{i}" for i in range(10)]),
        ["v"],
    ).iloc[0]
    assert row["p_value"] == pytest.approx(3.33e-8, rel=1e-3) and row["p_floor"] == row["p_value"]


def test_exact_p_is_never_below_its_floor_ties_or_not():
    rng = np.random.default_rng(4)
    for n_s, n_o in ((2, 2), (3, 5), (8, 4), (12, 9)):
        for shift in (0.0, 2.0, 50.0):
            s, o = rng.normal(shift, 1, n_s), rng.normal(0, 1, n_o)
            for a, b in ((s, o), (np.round(s), np.round(o))):  # rounding makes ties
                r = di.exact_one_sided(a, b)
                if r.p == r.p:
                    assert r.floor >= 1 / math.comb(n_s + n_o, n_o) and r.p >= r.floor
                    assert 0 < r.p <= 1


def test_exact_permutation_with_ties_matches_enumeration_and_monte_carlo_states_b():
    s, o = np.array([3.0, 3.0, 2.0, 5.0]), np.array([1.0, 2.0, 2.0, 0.0, 3.0])
    r = di.exact_one_sided(s, o)
    pooled = np.r_[s, o]

    def u(idx):
        return sum(
            (pooled[i] > pooled[j]) + 0.5 * (pooled[i] == pooled[j]) for i in idx for j in range(9) if j not in idx
        )

    stat = [u(c) for c in itertools.combinations(range(9), 4)]
    assert r.p == pytest.approx(np.mean(np.array(stat) >= u((0, 1, 2, 3)) - 1e-9)) and "all 126 splits" in r.test
    big_s, big_o = np.round(np.linspace(0, 9, 40)), np.round(np.linspace(-3, 6, 40))
    mc = di.exact_one_sided(big_s, big_o, resamples=999, seed=1)
    assert "B = 999" in mc.test and mc.floor == pytest.approx(1 / 1000) and mc.p >= mc.floor
    assert mc.p == di.exact_one_sided(big_s, big_o, resamples=999, seed=1).p  # seeded


def test_welch_is_printed_only_where_its_assumptions_were_checked():
    rng = np.random.default_rng(6)
    small = di.welch_checked(rng.normal(1, 1, 9), rng.normal(0, 1, 20))
    assert np.isnan(small.p) and "fewer than 10 suspect" in small.reason
    skew = di.welch_checked(rng.exponential(1, 40) ** 3, rng.normal(0, 1, 20))
    assert np.isnan(skew.p) and "Shapiro-Wilk rejects normality of the suspect" in skew.reason
    ok_s, ok_o = rng.normal(1, 1, 20), rng.normal(0, 1, 20)
    ok = di.welch_checked(ok_s, ok_o)
    assert ok.reason == "" and ok.p == pytest.approx(di.welch_one_sided(ok_s, ok_o).p)


def test_sets_too_small_to_reach_alpha_are_uninformative_with_the_floor():
    comb = pd.Series({"a": 9.0, "b": 8.0, "c": 0.0, "d": 0.1})
    row = di.dataset_inference_rows(di.user_sets(["a", "b"], ["c", "d"]), comb, ["v"]).iloc[0]
    assert row["p_value"] == pytest.approx(1 / 6) and row["p_floor"] == pytest.approx(1 / 6)
    assert row["verdict"] == di.UNINFORMATIVE and "cannot reach p < 0.01" in row["reason"]


# --------------------------------------------------------------------------------------------
# Calibration: disjoint documents, α of the verdicts, independent splits
# --------------------------------------------------------------------------------------------
def _nonmember_features(n, seed, d=5):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.normal(size=(n, d)), index=[f"nm{seed}-{i:03d}" for i in range(n)]).rename(
        columns=lambda j: f"v{j}"
    )


def _reference_combiner(d=5):
    rng = np.random.default_rng(1000)
    x = pd.DataFrame(rng.normal(size=(80, d)), index=[f"ref-{i:03d}" for i in range(80)]).rename(
        columns=lambda j: f"v{j}"
    )
    y = pd.Series(np.r_[np.ones(40, int), np.zeros(40, int)], index=x.index)
    x.iloc[:40, 0] += 1.0
    return di.fit_combiner(x, y)


def test_calibrate_uses_independent_disjoint_splits_at_the_verdicts_alpha():
    comb = _reference_combiner()
    pool = comb.score(_nonmember_features(200, 3))
    r = di.calibrate(pool, seed=0)
    assert r["alpha"] == di.ALPHA == 0.01 and r["split_size"] == di.min_balanced_size(0.01) == 5
    assert r["n_splits"] == 200 // 10  # n of the interval = the number of disjoint splits
    assert (r["rate_lo"], r["rate_hi"]) == clopper_pearson(r["rejections"], 20)
    assert r["rejections"] <= 2 and r["calibrated"] and not r["resolves"]
    with pytest.raises(ValueError, match="shares 1 documents with the tested sets"):
        di.calibrate(pool, exclude_ids=[pool.index[7]])


def test_calibrate_catches_an_in_sample_combiner():
    """A combiner fitted on the very suspect/outside split it then tests separates pure noise: the
    guard of Combiner.score exists to prevent exactly this."""
    pool = _nonmember_features(400, seed=7)

    def in_sample(s_rows, o_rows):
        both = pd.concat([s_rows, o_rows])
        y = pd.Series(np.r_[np.ones(len(s_rows), int), np.zeros(len(o_rows), int)], index=both.index)
        comb = di.fit_combiner(both, y)
        with pytest.raises(ValueError, match="fitted on"):
            comb.score(s_rows)
        scores = (both.to_numpy(float) - comb.mean) / comb.sd @ comb.coef + comb.intercept  # guard bypassed
        return scores[: len(s_rows)], scores[len(s_rows) :]

    r = di.calibrate(pool, seed=0, score_split=in_sample)
    assert r["n_splits"] == 40 and r["calibrated"] is False and r["rate_lo"] > 0.01 and r["rate"] > 0.3


def test_out_of_fold_scores_never_come_from_a_combiner_fitted_on_the_document():
    c, x, ref, comb = _fitted()
    oof = di.out_of_fold_scores(x.loc[ref.index], ref, folds=5, seed=0)
    assert set(oof.index) == set(ref.index)
    # a document's out-of-fold score differs from its in-sample score (the in-sample combiner saw it)
    insample = (x.loc[ref.index].to_numpy(float) - comb.mean) / comb.sd @ comb.coef + comb.intercept
    assert not np.allclose(oof.loc[ref.index].to_numpy(), insample)
    assert oof.equals(di.out_of_fold_scores(x.loc[ref.index], ref, folds=5, seed=0))


# --------------------------------------------------------------------------------------------
# Distribution shift: the raw design fails, the difference design holds
# --------------------------------------------------------------------------------------------
def _shift_fpr(reps=400, n=30, seed=0):
    """Non-members only: each document's intrinsic score effect grows with its length (in the target's
    and in the null-db control's answers alike); suspect = the longest third, outside = the rest."""
    rng = np.random.default_rng(seed)
    length = rng.uniform(100, 2000, (reps, n))
    intrinsic = 1.5 * (length - 1050) / 550 + rng.normal(0, 0.5, (reps, n))
    target = intrinsic + rng.normal(0, 0.5, (reps, n))
    null = intrinsic + rng.normal(0, 0.5, (reps, n))
    order = np.argsort(-length, axis=1)
    k = n // 3
    rej = {"raw": 0, "difference": 0}
    for r in range(reps):
        s_idx, o_idx = order[r, :k], order[r, k:]
        rej["raw"] += di.exact_one_sided(target[r, s_idx], target[r, o_idx]).p < 0.01
        d = target[r] - null[r]
        rej["difference"] += di.exact_one_sided(d[s_idx], d[o_idx]).p < 0.01
    return {kk: v / reps for kk, v in rej.items()}, reps


def test_a_length_shifted_non_member_set_breaks_the_raw_design_not_the_difference():
    rates, reps = _shift_fpr()
    assert rates["raw"] > 0.5  # "in the database" for a set none of which is there
    lo, hi = clopper_pearson(round(rates["difference"] * reps), reps)
    assert lo <= 0.01 <= hi and rates["difference"] < 0.03


def test_shift_sets_cut_by_length_and_topic():
    words = {0: "kernel patch driver module", 1: "recipe flour oven butter"}
    rows = [{"doc_id": f"n{i:02d}", "text": " ".join([words[i % 2]] * (1 + i))} for i in range(12)]
    sets = di.shift_sets(pd.DataFrame(rows), n_topics=2, seed=0)
    by = {s["name"]: s for s in sets}
    assert by["length: longest third"]["suspect_ids"] == ["n08", "n09", "n10", "n11"]
    topics = [s for s in sets if s["shift"] == "topic"]
    assert len(topics) == 2 and {tuple(t["suspect_ids"]) for t in topics} == {
        tuple(f"n{i:02d}" for i in range(0, 12, 2)),
        tuple(f"n{i:02d}" for i in range(1, 12, 2)),
    }
    assert di.shift_sets(pd.DataFrame({"doc_id": ["a", "b", "c", "d"]})) == []  # no text: no set


def test_difference_scores_cancel_the_document_effect():
    t = pd.Series({"a": 5.0, "b": 1.0, "c": 2.0})
    n = pd.Series({"a": 4.5, "b": 0.5, "z": 0.0})
    d = di.difference_scores(t, n)
    assert d.to_dict() == {"a": 0.5, "b": 0.5}
