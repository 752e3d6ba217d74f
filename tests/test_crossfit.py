"""Cross-fitted attack parts: reference and evaluation candidates are scored by one procedure.

An attack that fits a part on the reference candidates (RAG-MIA's gray-box ensemble, S²MIA-M's
classifier, S²MIA-T's thresholds, DCMI's θ/γ/τ, MBA's γ) scores or decides its reference candidates
out of fold; ragmi.metrics places its thresholds on those scores and applies them to the evaluation
candidates.  That is sound only if both sets are scored by the same procedure: each row by the ONE
part fitted on the reference rows of the other folds, an evaluation row's fold hashed from its
doc_id (ragmi.attacks.folds).  On a *blind* target (features drawn from one distribution for members
and non-members) every candidate is exchangeable, and benchmarks/crossfit.py measures, over 500
replicates, the evaluation FPR at the 5% reference threshold and the gap between the evaluation and
the reference non-members' decision rates; the branch point's procedures (the MEAN of the K fold
parts for evaluation rows; θ, γ, τ and thresholds chosen on all reference rows) are reimplemented
there as the comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragmi.attacks.rag_mia import RagMIA
from ragmi.attacks.s2mia import S2MIA
from ragmi.metrics import threshold_at_fpr

N = 20  # reference and evaluation candidates per class
EXCHANGEABLE_FPR = 1 / (N + 1)  # ~0.048
BOUND = 0.10  # the mean over replicates; its standard error is ~0.065 / sqrt(replicates)


def _fpr_at_zero(scores: pd.Series, ref: dict[str, int], ev_nonmembers: list[str]) -> float:
    """The evaluation FPR of the threshold above the highest reference non-member."""
    t = threshold_at_fpr([scores[d] for d, y in ref.items() if y == 0], 0.0)
    return float(np.mean(scores[ev_nonmembers].to_numpy() >= t))


def _ids():
    ref = {f"rm{i}": 1 for i in range(N)} | {f"rn{i}": 0 for i in range(N)}
    ev = [f"em{i}" for i in range(N)] + [f"en{i}" for i in range(N)]
    return ref, ev, [d for d in ev if d.startswith("en")]


# ---------------------------------------------------------------------------------------------
# RAG-MIA gray box
# ---------------------------------------------------------------------------------------------
def _rag_mia_replicate(rep: int, folds: int) -> float:
    ref, ev, ev_non = _ids()
    ids = list(ref) + ev
    # blind and tied: a target that answers every candidate "No" alike, member or not.  (A continuous
    # blind P(Yes) costs some 40 times more, the MLPs fitting noise, and gives both procedures a rate
    # near or below 1/21.)
    attack, q, resp = _gray_frames(ids, np.full(len(ids), 0.02), ensemble_size=3, folds=folds, seed=rep)
    s = attack.score(q, resp, ref)
    gray = s[s["variant"] == "rag_mia/gray/t2"].set_index("doc_id")["score"]
    return _fpr_at_zero(gray, ref, ev_non)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_rag_mia_gray_zero_fpr_threshold_transfers_on_a_tied_blind_target():
    """Every answer alike: each fold's ensemble gives one value to all it scores.  An evaluation set
    scored by one more ensemble (trained on all reference rows) lies above all K fold values about
    once in K+1 replicates, and then every evaluation non-member is a false positive (the narrow band
    of evaluation scores above every reference non-member seen in a real run).  Constant features
    give every row, reference or evaluation, one score (the mean of the K fold values): nothing passes
    a threshold above the reference non-members."""
    fpr = np.mean([_rag_mia_replicate(r, folds=3) for r in range(20)])
    assert fpr < BOUND, f"mean realised FPR {fpr:.3f} of a 0% threshold; exchangeable: {EXCHANGEABLE_FPR:.3f}"


# ---------------------------------------------------------------------------------------------
# S²MIA-M
# ---------------------------------------------------------------------------------------------
def _s2mia_replicate(rep: int, monkeypatch) -> float:
    rng = np.random.default_rng([2025, rep])
    ref, ev, ev_non = _ids()
    ids = list(ref) + ev
    feats = pd.DataFrame(
        {
            "doc_id": ids,
            "bleu": rng.beta(1.0, 4.0, len(ids)),
            "ppl": np.exp(rng.normal(1.5, 0.5, len(ids))),
            "no_answer": False,
        }
    )
    att = S2MIA({"classifier": "gbdt", "n_estimators": 10, "cv_folds": 5}, seed=rep)
    monkeypatch.setattr(att, "features", lambda df, ref=(): feats)
    q = pd.DataFrame({"query_id": ids, "doc_id": ids})
    r = pd.DataFrame({"query_id": ids, "response_text": "x"})
    out = att.score(q, r, ref)
    m = out[out["variant"] == "s2mia/M"].set_index("doc_id")["score"]
    return _fpr_at_zero(m, ref, ev_non)


def test_s2mia_m_zero_fpr_threshold_transfers_on_a_blind_target(monkeypatch):
    fpr = np.mean([_s2mia_replicate(r, monkeypatch) for r in range(60)])
    assert fpr < BOUND, f"mean realised FPR {fpr:.3f} of a 0% threshold; exchangeable: {EXCHANGEABLE_FPR:.3f}"


# ---------------------------------------------------------------------------------------------
# every fitted part on a blind target, 500 replicates (benchmarks/crossfit.py, cheap parts)
# ---------------------------------------------------------------------------------------------
REPS = 500
SIZES = {"n_ref": 40, "n_eval": 40, "folds": 3, "ensemble_size": 2}
# Cross-fitting's own finite-sample residual: out-of-fold scores on null data sit slightly apart from
# fresh ones (the reference non-members' scores share terms through the other folds' fits), which
# makes the realised FPR at the reference threshold a little *conservative*: 0.0444 ± 0.0007 against
# 0.0488 for a linear discriminant at 40 + 40, K = 3, and 0.0452 ± 0.0005 against 0.0498 at 200 + 200,
# K = 5 (4,000 and 1,500 replicates of a numpy reimplementation).  The test allows that much below
# the exchangeable rate, never anything above it beyond sampling error (with the reference folds
# stratified by class, benchmarks/crossfit.py measured 0.0433 for RAG-MIA and 0.0408 for S²MIA-M).
RESIDUAL = 0.006


def _load_benchmark():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "crossfit.py"
    spec = importlib.util.spec_from_file_location("ragmi_bench_crossfit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def blind():
    return _load_benchmark().run(reps=REPS, cheap=True, **SIZES)


SCORED = ["rag_mia/gray", "s2mia/M", "s2mia/T", "dcmi/adv1"]  # variants whose score has a fitted part
DECIDED = SCORED + ["dcmi/adv2", "dcmi/theta=0.04", "mba/gamma"]  # variants whose decision has one


@pytest.mark.parametrize("variant", SCORED)
def test_blind_target_fpr_at_the_5pct_reference_threshold_is_nominal(blind, variant):
    """The evaluation non-members' rate at the 5% threshold of the reference non-members' scores, the
    mean over 500 replicates: within sampling error (3 standard errors) of the exchangeable rate
    floor(0.05 n)/(n + 1) = 2/41 (at most RESIDUAL below it)."""
    m = blind["results"][variant]["new"]["fpr_at_5"]
    exp = blind["expected_fpr_at_5"]
    assert m["n"] == REPS >= 500
    assert exp - RESIDUAL - 3 * m["se"] <= m["mean"] <= exp + 3 * m["se"], (variant, m, exp)


@pytest.mark.parametrize("variant", ["rag_mia/gray", "s2mia/M"])
def test_blind_target_mean_of_folds_was_measurably_below(blind, variant):
    """The branch point's procedure (an evaluation row scored by the MEAN of the K fold parts) realised
    far less than the nominal rate: its spread is narrower than one fold part's."""
    old, new = blind["results"][variant]["old"]["fpr_at_5"], blind["results"][variant]["new"]["fpr_at_5"]
    assert old["hi"] < blind["expected_fpr_at_5"] - 0.02, old
    assert old["hi"] < new["lo"], (old, new)


@pytest.mark.parametrize("variant", DECIDED)
def test_blind_target_decision_rates_agree(blind, variant):
    """The evaluation non-members' decision rate minus the reference non-members' (the rule's FPR as
    the reference set reports it): never above 0 beyond sampling error, and at most 0.02 below (the
    same conservative residual as above, larger for a decision that a grid search makes)."""
    g = blind["results"][variant]["new"]["decision_gap"]
    assert -0.02 - 3 * g["se"] <= g["mean"] <= 3 * g["se"], (variant, g)


@pytest.mark.parametrize("variant", ["s2mia/T", "dcmi/adv1", "dcmi/theta=0.04"])
def test_blind_target_in_sample_choices_were_anti_conservative(blind, variant):
    """The branch point chose θ, γ and thresholds on all reference rows and decided those same rows:
    their decision rate understated the evaluation non-members' by a measurable margin."""
    g = blind["results"][variant]["old"]["decision_gap"]
    assert g["lo"] > 0.02, (variant, g)


def test_benchmark_smoke(tmp_path):
    """benchmarks/crossfit.py end to end at a tiny size: it writes its result as JSON."""
    import json

    bench = _load_benchmark()
    out = tmp_path / "cf.json"
    assert (
        bench.main(["--reps", "3", "--n-ref", "20", "--n-eval", "10", "--folds", "2", "--cheap", "--out", str(out)])
        == 0
    )
    res = json.loads(out.read_text())
    assert res["replicates"] == 3 and set(res["results"]) == set(DECIDED)
    assert res["results"]["rag_mia/gray"]["new"]["fpr_at_5"]["n"] == 3


# ---------------------------------------------------------------------------------------------
# the fold of a document is a function of its doc_id
# ---------------------------------------------------------------------------------------------
def _gray_frames(ids, p, ensemble_size=2, folds=3, seed=4):
    """RAG-MIA (template 2) and its queries about ``ids``, answered with P(Yes) = ``p`` per document."""
    attack = RagMIA({"templates": [2], "ensemble_size": ensemble_size, "cv_folds": folds}, seed=seed)
    q = attack.build_queries(pd.DataFrame({"doc_id": ids, "text": "x", "title": "", "human_turn": ""}))
    top = [[[{"token": "Yes", "logprob": math.log(v)}, {"token": "No", "logprob": math.log1p(-v)}]] for v in p]
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": ["Yes." if v > 0.5 else "No." for v in p],
            "first_token_logprobs": [t[0] for t in top],
            "token_top_logprobs": top,
            "token_logprobs": [[] for _ in ids],
            "prompt_tokens": 1,
            "completion_tokens": 1,
        }
    )
    return attack, q, resp


def test_fold_is_a_function_of_the_doc_id_across_row_order_and_controls(monkeypatch):
    import ragmi.attacks.rag_mia as rm
    from ragmi.workflow import control_responses

    monkeypatch.setattr(rm, "ensemble_scores", _load_benchmark().cheap_ensemble)
    ref, ev, _ = _ids()
    ids = list(ref) + ev
    rng = np.random.default_rng(3)
    attack, q, resp = _gray_frames(ids, rng.uniform(0.05, 0.95, len(ids)))
    base = attack.score(q, resp, ref).query("variant == 'rag_mia/gray/t2'").set_index("doc_id")
    assert set(base["fold"]) == {0, 1, 2} and (base["selection"] == "in-fold").all()
    # the rows shuffled: every document keeps its fold and its score
    perm = rng.permutation(len(q))
    shuffled = attack.score(q.iloc[perm], resp.iloc[perm], ref).query("variant == 'rag_mia/gray/t2'")
    shuffled = shuffled.set_index("doc_id").loc[base.index]
    assert shuffled["fold"].tolist() == base["fold"].tolist()
    assert np.allclose(shuffled["score"], base["score"])
    # a negative control: the base target's answers for the reference rows, its own for the others
    _, _, own = _gray_frames(ids, rng.uniform(0.05, 0.95, len(ids)))
    roles = pd.DataFrame({"doc_id": ids, "role": ["reference" if d in ref else "eval" for d in ids]})
    ctrl_resp = control_responses(resp, own, q, roles)
    ctrl = attack.score(q, ctrl_resp, ref).query("variant == 'rag_mia/gray/t2'").set_index("doc_id").loc[base.index]
    assert ctrl["fold"].tolist() == base["fold"].tolist()
    assert np.allclose(ctrl.loc[list(ref), "score"], base.loc[list(ref), "score"])  # the same fitted parts
    assert not np.allclose(ctrl.loc[ev, "score"], base.loc[ev, "score"])  # on the control's own answers
    # an evaluation document's fold does not depend on which other documents are scored
    few = [d for d in ids if d in ref] + ev[:3]
    sub = [i for i, d in enumerate(q["doc_id"]) if d in few]
    part = attack.score(q.iloc[sub], resp.iloc[sub], ref).query("variant == 'rag_mia/gray/t2'").set_index("doc_id")
    assert part.loc[ev[:3], "fold"].tolist() == base.loc[ev[:3], "fold"].tolist()


def test_fold_helpers_balance_and_stratify():
    from ragmi.attacks.folds import eval_folds, reference_folds

    ids = [f"d{i}" for i in range(3000)]
    f = eval_folds(ids, 5, seed=1, name="x")
    assert np.array_equal(f, eval_folds(list(reversed(ids)), 5, seed=1, name="x")[::-1])
    assert np.bincount(f, minlength=5).min() > 3000 / 5 - 4 * math.sqrt(3000 * 0.16)  # balanced in expectation
    assert not np.array_equal(f, eval_folds(ids, 5, seed=2, name="x"))  # the seed matters
    y = np.arange(60) % 2
    r = reference_folds(ids[:60], y, 5, seed=1, name="x")
    assert (np.bincount(r, minlength=5) == 12).all()  # sizes within one
    for cls in (0, 1):  # stratified: each fold holds 6 of each class's 30
        assert (np.bincount(r[y == cls], minlength=5) == 6).all()
    # 6 + 6 in 3 folds: every fold part is fitted on 4 members and 4 non-members (a label-blind deal can
    # leave 3 against 5, where a small gradient-boosted model cannot split at all)
    y6 = np.r_[np.ones(6, int), np.zeros(6, int)]
    r6 = reference_folds(ids[:12], y6, 3, seed=1, name="x")
    for k in range(3):
        assert np.bincount(y6[r6 != k], minlength=2).tolist() == [4, 4]
    assert np.array_equal(r, reference_folds(list(reversed(ids[:60])), y[::-1], 5, seed=1, name="x")[::-1])
