"""Hand-computed checks of ragmi.metrics (thresholds on reference, metrics on eval, intervals; the
interval methods' coverage is simulated in tests/test_intervals.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragmi import metrics
from ragmi.metrics import (
    evaluate,
    evaluate_variant,
    fpr_key,
    metric_columns,
    roc_auc,
    roc_points,
    threshold_at_fpr,
    threshold_max_accuracy,
)


def frame(variant, ref_m, ref_n, ev_m, ev_n, dec_m=None, dec_n=None):
    """A scores frame for one variant from member / non-member score lists."""
    rows = []
    for role, label, scores, decs in [
        ("reference", 1, ref_m, None),
        ("reference", 0, ref_n, None),
        ("eval", 1, ev_m, dec_m),
        ("eval", 0, ev_n, dec_n),
    ]:
        for i, s in enumerate(scores):
            d = np.nan if decs is None else decs[i]
            rows.append(
                dict(
                    doc_id=f"{role[:3]}{label}_{i:03d}",
                    variant=variant,
                    score=float(s),
                    decision=d,
                    label=label,
                    role=role,
                )
            )
    return pd.DataFrame(rows)


def _same(a: dict, b: dict) -> bool:
    """Dict equality with NaN == NaN (a variant without a decision rule has NaN accuracy)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and np.isnan(a[k]) and np.isnan(b[k])) for k in a
    )


def random_frame(variant, n=120, shift=1.0, seed=1, decisions=False):
    rng = np.random.default_rng(seed)
    ev_m, ev_n = rng.normal(shift, 1, n), rng.normal(0, 1, n)
    kw = {}
    if decisions:
        kw = dict(dec_m=(ev_m > 0.5).astype(float), dec_n=(ev_n > 0.5).astype(float))
    return frame(variant, rng.normal(shift, 1, n), rng.normal(0, 1, n), ev_m, ev_n, **kw)


# ---------------------------------------------------------------------------------------------
# Elementary metrics
# ---------------------------------------------------------------------------------------------
def test_roc_auc_hand_computed():
    # pairs (member, non-member): (.9,.5) (.9,.1) (.4,.1) correct, (.4,.5) wrong -> 3/4
    assert roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == pytest.approx(0.75)
    # a tie counts one half
    assert roc_auc([1, 0], [0.5, 0.5]) == pytest.approx(0.5)
    assert roc_auc([1, 0, 0], [0.5, 0.5, 0.1]) == pytest.approx(0.75)


def test_roc_auc_needs_both_classes():
    with pytest.raises(ValueError):
        roc_auc([1, 1], [0.1, 0.2])


def test_roc_points_endpoints():
    fpr, tpr = roc_points([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])
    assert (fpr[0], tpr[0]) == (0.0, 0.0)
    assert (fpr[-1], tpr[-1]) == (1.0, 1.0)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    # operating point at threshold 0.5: TPR 1/2, FPR 1/2
    assert any(f == 0.5 and t == 0.5 for f, t in zip(fpr, tpr))


def test_roc_auc_and_points_equal_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score, roc_curve

    rng = np.random.default_rng(11)
    for n in (2, 5, 16, 200):
        y = np.r_[0, 1, rng.integers(0, 2, n)]
        s = rng.integers(0, 6, y.size) / 5.0  # many ties
        if rng.random() < 0.5:
            s = s + rng.normal(0, 1e-3, y.size) * (rng.random(y.size) < 0.5)
        assert roc_auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        fpr, tpr = roc_points(y, s)
        ref_fpr, ref_tpr, _ = roc_curve(y, s, drop_intermediate=False)
        assert np.array_equal(fpr, ref_fpr) and np.array_equal(tpr, ref_tpr)


def test_threshold_at_fpr_exact_values():
    s = [1.0, 2.0, 3.0, 4.0]
    assert threshold_at_fpr(s, 0.0) == np.nextafter(4.0, np.inf)
    assert threshold_at_fpr(s, 0.0) > 4.0
    assert threshold_at_fpr(s, 0.5) == 3.0  # 2/4 non-members >= 3
    assert threshold_at_fpr(s, 0.25) == 4.0
    assert threshold_at_fpr(s, 0.49) == 4.0
    assert threshold_at_fpr(s, 1.0) == 1.0
    # ties: with [1, 2, 2, 3] no threshold gives exactly 50%; t=2 gives 75%, t=3 gives 25%
    assert threshold_at_fpr([1.0, 2.0, 2.0, 3.0], 0.5) == 3.0
    # order of the input does not matter
    assert threshold_at_fpr([4.0, 1.0, 3.0, 2.0], 0.5) == 3.0


def test_threshold_at_fpr_rate_boundary_is_inclusive():
    s = np.arange(1, 101, dtype=float)  # 5/100 >= 96 -> exactly 5%
    assert threshold_at_fpr(s, 0.05) == 96.0
    assert threshold_at_fpr(np.arange(1, 1001, dtype=float), 0.005) == 996.0


def test_threshold_at_fpr_rejects_bad_input():
    with pytest.raises(ValueError):
        threshold_at_fpr([], 0.1)
    with pytest.raises(ValueError):
        threshold_at_fpr([1.0, 2.0], 1.5)
    with pytest.raises(ValueError):
        threshold_at_fpr([1.0, np.nan], 0.1)


def test_threshold_max_accuracy_smallest_of_ties():
    # t=0.4 and t=0.9 both give 3/4 correct; the smaller one wins
    assert threshold_max_accuracy([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == 0.4
    assert threshold_max_accuracy([1, 1, 0, 0], [3.0, 4.0, 1.0, 2.0]) == 3.0
    # all non-members: predicting nobody a member is perfect
    assert threshold_max_accuracy([0, 0], [1.0, 2.0]) == np.nextafter(2.0, np.inf)


def test_fpr_key():
    assert [fpr_key(f) for f in (0.0, 0.005, 0.01, 0.05, 0.1)] == ["0", "0.5", "1", "5", "10"]


# ---------------------------------------------------------------------------------------------
# evaluate_variant
# ---------------------------------------------------------------------------------------------
def test_reference_threshold_is_applied_to_eval_not_refitted():
    # reference perfectly separated at t=3; on eval that threshold is right on 2 of 4 documents,
    # while a threshold fitted on eval itself (t=2.5) would reach 3/4.
    df = frame("v", ref_m=[3, 4], ref_n=[1, 2], ev_m=[2.5, 5], ev_n=[3.5, 0])
    r = evaluate_variant(df, n_boot=50)
    assert r["threshold_acc"] == 3.0
    assert r["threshold_accuracy"] == pytest.approx(0.5)
    assert np.isnan(r["accuracy"])  # no decision rule, no accuracy in the papers' sense
    assert threshold_max_accuracy([1, 1, 0, 0], [2.5, 5, 3.5, 0]) == 2.5  # the in-sample choice
    assert r["auc"] == pytest.approx(0.75)  # (5>3.5, 5>0, 2.5>0; 2.5<3.5) on eval


def test_tpr_at_fpr_hand_computed():
    ref_n = np.arange(1, 11) / 10  # 0.1 .. 1.0
    df = frame(
        "v",
        ref_m=[0.5, 2.0],
        ref_n=ref_n,
        ev_m=[0.95, 1.0, 1.5, 2.0, 0.2],
        ev_n=[0.3, 1.2, 0.5, 0.05, 0.7],
    )
    r = evaluate_variant(df, fprs=(0.0, 0.1), n_boot=50)
    assert r["threshold_fpr_0"] == np.nextafter(1.0, np.inf)
    assert r["tpr_at_fpr_0"] == pytest.approx(2 / 5)  # 1.5, 2.0
    assert r["fpr_realized_0"] == pytest.approx(1 / 5)  # 1.2 transfers badly
    assert r["threshold_fpr_10"] == 1.0
    assert r["tpr_at_fpr_10"] == pytest.approx(3 / 5)  # 1.0, 1.5, 2.0
    assert r["fpr_realized_10"] == pytest.approx(1 / 5)
    assert (r["n_ref_members"], r["n_ref_nonmembers"]) == (2, 10)
    assert (r["n_members"], r["n_nonmembers"]) == (5, 5)


def test_black_box_rates_from_decisions():
    df = frame(
        "bb",
        ref_m=[1, 1],
        ref_n=[0, 0],
        ev_m=[1, 1, 0, 1],
        ev_n=[0, 1, 0, 0],
        dec_m=[1, 1, 0, 1],
        dec_n=[0, 1, 0, 0],
    )
    r = evaluate_variant(df, n_boot=200)
    assert r["bb_tpr"] == pytest.approx(0.75)
    assert r["bb_fpr"] == pytest.approx(0.25)
    assert r["bb_tpr_lo"] <= 0.75 <= r["bb_tpr_hi"]
    assert r["bb_fpr_lo"] <= 0.25 <= r["bb_fpr_hi"]
    assert r["bb_tpr_hi"] > r["bb_tpr_lo"]


def test_accuracy_is_the_decision_rules_not_the_best_threshold():
    """DCMI Eq. 9/11/13, RAG-MIA's Yes/No, MBA's γ, S2MIA's T: the accuracy a paper reports is that of
    its own decision rule. Here the scores separate perfectly (best-threshold accuracy 1.0) while the
    rule is right on 5 of 8 evaluation documents."""
    df = frame(
        "dcmi/adv2",
        ref_m=[5, 6],
        ref_n=[0, 1],
        ev_m=[5, 6, 7, 8],
        ev_n=[0, 1, 2, 3],
        dec_m=[1, 1, 0, 0],
        dec_n=[0, 0, 0, 1],
    )
    r = evaluate_variant(df, n_boot=200)
    assert r["accuracy"] == pytest.approx(5 / 8)
    assert (r["bb_tpr"], r["bb_fpr"]) == (pytest.approx(0.5), pytest.approx(0.25))
    assert r["accuracy"] == pytest.approx((r["bb_tpr"] + 1 - r["bb_fpr"]) / 2)  # balanced classes
    assert r["accuracy_lo"] <= 5 / 8 <= r["accuracy_hi"] and r["accuracy_lo"] < r["accuracy_hi"]
    assert r["threshold_accuracy"] == 1.0  # kept, separately labelled
    # 8 of 8 right: Clopper-Pearson [0.025 ** (1/8), 1], not the bootstrap's point [1, 1]
    assert r["threshold_accuracy_lo"] == pytest.approx(0.025 ** (1 / 8)) and r["threshold_accuracy_hi"] == 1.0


def test_rule_rates_and_accuracy_have_clopper_pearson_intervals_on_their_counts():
    df = random_frame("rag_mia/black/t2", decisions=True, n=60, seed=8)
    r = evaluate_variant(df, n_boot=400)
    ev = df[df["role"] == "eval"]
    dm = ev.loc[ev["label"] == 1, "decision"].to_numpy(float)
    dn = ev.loc[ev["label"] == 0, "decision"].to_numpy(float)
    right = int(dm.sum() + (1 - dn).sum())  # correct verdicts over the 120 eval rows
    assert r["accuracy"] == pytest.approx(right / 120)
    assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx(metrics.clopper_pearson(right, 120))
    assert (r["bb_tpr_lo"], r["bb_tpr_hi"]) == pytest.approx(metrics.clopper_pearson(int(dm.sum()), 60))
    assert (r["bb_fpr_lo"], r["bb_fpr_hi"]) == pytest.approx(metrics.clopper_pearson(int(dn.sum()), 60))
    ok = int((ev.loc[ev["label"] == 1, "score"] >= r["threshold_acc"]).sum())
    ok += int((ev.loc[ev["label"] == 0, "score"] < r["threshold_acc"]).sum())
    assert r["threshold_accuracy"] == pytest.approx(ok / 120)
    ci = metrics.clopper_pearson(ok, 120)
    assert (r["threshold_accuracy_lo"], r["threshold_accuracy_hi"]) == pytest.approx(ci)


def test_no_black_box_keys_without_decisions():
    r = evaluate_variant(random_frame("gray"), n_boot=20)
    assert not any(k.startswith("bb_") for k in r)
    assert np.isnan(r["accuracy"]) and np.isnan(r["accuracy_lo"]) and 0 <= r["threshold_accuracy"] <= 1


def test_partial_decisions_rejected():
    df = frame("bb", [1], [0], [1, 1], [0, 0], dec_m=[1, np.nan], dec_n=[0, 0])
    with pytest.raises(ValueError, match="bb"):
        evaluate_variant(df, n_boot=10)


def test_intervals_contain_the_estimate_and_do_not_depend_on_n_boot():
    df = random_frame("rag_mia/gray/t2", decisions=True)
    a = evaluate_variant(df, n_boot=300)
    b = evaluate_variant(df, n_boot=300)
    c = evaluate_variant(df, n_boot=50)
    assert _same(a, b)
    for m in ["auc", "accuracy", "threshold_accuracy", "tpr_at_fpr_5", "tpr_at_fpr_1", "bb_tpr", "bb_fpr"]:
        assert a[f"{m}_lo"] <= a[m] <= a[f"{m}_hi"], m
        assert a[f"{m}_lo"] < a[f"{m}_hi"], m
    # analytic intervals (Newcombe's score interval, Clopper-Pearson): no resampling, so n_boot moves
    # no number; it is only recorded
    assert (a["auc_lo"], a["auc_hi"]) == metrics.auc_ci(a["auc"], 120, 120)
    assert _same({k: v for k, v in a.items() if k != "n_boot"}, {k: v for k, v in c.items() if k != "n_boot"})
    assert (a["n_boot"], c["n_boot"]) == (300, 50)


def test_metrics_independent_of_row_order_and_other_variants():
    one = random_frame("a", seed=3)
    other = random_frame("b", seed=4)
    alone = evaluate_variant(one, n_boot=200)
    shuffled = evaluate_variant(one.sample(frac=1.0, random_state=7), n_boot=200)
    assert _same(alone, shuffled)
    together = evaluate(pd.concat([other, one]), n_boot=200)
    row = together.set_index("variant").loc["a"]
    for k, v in alone.items():
        if k != "variant":
            assert row[k] == v or (np.isnan(row[k]) and np.isnan(v)), k


def test_metrics_do_not_depend_on_the_variant_name():
    # the former bootstrap drew a generator per variant name, so a renamed variant got another
    # interval; the analytic intervals give the same numbers
    df = random_frame("a", seed=3)
    ra = evaluate_variant(df, n_boot=200)
    rb = evaluate_variant(df.assign(variant="b"), n_boot=200)
    assert ra["auc"] == rb["auc"]
    assert _same({**ra, "variant": "b"}, rb)


def test_perfect_separation_keeps_a_wide_interval():
    # 3 + 3 perfectly separated: the percentile bootstrap gave 1.00 [1.00, 1.00]; three members and
    # three non-members cannot make an AUC of 1 certain
    df = frame("p", [5, 6], [0, 1], ev_m=[5, 6, 7], ev_n=[0, 1, 2])
    r = evaluate_variant(df, n_boot=100)
    assert (r["auc"], r["auc_hi"]) == (1.0, 1.0) and r["auc_lo"] < 0.8
    assert (r["auc_lo"], r["auc_hi"]) == metrics.auc_ci(1.0, 3, 3)
    assert (r["threshold_accuracy"], r["threshold_accuracy_hi"]) == (1.0, 1.0)
    assert r["threshold_accuracy_lo"] == pytest.approx(0.025 ** (1 / 6))  # Clopper-Pearson, 6 of 6


def test_weighted_bootstrap_auc_matches_sklearn():
    rng = np.random.default_rng(5)
    m = rng.integers(0, 6, 25).astype(float)  # many ties
    n = rng.integers(0, 6, 31).astype(float)
    gen = np.random.default_rng(9)
    cm = metrics._resample_counts(gen, m.size, 40)
    cn = metrics._resample_counts(gen, n.size, 40)
    assert (cm.sum(axis=1) == m.size).all() and (cn.sum(axis=1) == n.size).all()
    fast = metrics._weighted_auc(m, n, cm, cn)
    labels = np.r_[np.ones(m.size), np.zeros(n.size)]
    slow = [roc_auc(labels, np.r_[np.repeat(m, cm[b]), np.repeat(n, cn[b])]) for b in range(40)]
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


@pytest.mark.parametrize("which", ["ev_m", "ev_n"])
def test_empty_eval_class_raises_naming_variant(which):
    parts = dict(ref_m=[1.0], ref_n=[0.0], ev_m=[1.0, 2.0], ev_n=[0.0, 0.5])
    parts[which] = []
    with pytest.raises(ValueError, match="my/variant"):
        evaluate_variant(frame("my/variant", **parts), n_boot=10)


def test_empty_reference_class_raises():
    with pytest.raises(ValueError, match="reference"):
        evaluate_variant(frame("v", [], [0.0], [1.0], [0.0]), n_boot=10)


def test_invalid_frames_rejected():
    good = frame("v", [1.0], [0.0], [1.0, 2.0], [0.0, 0.5])
    with pytest.raises(ValueError, match="non-finite"):
        evaluate(good.assign(score=[1.0, 0.0, np.nan, 2.0, 0.0, 0.5]), n_boot=10)
    with pytest.raises(ValueError, match="label"):
        evaluate(good.assign(label=[1, 0, 2, 1, 0, 0]), n_boot=10)
    with pytest.raises(ValueError, match="role"):
        evaluate(good.assign(role="train"), n_boot=10)
    with pytest.raises(ValueError, match="more than once"):
        evaluate(pd.concat([good, good.iloc[:1]]), n_boot=10)
    with pytest.raises(ValueError, match="lacks columns"):
        evaluate(good.drop(columns="role"), n_boot=10)


# ---------------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------------
def test_evaluate_rows_columns_and_costs():
    df = pd.concat([random_frame("z/bb", decisions=True, seed=2), random_frame("a/gray", seed=3)])
    costs = {"z/bb": {"queries_per_candidate": 1, "no_answer_rate": 0.1}, "a/gray": {"queries_per_candidate": 3}}
    out = evaluate(df, n_boot=50, costs=costs)
    assert list(out["variant"]) == ["a/gray", "z/bb"]
    assert list(out.columns) == metric_columns() + ["queries_per_candidate", "no_answer_rate"]
    assert list(out["queries_per_candidate"]) == [3, 1]
    assert np.isnan(out.loc[0, "no_answer_rate"]) and out.loc[1, "no_answer_rate"] == 0.1
    assert np.isnan(out.loc[0, "bb_tpr"]) and not np.isnan(out.loc[1, "bb_tpr"])
    assert "tpr_at_fpr_0.5" in out.columns and "fpr_realized_0.5" in out.columns
    with pytest.raises(ValueError, match="without scores"):
        evaluate(df, n_boot=10, costs={"nope": {"queries_per_candidate": 1}})
    with pytest.raises(ValueError, match="clash"):
        evaluate(df, n_boot=10, costs={"a/gray": {"auc": 1}})


# ---------------------------------------------------------------------------------------------
# Not-estimable FPR levels, paired AUC difference, power
# ---------------------------------------------------------------------------------------------
def test_fpr_estimable_needs_one_over_fpr_reference_nonmembers():
    assert metrics.fpr_estimable(0.0, 1)  # the threshold above every reference non-member
    assert metrics.fpr_estimable(0.05, 20) and not metrics.fpr_estimable(0.05, 19)
    assert not metrics.fpr_estimable(0.05, 3)
    assert metrics.fpr_estimable(0.005, 200) and not metrics.fpr_estimable(0.005, 199)
    assert metrics.fpr_estimable(0.1, 10)  # 0.1 * 10 == 1 up to rounding


def test_unresolvable_fpr_level_is_nan_not_a_copy_of_tpr_at_0():
    # 3 reference non-members: 5% FPR needs 20; 50% needs 2
    df = frame("v", ref_m=[2.0, 3.0], ref_n=[0.1, 0.2, 0.3], ev_m=[0.3, 2.0, 3.0], ev_n=[0.0, 0.15, 0.5])
    r = evaluate_variant(df, fprs=(0.0, 0.05, 0.5), n_boot=30)
    assert r["tpr_at_fpr_0"] == pytest.approx(2 / 3)
    for c in ("threshold_fpr_5", "tpr_at_fpr_5", "tpr_at_fpr_5_lo", "tpr_at_fpr_5_hi", "fpr_realized_5"):
        assert np.isnan(r[c]), c
    assert np.isnan(r["fpr_realized_5_lo"]) and np.isnan(r["fpr_realized_5_hi"])
    assert r["threshold_fpr_50"] == 0.3 and r["tpr_at_fpr_50"] == pytest.approx(1.0)  # 1/3 of 3 at 0.3


def test_paired_auc_difference_identical_scores_give_zero_with_a_narrow_interval():
    rng = np.random.default_rng(2)
    labels = np.r_[np.ones(40, int), np.zeros(40, int)]
    s = rng.normal(size=80) + labels
    d, lo, hi = metrics.paired_auc_difference(labels, s, s.copy())
    # the two AUCs move together (DeLong correlation 1): only the asymmetry of their score intervals is left
    assert d == 0.0 and -0.05 < lo < 0 < hi < 0.05


def test_paired_auc_difference_random_vs_perfect_is_negative_and_paired():
    labels = np.r_[np.ones(30, int), np.zeros(30, int)]
    perfect = labels + np.linspace(0, 0.5, 60)
    noise = np.random.default_rng(3).normal(size=60)
    d, lo, hi = metrics.paired_auc_difference(labels, noise, perfect)
    assert d == pytest.approx(roc_auc(labels, noise) - 1.0)
    assert lo <= d <= hi < 0
    # a constant shift of the scores changes neither AUC: the difference is 0, and the interval is that of
    # two perfectly correlated AUCs, far narrower than two independent ones would give
    d2, lo2, hi2 = metrics.paired_auc_difference(labels, noise + 1.0, noise)
    a_lo, a_hi = metrics.auc_ci(roc_auc(labels, noise), 30, 30)
    assert d2 == 0.0 and hi2 - lo2 < 0.3 * np.hypot(a_hi - a_lo, a_hi - a_lo)
    with pytest.raises(ValueError, match="length"):
        metrics.paired_auc_difference(labels, noise[:-1], perfect)


def test_paired_auc_mover_matches_delong_on_a_hand_example():
    """DeLong et al. 1988 components written out: 2 members, 2 non-members, a = (3, 1 | 2, 0), b = (3, 2 | 1, 0)."""
    a_m, a_n, b_m, b_n = np.array([3.0, 1.0]), np.array([2.0, 0.0]), np.array([3.0, 2.0]), np.array([1.0, 0.0])
    d, lo, hi = metrics.paired_auc_mover(a_m, a_n, b_m, b_n)
    assert d == pytest.approx(0.75 - 1.0)
    # v10_a = (1, 0.5), v01_a = (0.5, 1); b separates perfectly: variance 0, correlation taken as 0
    la, ua = metrics.auc_ci(0.75, 2, 2)
    lb, ub = metrics.auc_ci(1.0, 2, 2)
    assert lo == pytest.approx(max(-1.0, d - np.hypot(0.75 - la, ub - 1.0)))
    assert hi == pytest.approx(min(1.0, d + np.hypot(ua - 0.75, 1.0 - lb)))


def test_auc_pvalues_exact_without_ties_normal_with_them():
    from scipy import stats

    rng = np.random.default_rng(5)
    m, n = rng.normal(0.8, 1, 20), rng.normal(0, 1, 20)
    p, g = metrics.auc_pvalues(m, n)
    assert p == pytest.approx(stats.mannwhitneyu(m, n, method="exact").pvalue)
    assert g == pytest.approx(stats.mannwhitneyu(m, n, alternative="greater", method="exact").pvalue)
    # complete separation at 5+5: the exact one-sided p is 1 / C(10, 5)
    assert metrics.auc_pvalues([5, 6, 7, 8, 9], [0, 1, 2, 3, 4])[1] == pytest.approx(1 / 252)
    tied = metrics.auc_pvalues([1, 1, 2, 2], [0, 1, 1, 0])
    assert tied[0] == pytest.approx(stats.mannwhitneyu([1, 1, 2, 2], [0, 1, 1, 0], method="asymptotic").pvalue)
    assert metrics.auc_pvalues([1, 1], [1, 1]) == (1.0, 1.0)
    # evaluate() carries them beside the interval
    df = frame("v", ref_m=[2.0, 3.0], ref_n=[0.1, 0.2], ev_m=[5, 6, 7, 8, 9], ev_n=[0, 1, 2, 3, 4])
    r = evaluate(df, n_boot=1).iloc[0]
    assert r["auc_p_greater"] == pytest.approx(1 / 252) and r["auc_p"] == pytest.approx(2 / 252)
    cols = metrics.metric_columns()
    assert cols.index("auc_p") == cols.index("auc_hi") + 1 and cols.index("auc_p_greater") == cols.index("auc_p") + 1
    # the fallback for rows written before the columns: the normal approximation from the AUC alone
    p0, g0 = metrics.auc_pvalues_from_auc(0.5, 20, 20)
    assert p0 == pytest.approx(1.0) and g0 == pytest.approx(0.5)


def hm_se(a, nm, nn):
    """Hanley & McNeil 1982 eq. 2, written out independently of ragmi.metrics."""
    q1, q2 = a / (2 - a), 2 * a**2 / (1 + a)
    return np.sqrt((a * (1 - a) + (nm - 1) * (q1 - a**2) + (nn - 1) * (q2 - a**2)) / (nm * nn))


def test_hanley_mcneil_se_hand_computed():
    # A = 0.5, 10 + 10: Q1 = Q2 = 1/3, SE^2 = (0.25 + 2 * 9 * (1/3 - 1/4)) / 100 = 0.0175
    assert metrics.hanley_mcneil_se(0.5, 10, 10) == pytest.approx(np.sqrt(0.0175))
    # A = 0.7: Q1 = 0.7/1.3, Q2 = 0.98/1.7
    assert metrics.hanley_mcneil_se(0.7, 10, 10) == pytest.approx(0.1193478, abs=1e-6)
    assert metrics.hanley_mcneil_se(1.0, 10, 10) == 0.0


def test_min_detectable_auc_hand_computed():
    # the AUC at which the printed interval (Newcombe's score interval) stops containing 0.5:
    # 0.5 + 1.96 SE(0.5), SE(0.5)^2 = 0.0175 at 10 + 10 (Hanley-McNeil's, as N* = n - 1 when m = n)
    a = metrics.min_detectable_auc(10, 10)
    assert a == pytest.approx(0.5 + 1.96 * np.sqrt(0.0175), abs=1e-12)
    assert a == pytest.approx(0.75929, abs=1e-4)
    assert a == pytest.approx(0.5 + 1.96 * hm_se(0.5, 10, 10), abs=1e-12)
    # consistent with auc_ci: just below it the interval contains 0.5, just above it does not
    assert metrics.auc_ci(a - 1e-6, 10, 10, z=1.96)[0] < 0.5 < metrics.auc_ci(a + 1e-6, 10, 10, z=1.96)[0]
    assert metrics.min_detectable_auc(8, 8) == pytest.approx(0.5 + 1.96 * hm_se(0.5, 8, 8), abs=1e-12)
    # 20 + 20: SE(0.5)^2 = 0.25 (1 + 19 * 2/3) / 400
    assert metrics.min_detectable_auc(20, 20) == pytest.approx(0.5 + 1.96 * np.sqrt(0.25 * (1 + 38 / 3) / 400))
    # more candidates, a smaller detectable AUC; none at all with 2 + 2
    assert metrics.min_detectable_auc(500, 500) < metrics.min_detectable_auc(50, 50) < a
    assert np.isnan(metrics.min_detectable_auc(2, 2))
