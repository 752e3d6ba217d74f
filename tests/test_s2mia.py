"""S²MIA: split rule, exact prompt, BLEU ordering, perplexity by hand, the T-variant threshold search
on hand-made reference sets, and cross-fitted scores of the M variant (tests/test_crossfit.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragmi.attacks.s2mia import (
    S2MIA,
    bleu,
    default_max_tokens,
    extract_response,
    min_margin,
    perplexity,
    split_halves,
    threshold_search,
)
from ragmi.errors import ConfigError

DOC = "The patient has a mild fever. She has a dry cough at night."  # halves of 29 characters


# ---------------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,halves",
    [
        ("aaaa bb cccccc", ("aaaa bb", "cccccc")),  # midpoint 7 lies in the run (7, 8)
        ("ab cdefgh ij", ("ab", "cdefgh ij")),  # runs at distance 3 and 3: the earlier wins
        ("one two\n\nthree four", ("one two", "three four")),  # run (7, 9) is 0.5 from 9.5
        ("  abcdef  ", ("abc", "def")),  # no whitespace inside: cut at len // 2 of the stripped text
        ("x", ("", "x")),
    ],
)
def test_split_rule(text, halves):
    assert split_halves(text) == halves


def test_prompt_exact_and_budget():
    text = DOC
    q = S2MIA({}).build_queries(pd.DataFrame({"doc_id": ["d1"], "text": [text], "title": ["t"]}))
    row = q.iloc[0]
    assert row["first_half"] == "The patient has a mild fever."
    assert row["second_half"] == "She has a dry cough at night."
    assert row["user_prompt"] == (
        'Given the [Query]: "The patient has a mild fever.".\n'
        "Do not include any introductory or explanatory text, use the following format for output: "
        "{[Response]: 'Provide a concise response directly addressing the [Query] by using the most relevant "
        "and matching text in the prompt.'}"
    )
    assert row["query_id"] == "d1::s2" and row["top_logprobs"] == 0
    assert row["max_tokens"] == math.ceil(1.3 * 7) + 32 == 42
    assert default_max_tokens(" ".join(["w"] * 100), cap=128) == 128  # 162 capped
    assert default_max_tokens(" ".join(["w"] * 100), cap=500) == 162
    assert S2MIA({"max_tokens": 7}).build_queries(q[["doc_id"]].assign(text=text)).loc[0, "max_tokens"] == 7


def test_bad_params_are_config_errors():
    with pytest.raises(ConfigError, match="config key attacks.s2mia.bleu_reference"):
        S2MIA({"bleu_reference": "whole"})
    with pytest.raises(ConfigError, match="config key attacks.s2mia.classifier"):
        S2MIA({"classifier": "svm"})


def test_defaults_come_from_the_schema():
    p = S2MIA({}).params
    assert (p["max_tokens"], p["max_tokens_cap"], p["top_logprobs"]) == (None, 128, 0)
    assert (p["bleu_reference"], p["classifier"], p["cv_folds"]) == ("second_half", "auto", 5)
    assert (p["n_estimators"], p["max_depth"], p["learning_rate"]) == (100, 3, 0.1)
    long_doc = " ".join(["w"] * 200)  # second half of 100 words: ceil(130) + 32 = 162, capped at 128
    q = S2MIA({}).build_queries(pd.DataFrame({"doc_id": ["d"], "text": [long_doc], "title": [""]}))
    assert q.loc[0, "max_tokens"] == 128


# ---------------------------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------------------------
def test_bleu_orders_identical_partial_unrelated():
    ref = "She also reports a dry cough at night and a sore throat in the morning."
    same = bleu(ref, ref)
    partial = bleu("She also reports a dry cough at night.", ref)
    unrelated = bleu("Quarterly revenue grew by four percent in Europe.", ref)
    assert same == pytest.approx(1.0)
    assert 0.05 < partial < 0.9
    assert unrelated < 0.05 and unrelated < partial
    assert bleu("", ref) == 0.0


def test_bleu_smoothing_by_hand():
    # 13a tokens: hyp "the cat ran" (3), ref 6 tokens; precisions 2/3, 1/2, and 0/1 trigrams smoothed by
    # sacrebleu's "exp" method to 1/(2*1); no 4-gram in the hypothesis (effective order 3); BP = exp(1 - 6/3)
    expected = math.exp(1 - 6 / 3) * (2 / 3 * 1 / 2 * 1 / 2) ** (1 / 3)
    assert bleu("the cat ran", "the cat sat on the mat") == pytest.approx(expected, rel=1e-9)


def test_extract_response_strips_the_format_wrapper():
    assert extract_response("{[Response]: 'a dry cough at night'}") == "a dry cough at night"
    assert extract_response("[Response]: a dry cough") == "a dry cough"
    assert extract_response("  plain answer ") == "plain answer"


def test_perplexity_by_hand():
    assert perplexity([-0.5, -1.0, -1.5]) == pytest.approx(math.e)
    assert perplexity([0.0, 0.0]) == pytest.approx(1.0)
    assert perplexity([-2.0]) == pytest.approx(math.exp(2.0))
    assert math.isnan(perplexity([]))


def make_frames(docs, responses, logprobs, att=None):
    att = att or S2MIA({})
    q = att.build_queries(
        pd.DataFrame({"doc_id": [d for d, _ in docs], "text": [t for _, t in docs], "title": [""] * len(docs)})
    )
    r = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": responses,
            "first_token_logprobs": [[]] * len(docs),
            "token_logprobs": logprobs,
            "prompt_tokens": 0,
            "completion_tokens": [len(x) for x in logprobs],
        }
    )
    return att, q, r


def test_score_columns_bleu_reference_and_perplexity():
    docs = [(f"d{i}", DOC) for i in range(4)]
    responses = ["She has a dry cough at night.", "I do not know.", "", "{[Response]: 'She has a dry cough at night.'}"]
    lps = [[-0.5, -1.0, -1.5], [-2.0, -2.0], [], [-0.1]]
    att, q, r = make_frames(docs, responses, lps, S2MIA({"cv_folds": 2}))
    s = att.score(q, r, {"d0": 1, "d1": 0, "d2": 0, "d3": 1})
    assert set(s["variant"]) == {"s2mia/s", "s2mia/T", "s2mia/M"}
    sv = s[s["variant"] == "s2mia/s"].set_index("doc_id")
    assert sv.loc["d0", "score"] == pytest.approx(1.0) and sv.loc["d3", "score"] == pytest.approx(1.0)
    assert sv.loc["d1", "score"] < 0.1 and sv.loc["d2", "score"] == 0.0
    assert sv.loc["d0", "ppl"] == pytest.approx(math.e) and sv.loc["d1", "ppl"] == pytest.approx(math.exp(2))
    # the empty response has no perplexity: it gets the largest one and is flagged
    assert sv.loc["d2", "ppl"] == pytest.approx(math.exp(2)) and sv["no_answer"].tolist() == [False, False, True, False]
    # Naseh's variant: BLEU against the full text, so a perfect second half is penalised for brevity
    att2, q2, r2 = make_frames(docs, responses, lps, S2MIA({"bleu_reference": "full_text", "cv_folds": 2}))
    s2 = att2.score(q2, r2, {"d0": 1, "d1": 0, "d2": 0, "d3": 1})
    full = s2[s2["variant"] == "s2mia/s"].set_index("doc_id").loc["d0", "score"]
    assert 0.1 < full < 0.9


def test_empty_answers_are_imputed_from_reference_rows_only():
    """An empty answer's perplexity is the largest of the answered REFERENCE rows: an evaluation row's
    (or a control's) perplexity never moves another row's imputed value."""
    docs = [(f"d{i}", DOC) for i in range(5)]
    responses = ["She has a dry cough.", "I do not know.", "", "Some answer.", ""]
    ref = {"d0": 1, "d1": 0, "d2": 0}  # d3, d4: evaluation rows; d2 (reference) and d4 (evaluation) empty

    def ppl(eval_lp):
        att, q, r = make_frames(docs, responses, [[-0.5], [-2.0], [], eval_lp, []], S2MIA({"cv_folds": 2}))
        return att.features(q.merge(r, on="query_id"), ref).set_index("doc_id")["ppl"]

    low, high = ppl([-0.1]), ppl([-9.0])  # the evaluation row d3: perplexity e^0.1, then e^9
    assert high["d3"] == pytest.approx(math.exp(9.0)) and low["d3"] == pytest.approx(math.exp(0.1))
    for d in ("d2", "d4"):  # the reference maximum, e^2 (d1), whatever d3 answers
        assert low[d] == pytest.approx(math.exp(2.0)) and high[d] == pytest.approx(math.exp(2.0))
    # every reference answer empty: nothing to impute from, even though an evaluation row has one
    att, q, r = make_frames(docs[:3], ["", "", "x y"], [[], [], [-1.0]], S2MIA({"cv_folds": 2}))
    with pytest.raises(ValueError, match="every reference response is empty"):
        att.features(q.merge(r, on="query_id"), {"d0": 1, "d1": 0})


def test_missing_token_logprobs_is_an_error():
    att, q, r = make_frames([("d0", DOC), ("d1", DOC)], ["a dry cough", "no idea"], [[-1.0], []])
    with pytest.raises(ValueError, match="token_logprobs"):
        att.score(q, r, {"d0": 1, "d1": 0})


# ---------------------------------------------------------------------------------------------
# S2MIA-T
# ---------------------------------------------------------------------------------------------
def test_threshold_search_smallest_theta_sem_among_optima():
    #            members: A          B          C        non-members: D        E          F
    s = np.array([0.8, 0.6, 0.7, 0.2, 0.5, 0.65])
    p = np.array([5.0, 8.0, 30.0, 6.0, 40.0, 50.0])
    y = np.array([1, 1, 1, 0, 0, 0])
    # theta_sem 0.2 keeps D (PPL 6) -> at best 5/6; theta_sem 0.5 drops D and theta_ppl 30 keeps A, B, C
    # and rejects E (40), F (50): 6/6.  (0.6, 30) and (0.6, 40) are also perfect but theta_sem is larger.
    assert threshold_search(s, p, y) == (0.5, 30.0, 1.0)


def test_threshold_search_largest_theta_ppl_among_ties():
    #              M1    M2    N1    N2    N3
    s = np.array([0.8, 0.7, 0.1, 0.75, 0.6])
    p = np.array([5.0, 30.0, 35.0, 50.0, 10.0])
    y = np.array([1, 1, 0, 0, 0])
    # theta_sem < 0.7 keeps N3 (PPL 10) or loses a member: at best 4/5.  theta_sem = 0.7 leaves M1, M2, N2:
    # any theta_ppl in [30, 50) is perfect; the candidates there are 30 and 35 (N1's PPL): the larger wins.
    assert threshold_search(s, p, y) == (0.7, 35.0, 1.0)


def _t_frames(monkeypatch, ref_y, ev_s=(0.9, 0.9, 0.4, 0.5), ev_p=(30.0, 31.0, 1.0, 29.0)):
    ref_s = [0.8, 0.6, 0.7, 0.2, 0.5, 0.65, 0.75, 0.3]
    ref_p = [5.0, 8.0, 30.0, 6.0, 40.0, 50.0, 12.0, 45.0]
    ids = [f"r{i}" for i in range(8)] + [f"e{i}" for i in range(len(ev_s))]
    s, p = np.array(ref_s + list(ev_s)), np.array(ref_p + list(ev_p))
    feats = pd.DataFrame({"doc_id": ids, "bleu": s, "ppl": p, "no_answer": False})
    att = S2MIA({"cv_folds": 2}, seed=3)
    monkeypatch.setattr(att, "features", lambda df, ref=(): feats)
    q = pd.DataFrame({"query_id": ids, "doc_id": ids})
    r = pd.DataFrame({"query_id": ids, "response_text": "x"})
    out = att.score(q, r, dict(zip(ids[:8], ref_y)))
    return out[out["variant"] == "s2mia/T"].set_index("doc_id"), ids, s, p


def test_T_variant_thresholds_are_chosen_in_fold(monkeypatch):
    """A row of fold k is decided by the pair searched on the reference rows of the other folds."""
    ref_y = [1, 1, 1, 0, 0, 0, 1, 0]
    t, ids, s, p = _t_frames(monkeypatch, ref_y)
    assert (t["selection"] == "in-fold").all() and set(t["fold"]) == {0, 1}
    y = np.array(ref_y)
    for k in (0, 1):
        train = np.array([t.loc[d, "fold"] != k for d in ids[:8]])
        ts, tp, _ = threshold_search(s[:8][train], p[:8][train], y[train])
        rows = t.index[t["fold"] == k]
        assert (t.loc[rows, "theta_sem"] == ts).all() and (t.loc[rows, "theta_ppl"] == tp).all()
        expect = ((s >= ts) & (p <= tp)).astype(int)[[ids.index(d) for d in rows]]
        assert t.loc[rows, "decision"].astype(int).tolist() == expect.tolist()
    # the continuous score is >= 0 exactly for decided members
    assert ((t["score"] >= 0).astype(int) == t["decision"].astype(int)).all()


def test_T_reference_decision_does_not_depend_on_its_own_label(monkeypatch, label_blind_folds):
    """The in-fold property: flip one reference label; that row's own decision, score and pair stay."""
    ref_y = [1, 1, 1, 0, 0, 0, 1, 0]
    base, ids, _, _ = _t_frames(monkeypatch, ref_y)
    moved = False
    for i in range(8):
        flipped, _, _, _ = _t_frames(monkeypatch, [1 - v if j == i else v for j, v in enumerate(ref_y)])
        d = ids[i]
        cols = ["score", "decision", "theta_sem", "theta_ppl", "fold"]
        assert flipped.loc[d, cols].tolist() == base.loc[d, cols].tolist(), d
        moved |= not flipped[cols].equals(base[cols])
    assert moved  # the flips do move other rows' choices: the labels are used, only not by their own row


def test_T_evaluation_rows_fit_nothing(monkeypatch):
    ref_y = [1, 1, 1, 0, 0, 0, 1, 0]
    a, ids, _, _ = _t_frames(monkeypatch, ref_y)
    b, _, _, _ = _t_frames(monkeypatch, ref_y, ev_s=(0.0, 1.0, 0.99, 0.01), ev_p=(1.0, 99.0, 2.0, 500.0))
    pd.testing.assert_frame_equal(a.loc[ids[:8]], b.loc[ids[:8]])
    assert (a[["theta_sem", "theta_ppl"]] == b[["theta_sem", "theta_ppl"]]).all().all()


def test_min_margin_hand_computed():
    ref_s, ref_p = [0.0, 1.0, 2.0, 3.0, 4.0], [math.e**k for k in range(5)]  # IQRs: 2 and 2 (in log)
    m = min_margin([3.0, 1.0], [math.e, math.e**3], 2.0, math.e**2, ref_s, ref_p)
    assert m.tolist() == pytest.approx([min(0.5, 0.5), min(-0.5, -0.5)])


# ---------------------------------------------------------------------------------------------
# S2MIA-M
# ---------------------------------------------------------------------------------------------
class Lookup:
    """A pure memoriser: the training label of an exactly seen feature vector, else 0.5."""

    def fit(self, x, y):
        self.table = {tuple(row): float(v) for row, v in zip(np.asarray(x), np.asarray(y))}
        return self

    def predict_proba(self, x):
        p = np.array([self.table.get(tuple(row), 0.5) for row in np.asarray(x)])
        return np.column_stack([1 - p, p])


def test_M_reference_scores_are_out_of_fold(monkeypatch):
    rng = np.random.default_rng(0)
    n_ref = 20
    ref_s = rng.permutation(n_ref) / n_ref  # distinct feature vectors, labels unrelated to them
    ref_y = np.array([1, 0] * (n_ref // 2))
    ids = [f"r{i}" for i in range(n_ref)] + ["e0", "e1"]
    s = np.append(ref_s, [ref_s[0], ref_s[1]])  # eval docs sitting exactly on r0 (member) and r1 (non-member)
    feats = pd.DataFrame({"doc_id": ids, "bleu": s, "ppl": 10.0, "no_answer": False})
    att = S2MIA({"cv_folds": 5})
    monkeypatch.setattr(att, "features", lambda df, ref=(): feats)
    monkeypatch.setattr(att, "_make_classifier", lambda seed: Lookup())
    q = pd.DataFrame({"query_id": ids, "doc_id": ids})
    r = pd.DataFrame({"query_id": ids, "response_text": "x"})
    out = att.score(q, r, dict(zip(ids[:n_ref], ref_y.tolist())))
    m = out[out["variant"] == "s2mia/M"].set_index("doc_id")["score"]
    # in-sample, the memoriser would return every reference label (AUC 1); out of fold it cannot
    assert (m[ids[:n_ref]] == 0.5).all()
    # cross-fitted: each eval document gets one fold's model; it has seen r0 (r1) unless r0 (r1) is in
    # that same fold
    fold = out[out["variant"] == "s2mia/M"].set_index("doc_id")["fold"]
    assert m["e0"] == (0.5 if fold["e0"] == fold["r0"] else 1.0)
    assert m["e1"] == (0.5 if fold["e1"] == fold["r1"] else 0.0)
    # the classifier's own decision rule (its predicted class, p > 0.5) is the variant's decision:
    # the memoriser's 0.5 predicts non-member, as predict() does on a tie
    dec = out[out["variant"] == "s2mia/M"].set_index("doc_id")["decision"]
    assert dec.astype(int).to_dict() == {**{i: 0 for i in ids[:n_ref]}, "e0": int(m["e0"] > 0.5), "e1": 0}


@pytest.mark.parametrize("classifier", ["xgboost", "gbdt"])
def test_M_learns_a_separable_signal(monkeypatch, classifier):
    rng = np.random.default_rng(1)
    n = 40
    y = np.array([1] * n + [0] * n)
    s = np.where(y == 1, rng.uniform(0.5, 1.0, 2 * n), rng.uniform(0.0, 0.4, 2 * n))
    p = np.where(y == 1, rng.uniform(1.0, 5.0, 2 * n), rng.uniform(6.0, 30.0, 2 * n))
    ev_y = np.array([1] * 10 + [0] * 10)
    # evaluation documents away from the reference gap, where any separating split is right
    ev_s = np.where(ev_y == 1, rng.uniform(0.6, 1.0, 20), rng.uniform(0.0, 0.3, 20))
    ev_p = np.where(ev_y == 1, rng.uniform(1.0, 4.0, 20), rng.uniform(8.0, 30.0, 20))
    ids = [f"r{i}" for i in range(2 * n)] + [f"e{i}" for i in range(20)]
    feats = pd.DataFrame({"doc_id": ids, "bleu": np.append(s, ev_s), "ppl": np.append(p, ev_p), "no_answer": False})
    att = S2MIA({"classifier": classifier, "n_estimators": 20})
    monkeypatch.setattr(att, "features", lambda df, ref=(): feats)
    q = pd.DataFrame({"query_id": ids, "doc_id": ids})
    r = pd.DataFrame({"query_id": ids, "response_text": "x"})
    out = att.score(q, r, dict(zip(ids[: 2 * n], y.tolist())))
    m = out[out["variant"] == "s2mia/M"].set_index("doc_id")["score"]
    assert roc_auc_score(ev_y, m[ids[2 * n :]]) == 1.0
    assert roc_auc_score(y, m[ids[: 2 * n]]) > 0.95
    assert ((m >= 0) & (m <= 1)).all()
