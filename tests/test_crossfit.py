"""Cross-fitted attack models: reference and evaluation candidates are scored on the same scale.

An attack that fits a model on the reference candidates (RAG-MIA's gray-box ensemble, S²MIA-M)
scores its reference candidates out of fold; ragmi.metrics places its thresholds on those scores and
applies them to the evaluation candidates.  That is sound only if both sets are scored by the same
procedure.  On a *blind* target (the attack's features drawn from one distribution for members and
non-members) every candidate is exchangeable, so a threshold just above the highest of n reference
non-member scores (the "0% FPR" threshold, :func:`ragmi.metrics.threshold_at_fpr`) lets through a
fresh evaluation non-member with probability at most about 1/(n+1) (1/21 for n = 20), averaged over
replicates, when both sets are scored by the same procedure; ragmi scores an evaluation candidate by
the mean of the fold models, which narrows their spread, so the realised rate is rather below it (a
conservative threshold; it also keeps constant features constant).  Scored by one more model trained
on all reference candidates (the procedure before cross-fitting), the evaluation set is scored on
another scale: where the models give one value to all candidates, it lies above every reference
non-member in about 1 of K+1 replicates.
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
    p = np.full(len(ids), 0.02)
    attack = RagMIA({"templates": [2], "ensemble_size": 3, "cv_folds": folds}, seed=rep)
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
    s = attack.score(q, resp, ref)
    gray = s[s["variant"] == "rag_mia/gray/t2"].set_index("doc_id")["score"]
    return _fpr_at_zero(gray, ref, ev_non)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_rag_mia_gray_zero_fpr_threshold_transfers_on_a_tied_blind_target():
    """Every answer alike: each fold's ensemble gives one value to all it scores.  An evaluation set
    scored by one more ensemble (trained on all reference rows) lies above all K fold values about
    once in K+1 replicates, and then every evaluation non-member is a false positive (the narrow band
    of evaluation scores above every reference non-member seen in a real run); the mean of the fold
    ensembles never does."""
    fpr = np.mean([_rag_mia_replicate(r, folds=3) for r in range(40)])
    assert fpr < BOUND, f"mean realised FPR {fpr:.3f} of a 0% threshold; exchangeable: {EXCHANGEABLE_FPR:.3f}"


def test_rag_mia_gray_evaluation_scores_are_the_mean_of_the_fold_ensembles(monkeypatch):
    """Each fold's ensemble scores its held-out reference rows and every evaluation row; no ensemble
    is trained on all reference rows."""
    import ragmi.attacks.rag_mia as rm

    calls = []

    def fake(x_train, y_train, x_test, size, seed):
        calls.append((len(x_train), len(x_test), seed))
        return np.full(len(x_test), float(seed))  # each fold's "ensemble" predicts its seed

    monkeypatch.setattr(rm, "ensemble_scores", fake)
    ref, ev, _ = _ids()
    ids = list(ref) + ev
    attack = RagMIA({"ensemble_size": 3, "cv_folds": 4}, seed=7)
    out = attack._ensemble(ids, np.zeros((len(ids), 3)), ref, 2)
    seeds = [c[2] for c in calls]
    assert [(c[0], c[1]) for c in calls] == [(30, 10 + 2 * N)] * 4
    assert np.allclose(out[len(ref) :], np.mean(seeds))
    assert set(out[: len(ref)]) == set(map(float, seeds))


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
    monkeypatch.setattr(att, "features", lambda df: feats)
    q = pd.DataFrame({"query_id": ids, "doc_id": ids})
    r = pd.DataFrame({"query_id": ids, "response_text": "x"})
    out = att.score(q, r, ref)
    m = out[out["variant"] == "s2mia/M"].set_index("doc_id")["score"]
    return _fpr_at_zero(m, ref, ev_non)


def test_s2mia_m_zero_fpr_threshold_transfers_on_a_blind_target(monkeypatch):
    fpr = np.mean([_s2mia_replicate(r, monkeypatch) for r in range(200)])
    assert fpr < BOUND, f"mean realised FPR {fpr:.3f} of a 0% threshold; exchangeable: {EXCHANGEABLE_FPR:.3f}"


def test_s2mia_m_evaluation_scores_are_the_mean_of_the_fold_classifiers(monkeypatch):
    """Each fold's classifier scores its held-out reference rows and every evaluation row; none is
    trained on all reference rows."""
    fitted = []

    class Const:
        def __init__(self):
            self.p = 0.1 * (len(fitted) + 1)  # the k-th classifier made predicts 0.1 k
            fitted.append(self)

        def fit(self, x, y):
            self.n = len(x)
            return self

        def predict_proba(self, x):
            return np.column_stack([np.full(len(x), 1 - self.p), np.full(len(x), self.p)])

    ref, ev, _ = _ids()
    ids = list(ref) + ev
    feats = pd.DataFrame({"doc_id": ids, "bleu": 0.5, "ppl": 10.0, "no_answer": False})
    att = S2MIA({"cv_folds": 4})
    monkeypatch.setattr(att, "features", lambda df: feats)
    monkeypatch.setattr(att, "_make_classifier", lambda seed: Const())
    out = att.score(
        pd.DataFrame({"query_id": ids, "doc_id": ids}), pd.DataFrame({"query_id": ids, "response_text": "x"}), ref
    )
    m = out[out["variant"] == "s2mia/M"].set_index("doc_id")["score"]
    assert [c.n for c in fitted] == [30] * 4
    assert np.allclose(m[ev], 0.25)  # the mean of 0.1, 0.2, 0.3, 0.4
    assert sorted(set(np.round(m[list(ref)], 9))) == [0.1, 0.2, 0.3, 0.4]
