"""DCMI (Gao et al.): perturbers, queries, and hand-computed scores of Eq. 8-13."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragmi.attacks import wordnet
from ragmi.attacks.base import check_queries, check_scores
from ragmi.attacks.dcmi import DCMI, QUERY_TEMPLATE, best_threshold
from ragmi.attacks.perturb import (
    PERTURB_PROMPT,
    LLMPerturber,
    WordNetPerturber,
    clean_llm_output,
    plausibility_failure,
    replace_count,
)
from ragmi.attacks.wordnet import find_wordnet_dir, load_wordnet
from ragmi.errors import ConfigError
from ragmi.metrics import evaluate

SENT = "The quick test was easy and the result was good"

LONG = (
    "The new method was fast and cheap, but the old one was slow and expensive. A happy patient "
    "felt good after a short stay, while an unhappy one had a long and difficult night. The results "
    "were clear: early treatment is safe and effective, late treatment is dangerous. Doctors worked "
    "quietly and carefully in a warm and bright room; the air outside was cold and wet. The large "
    "trial was simple to run and the small one was hard, yet both were honest and fair."
)


@pytest.fixture(scope="module")
def wn():
    return WordNetPerturber(seed=7)


# ------------------------------------------------------------------------------- WordNet perturber


def test_wordnet_reads_the_installed_database():
    wnet = load_wordnet()
    assert find_wordnet_dir() == wnet.root
    assert wnet.lookup("good").antonym == "bad"
    assert wnet.lookup("Easy").antonym == "difficult"
    assert wnet.lookup("slowly").antonym == "quickly"
    assert wnet.lookup("quick") is None  # no direct antonym in WordNet
    assert wnet.lookup("test") is None  # noun/verb only
    assert wnet.lookup("the") is None and wnet.lookup("all") is None  # function words
    assert wnet.lookup("good").tier == 1
    assert wnet.lookup("clear").tier == 2  # mostly a verb in SemCor
    assert len(wnet) > 3000


def test_wordnet_missing_database_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(wordnet, "WORDNET_DIRS", ())
    monkeypatch.delenv("RAGMI_WORDNET_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="apt-get install wordnet-base"):
        find_wordnet_dir(str(tmp_path))


def test_replace_count_is_paper_formula():
    assert replace_count(SENT, 0.06) == 1  # int(0.6) or 1
    assert replace_count(SENT, 0.2) == 2
    assert replace_count(" ".join(["w"] * 100), 0.07) == 7  # not 6 from 7.000000000000001 flooring
    assert replace_count(" ".join(["w"] * 100), 0.12) == 12
    assert replace_count(" ".join(["w"] * 49), 0.06) == 2  # int(2.94)


def test_wordnet_swaps_known_antonyms(wn):
    p = wn.perturb(SENT, 0.2, "d1")
    assert p.text == "The quick test was difficult and the result was bad"
    assert (p.n_swapped, p.n_requested, p.method) == (2, 2, "wordnet")
    assert p.swaps == [("easy", "difficult"), ("good", "bad")]
    # too few candidates: all there are are swapped, and the shortfall is recorded
    p3 = wn.perturb(SENT, 0.3, "d1")
    assert p3.text == p.text and (p3.n_swapped, p3.n_requested) == (2, 3)


def test_wordnet_exact_output_for_a_fixed_seed():
    # one swap out of two candidates: the seed and the doc id decide which
    outs = {d: WordNetPerturber(seed=0).perturb(SENT, 0.1, d).text for d in ["d1", "d2", "d3", "d4"]}
    assert outs == {
        "d1": "The quick test was difficult and the result was good",
        "d2": "The quick test was easy and the result was bad",
        "d3": "The quick test was easy and the result was bad",
        "d4": "The quick test was easy and the result was bad",
    }


def test_wordnet_is_deterministic_and_nested(wn):
    a = wn.perturb(LONG, 0.06, "doc-a")
    assert a.text == WordNetPerturber(seed=7).perturb(LONG, 0.06, "doc-a").text
    assert a.text != wn.perturb(LONG, 0.06, "doc-b").text or a.text != wn.perturb(LONG, 0.06, "doc-c").text
    assert a.text != WordNetPerturber(seed=8).perturb(LONG, 0.06, "doc-a").text
    # swaps at a smaller θ are a subset of those at a larger θ
    small = set(wn.perturb(LONG, 0.04, "doc-a").swaps)
    large = set(wn.perturb(LONG, 0.12, "doc-a").swaps)
    assert small and small < large


@pytest.mark.parametrize("theta", [0.04, 0.06, 0.08, 0.10, 0.12])
def test_wordnet_respects_theta(wn, theta):
    n_words = len(LONG.split())
    p = wn.perturb(LONG, theta, "doc-a")
    assert p.n_requested == max(1, int(theta * n_words + 1e-9))
    assert p.n_swapped == p.n_requested
    before, after = LONG.split(), p.text.split()
    assert len(after) == len(before)  # one-word antonyms here
    changed = [(x, y) for x, y in zip(before, after) if x != y]
    articles = [(x, y) for x, y in changed if x.lower() in ("a", "an")]  # "A happy" -> "An unhappy"
    assert len(changed) - len(articles) == p.n_requested
    assert all(x.lower() != y.lower() for x, y in articles)


def test_wordnet_keeps_case_punctuation_and_articles():
    p = WordNetPerturber(seed=0).perturb("An easy, GOOD test. (Happy) days: a bad idea!", 1.0, "x")
    assert p.text == "A difficult, BAD test. (Unhappy) days: a good idea!"
    assert p.n_swapped == 4


# ----------------------------------------------------------------------------------- LLM perturber


class FakeTools:
    """Attacker tools whose chat() returns canned answers, recording every call."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []
        self.logs = []

    def chat(self, prompts, max_tokens, temperature=0.0):
        self.calls.append((prompts, max_tokens, temperature))
        assert len(prompts) == len(self.answers)
        return [
            {"text": a, "prompt_tokens": 10 + i, "completion_tokens": 5, "model": "fake-llm"}
            for i, a in enumerate(self.answers)
        ]

    def local_model_path(self, name):
        raise NotImplementedError

    def log(self, msg):
        self.logs.append(msg)


def test_llm_prompt_is_the_papers():
    msg = LLMPerturber.prompt(SENT, 0.2)
    assert msg == [
        {
            "role": "user",
            "content": (
                "Replace 2 key adjectives or adverbs in noticeable positions with their antonyms in the following "
                "text, ensuring the modified text remains logically correct:\n"
                "The quick test was easy and the result was good\nReturn only the modified text."
            ),
        }
    ]
    assert PERTURB_PROMPT.count("{") == 2


def test_llm_output_cleaning_and_plausibility():
    good = "The quick test was hard and the result was bad"
    assert clean_llm_output(f'Here is the modified text:\n"{good}"') == good
    assert clean_llm_output(f"Sure! Here's the modified text:\n\n```\n{good}\n```") == good
    assert clean_llm_output(f"{good}\n\nNote: I replaced easy with hard.") == good
    assert clean_llm_output(f"\u201c{good}\u201d") == good
    assert plausibility_failure(SENT, good) is None
    assert plausibility_failure(SENT, "") == "empty"
    assert plausibility_failure(SENT, SENT + "  ") == "identical"
    assert plausibility_failure(SENT, "I cannot help with that request.") == "low-overlap"
    assert plausibility_failure(SENT, good + " " + " ".join(["and"] * 20)) == "too-long"


def test_llm_perturber_good_preamble_and_garbage():
    good = "The slow test was easy and the result was bad"
    tools = FakeTools([good, f'Here is the modified text: "{good}"', "Sorry, I can't do that.", ""])
    wnp = WordNetPerturber(seed=0)
    llm = LLMPerturber(tools, max_tokens=256, temperature=0.0, fallback=wnp)
    items = [("a", SENT, 0.2), ("b", SENT, 0.2), ("c", SENT, 0.2), ("d", SENT, 0.2)]
    res = llm.perturb_many(items)
    assert len(tools.calls) == 1 and tools.calls[0][1:] == (256, 0.0)
    assert [r.method for r in res] == ["llm", "llm", "wordnet-fallback", "wordnet-fallback"]
    assert res[0].text == good and res[1].text == good
    assert res[0].n_swapped == 2 and res[0].n_requested == 2  # quick->slow, good->bad
    assert res[2].extra["llm_failure"] == "low-overlap" and res[3].extra["llm_failure"] == "empty"
    assert res[2].text == wnp.perturb(SENT, 0.2, "c").text
    assert res[0].extra["llm_prompt_tokens"] == 10 and res[0].extra["llm_model"] == "fake-llm"
    assert res[0].extra["prompt"] == LLMPerturber.prompt(SENT, 0.2)[0]["content"]
    # without a fallback, a failed rewrite is an error
    with pytest.raises(RuntimeError, match="low-overlap"):
        LLMPerturber(FakeTools(["no"]), 1024, 0.0, fallback=None).perturb_many([("c", SENT, 0.2)])


def test_prepare_with_llm_records_materials():
    atk = DCMI({"perturber": "llm", "thetas": [0.1, 0.2], "theta_adv2": 0.2, "llm_max_tokens": 300})
    candidates = pd.DataFrame({"doc_id": ["d1"], "text": [SENT], "title": [""]})
    tools = FakeTools(["The quick test was hard and the result was good", "garbage garbage"])
    mat = atk.prepare(candidates, tools)
    assert list(mat["theta"]) == [0.1, 0.2]
    assert list(mat["perturb_method"]) == ["llm", "wordnet-fallback"]
    assert list(mat["n_requested"]) == [1, 2]
    assert mat.loc[1, "perturbed_text"] == "The quick test was difficult and the result was bad"
    for c in ["prompt", "llm_model", "llm_max_tokens", "llm_temperature", "llm_prompt_tokens", "llm_completion_tokens"]:
        assert mat[c].notna().all(), c
    assert list(mat["llm_max_tokens"]) == [300, 300]
    assert tools.logs and "1 of 2" in tools.logs[0]


# ------------------------------------------------------------------------------------ build_queries


def test_prepare_and_build_queries_exact_strings():
    atk = DCMI({"thetas": [0.1, 0.2], "theta_adv2": 0.1, "max_chars": 30, "max_tokens": 3}, seed=0)
    candidates = pd.DataFrame({"doc_id": ["d1", "d2"], "text": [SENT, "It was good."], "title": ["", ""]})
    mat = atk.prepare(candidates, tools=None)
    assert list(mat.columns[:6]) == ["doc_id", "theta", "perturbed_text", "perturb_method", "n_swapped", "n_requested"]
    assert len(mat) == 4 and set(mat["perturb_method"]) == {"wordnet"}
    q = check_queries(atk.build_queries(candidates, mat))
    assert list(q["query_id"]) == ["d1::orig", "d1::p0.1", "d1::p0.2", "d2::orig", "d2::p0.1", "d2::p0.2"]
    assert list(q["kind"]) == ["orig", "pert", "pert"] * 2
    # the sample is the first max_chars=30 characters: "The quick test was easy and th"
    assert q.loc[0, "user_prompt"] == 'Is this: "The quick test was easy and th" right? Answer with Yes or No.'
    assert q.loc[1, "user_prompt"] == 'Is this: "The quick test was difficult and th" right? Answer with Yes or No.'
    assert q.loc[4, "user_prompt"] == 'Is this: "It was bad." right? Answer with Yes or No.'
    assert math.isnan(q.loc[0, "theta"]) and q.loc[2, "theta"] == 0.2
    assert (q["max_tokens"] == 3).all() and (q["top_logprobs"] == 20).all()
    with pytest.raises(ValueError, match="materials"):
        atk.build_queries(candidates, None)
    with pytest.raises(ValueError, match="lack a perturbed sample"):
        atk.build_queries(candidates, mat[mat["theta"] != 0.2])


# ------------------------------------------------------------------------------------------ score

THETAS = [0.04, 0.08]
T2 = 0.06
GAMMAS = [0.1, 0.3, 0.5]
REF = {"r1": 1, "r2": 1, "r3": 1, "r4": 0, "r5": 0, "r6": 0}
P_ORIG = {"r1": 0.9, "r2": 0.8, "r3": 0.7, "r4": 0.6, "r5": 0.5, "r6": 0.4, "e1": 0.95, "e2": 0.3}
# calibrated scores C_θ = P(Yes|q) - P(Yes|q'_θ) (Eq. 8), chosen away from every threshold
CAL = {
    0.04: {"r1": 0.25, "r2": 0.15, "r3": 0.05, "r4": 0.05, "r5": 0.02, "r6": 0.0, "e1": 0.2, "e2": 0.0},
    0.06: {"r1": 0.4, "r2": 0.35, "r3": 0.12, "r4": 0.2, "r5": 0.05, "r6": 0.08, "e1": 0.5, "e2": 0.1},
    0.08: {"r1": 0.75, "r2": 0.55, "r3": 0.45, "r4": 0.15, "r5": 0.25, "r6": 0.05, "e1": 0.6, "e2": 0.2},
}
# black-box answers (original, perturbed at θ=0.06)
TEXTS = {
    "r1": ("Yes.", "No, it is not."),  # reversal: 1 - 0 = 1
    "r2": ("Yes", "Yes, it is."),  # 0
    "r3": ("No.", "Yes"),  # -1
    "r4": ("I don't know.", "No"),  # 0, no answer to the original
    "r5": ("Yes, I know.", "Nothing suggests otherwise, yes."),  # word boundaries: 1 - 1 = 0
    "r6": ("YES", "no"),  # 1
    "e1": ("Yes", "No"),  # 1
    "e2": ("No", "No"),  # 0
}


def top(p_yes):
    return [{"token": "Yes", "logprob": math.log(p_yes)}, {"token": "No", "logprob": math.log(1 - p_yes)}]


def frames(p_orig=P_ORIG, cal=CAL, texts=TEXTS, logprobs=True):
    q, r = [], []
    for d in p_orig:
        q.append(
            {
                "query_id": f"{d}::orig",
                "doc_id": d,
                "user_prompt": "",
                "max_tokens": 4,
                "top_logprobs": 20,
                "kind": "orig",
                "theta": float("nan"),
            }
        )
        r.append(
            {
                "query_id": f"{d}::orig",
                "response_text": texts[d][0],
                "first_token_logprobs": top(p_orig[d]) if logprobs else None,
                "token_top_logprobs": [top(p_orig[d])] if logprobs else [],
            }
        )
        for th in sorted(cal):
            q.append(
                {
                    "query_id": f"{d}::p{th:g}",
                    "doc_id": d,
                    "user_prompt": "",
                    "max_tokens": 4,
                    "top_logprobs": 20,
                    "kind": "pert",
                    "theta": th,
                }
            )
            # the other θ answer "Yes": adv3 must read the θ=0.06 answer
            r.append(
                {
                    "query_id": f"{d}::p{th:g}",
                    "response_text": texts[d][1] if th == T2 else "Yes",
                    "first_token_logprobs": top(p_orig[d] - cal[th][d]) if logprobs else None,
                    "token_top_logprobs": [top(p_orig[d] - cal[th][d])] if logprobs else [],
                }
            )
    resp = pd.DataFrame(r).assign(token_logprobs=None, prompt_tokens=1, completion_tokens=1)
    return pd.DataFrame(q), resp


def attack(seed=0):
    # 3 folds of the 3 + 3 reference documents (ragmi.attacks.folds): each fold's choices are made on 4
    return DCMI({"thetas": THETAS, "theta_adv2": T2, "gammas": GAMMAS, "cv_folds": 3}, seed=seed)


def run(ref=REF, seed=0, **kw):
    q, r = frames(**kw)
    return check_scores(attack(seed).score(q, r, ref))


def adv1_choice(train: list[str], ref=REF) -> tuple[float, float]:
    """Adversary 1's (θ, γ) on the reference documents ``train``, by hand: the grid in order, the first
    of the best."""
    y = np.array([ref[d] for d in train])
    best = None
    for th in THETAS:
        for g in GAMMAS:
            n_ok = int(np.sum((np.array([CAL[th][d] for d in train]) > g).astype(int) == y))
            if best is None or n_ok > best[2]:
                best = (th, g, n_ok)
    return best[0], best[1]


def variant(s, name):
    return s[s["variant"] == name].set_index("doc_id")


def test_score_variants_and_nocal():
    s = run()
    names = set(s["variant"])
    assert names == {
        "dcmi/adv1",
        "dcmi/adv2",
        "dcmi/adv3",
        "dcmi/calibration=none",
        "dcmi/theta=0.04",
        "dcmi/theta=0.08",
        "dcmi/gamma=0.1",
        "dcmi/gamma=0.3",
        "dcmi/gamma=0.5",
    }
    assert (s.groupby("variant").size() == 8).all()
    nocal = variant(s, "dcmi/calibration=none")
    assert nocal["score"].to_dict() == pytest.approx(P_ORIG)
    assert nocal["decision"].isna().all()


def test_adversary1_grid_search_on_reference():
    # on the whole reference set: θ=0.04: best γ=0.1 (5/6 correct); θ=0.08: γ=0.1 -> 4, γ=0.3 -> 6,
    # γ=0.5 -> 5: (0.08, 0.3), the paper's one choice
    y = np.array([REF[d] for d in REF])
    assert best_threshold(np.array([CAL[0.08][d] for d in REF]), y, GAMMAS) == (0.3, 6)
    assert best_threshold(np.array([CAL[0.04][d] for d in REF]), y, GAMMAS) == (0.1, 5)
    assert adv1_choice(list(REF)) == (0.08, 0.3)
    # in-fold: the rows of fold k are decided by the choice made on the reference rows of the others
    s = run()
    a1 = variant(s, "dcmi/adv1")
    assert (a1["selection"] == "in-fold").all() and set(a1["fold"]) == {0, 1, 2}
    assert (a1.loc[list(REF), "fold"].value_counts() == 2).all()  # 6 reference rows dealt to 3 folds
    for k in range(3):
        th, g = adv1_choice([d for d in REF if a1.loc[d, "fold"] != k])
        rows = a1.index[a1["fold"] == k]
        assert (a1.loc[rows, "theta"] == th).all() and (a1.loc[rows, "threshold"] == g).all()
        assert a1.loc[rows, "score"].to_dict() == pytest.approx({d: CAL[th][d] for d in rows})
        assert a1.loc[rows, "decision"].astype(int).tolist() == [int(CAL[th][d] > g) for d in rows]
        for th_v in THETAS:
            v = variant(s, f"dcmi/theta={th_v:.2f}")
            train = [d for d in REF if v.loc[d, "fold"] != k]
            gv, _ = best_threshold(np.array([CAL[th_v][d] for d in train]), np.array([REF[d] for d in train]), GAMMAS)
            assert (v.loc[v.index[v["fold"] == k], "threshold"] == gv).all()
            assert v["score"].to_dict() == pytest.approx(CAL[th_v])


def test_reference_decisions_do_not_depend_on_their_own_labels(label_blind_folds):
    """The in-fold property: flip one reference label; that row's own choices and decisions stay, for
    every variant with a fitted part (adv1, adv2, theta=)."""
    rng = np.random.default_rng(5)  # 8 + 8 reference documents: a flip leaves at least 3 of each class
    ref = {f"m{i}": 1 for i in range(8)} | {f"n{i}": 0 for i in range(8)}
    ids = list(ref) + ["e1", "e2", "e3"]
    p_orig = dict(zip(ids, rng.uniform(0.5, 0.9, len(ids))))
    cal = {th: dict(zip(ids, np.round(rng.uniform(0.0, 0.45, len(ids)), 3))) for th in CAL}
    texts = {d: ("Yes", "No") for d in ids}
    base = run(ref=ref, p_orig=p_orig, cal=cal, texts=texts)
    fitted = ["dcmi/adv1", "dcmi/adv2"] + [f"dcmi/theta={th:.2f}" for th in THETAS]
    cols = ["score", "decision", "theta", "threshold", "fold"]
    moved = False
    for d in ref:
        flipped = run(ref={**ref, d: 1 - ref[d]}, p_orig=p_orig, cal=cal, texts=texts)
        for v in fitted:
            assert variant(flipped, v).loc[d, cols].tolist() == variant(base, v).loc[d, cols].tolist(), (d, v)
            moved |= not variant(flipped, v)["threshold"].equals(variant(base, v)["threshold"])
    assert moved  # the labels are used, by the other folds' rows
    # all labels flipped: the choices move
    inv = variant(run(ref={d: 1 - y for d, y in ref.items()}, p_orig=p_orig, cal=cal, texts=texts), "dcmi/adv1")
    assert not inv["threshold"].equals(variant(base, "dcmi/adv1")["threshold"])


def test_adversary2_q3_of_reference_nonmembers():
    a2 = variant(run(), "dcmi/adv2")
    assert (a2["theta"] == 0.06).all()
    assert a2["score"].to_dict() == pytest.approx(CAL[0.06])
    for k in range(3):
        # τ of fold k: Q3 of C at θ=0.06 of the other folds' reference non-members (r4 .2, r5 .05, r6 .08)
        non = sorted(CAL[0.06][d] for d in REF if REF[d] == 0 and a2.loc[d, "fold"] != k)
        tau = float(np.percentile(non, 75))
        if len(non) == 2:
            assert tau == pytest.approx(non[0] + 0.75 * (non[1] - non[0]))
        rows = a2.index[a2["fold"] == k]
        assert len(rows) and a2.loc[rows, "threshold"].tolist() == pytest.approx([tau] * len(rows))
        assert a2.loc[rows, "decision"].astype(int).tolist() == [int(CAL[0.06][d] > tau) for d in rows]
    # the reference members' scores play no part in τ
    cal = {th: {**c, "r1": 0.0, "r2": 0.01} for th, c in CAL.items()}
    same = variant(run(cal=cal), "dcmi/adv2")
    assert same["threshold"].equals(a2["threshold"])
    # the non-members' do
    cal = {th: {**c, "r4": 0.3, "r5": 0.31, "r6": 0.32} for th, c in CAL.items()}
    assert not variant(run(cal=cal), "dcmi/adv2")["threshold"].equals(a2["threshold"])


def test_adversary3_decision_reversal():
    a3 = variant(run(), "dcmi/adv3")
    assert a3["score"].astype(int).to_dict() == {
        "r1": 1,
        "r2": 0,
        "r3": -1,
        "r4": 0,
        "r5": 0,
        "r6": 1,
        "e1": 1,
        "e2": 0,
    }
    assert a3["decision"].astype(int).to_dict() == {
        "r1": 1,
        "r2": 0,
        "r3": 0,
        "r4": 0,
        "r5": 0,
        "r6": 1,
        "e1": 1,
        "e2": 0,
    }
    assert a3["no_answer"].to_dict() == {
        "r1": False,
        "r2": False,
        "r3": False,
        "r4": True,
        "r5": False,
        "r6": False,
        "e1": False,
        "e2": False,
    }
    # adv3 needs no reference labels at all, and no log-probabilities (black-box target)
    q, r = frames(logprobs=False)
    bb = attack().score(q, r, {})
    assert set(bb["variant"]) == {"dcmi/adv3"}
    assert variant(bb, "dcmi/adv3")["score"].astype(int).to_dict() == a3["score"].astype(int).to_dict()


def test_gamma_sweep_at_theta_adv2():
    s = run()
    for g, expect in [(0.1, {"r1", "r2", "r3", "r4", "e1"}), (0.3, {"r1", "r2", "e1"}), (0.5, set())]:
        v = variant(s, f"dcmi/gamma={g:.1f}")
        assert set(v.index[v["decision"].astype(int) == 1]) == expect, g
        assert v["score"].to_dict() == pytest.approx(CAL[0.06])
        assert (v["threshold"] == g).all() and (v["theta"] == 0.06).all()


def test_evaluation_documents_never_fit_anything():
    base = run()
    # rewrite the evaluation documents' answers completely: no fitted choice may move
    p2 = {**P_ORIG, "e1": 0.05, "e2": 0.99}
    cal2 = {th: {**c, "e1": 0.0, "e2": 0.98} for th, c in CAL.items()}
    other = run(p_orig=p2, cal=cal2)
    cols = ["variant", "theta", "threshold"]
    pd.testing.assert_frame_equal(
        base[cols].drop_duplicates().reset_index(drop=True), other[cols].drop_duplicates().reset_index(drop=True)
    )
    ref_rows = base["doc_id"].isin(REF)
    pd.testing.assert_frame_equal(base[ref_rows].reset_index(drop=True), other[ref_rows].reset_index(drop=True))
    assert not base[~ref_rows]["score"].equals(other[~ref_rows]["score"])
    # labels of documents outside the queries are ignored; evaluation labels are never an input
    same = run(ref={**REF, "not-queried": 1})
    pd.testing.assert_frame_equal(base, same)


def test_score_errors():
    q, r = frames()
    with pytest.raises(ValueError, match="at least 3 reference members and non-members"):
        attack().score(q, r, {"r4": 0, "r5": 0, "r6": 0})
    with pytest.raises(ValueError, match="at least 3 reference members and non-members"):
        attack().score(q, r, {"r1": 1, "r2": 1, "r3": 1, "r4": 0, "r5": 0})
    r_part = r.copy()
    r_part.at[3, "token_top_logprobs"] = []
    with pytest.raises(ValueError, match="log-probabilities in every response"):
        attack().score(q, r_part, REF)
    with pytest.raises(ValueError, match="responses missing"):
        attack().score(q, r.iloc[1:], REF)
    with pytest.raises(ValueError, match="θ=0.08"):
        attack().score(q[q["query_id"] != "e2::p0.08"], r, REF)


def test_end_to_end_through_parquet(tmp_path):
    """prepare -> build_queries -> fake target -> score, with the workflow's parquet round trips."""
    atk = DCMI({"cv_folds": 2}, seed=3)
    texts = [LONG, SENT, "A good and honest answer, given slowly.", "Nothing to swap here at all."]
    texts += ["A quick and careful reply.", "Plain words only."]
    ids = [f"doc{i}" for i in range(6)]
    candidates = pd.DataFrame({"doc_id": ids, "text": texts, "title": [""] * 6})
    atk.prepare(candidates, tools=None).to_parquet(tmp_path / "m.parquet")
    mat = pd.read_parquet(tmp_path / "m.parquet")
    assert sorted(set(mat["theta"])) == [0.04, 0.06, 0.08, 0.1, 0.12]
    assert (mat.loc[mat["doc_id"] == "doc3", "n_swapped"] == 0).all()
    check_queries(atk.build_queries(candidates, mat)).to_parquet(tmp_path / "q.parquet")
    q = pd.read_parquet(tmp_path / "q.parquet")
    assert len(q) == 6 * 6
    # a fake RAG system: confident "Yes" to the original sample of doc0/doc1, less to perturbed ones
    rows = []
    for qid, d, kind, prompt in zip(q["query_id"], q["doc_id"], q["kind"], q["user_prompt"]):
        member = d in ("doc0", "doc1", "doc4")
        p = 0.9 if (member and kind == "orig") else 0.4
        rows.append(
            {
                "query_id": qid,
                "response_text": "Yes" if p > 0.5 else "No",
                "first_token_logprobs": top(p),
                "token_top_logprobs": [top(p)],
                "token_logprobs": [math.log(p)],
                "prompt_tokens": len(prompt),
                "completion_tokens": 1,
            }
        )
    pd.DataFrame(rows).to_parquet(tmp_path / "r.parquet")
    r = pd.read_parquet(tmp_path / "r.parquet")
    ref = {"doc0": 1, "doc4": 1, "doc2": 0, "doc5": 0}
    s = check_scores(atk.score(q, r, ref))
    assert s.groupby("variant").size().eq(6).all()
    assert len(set(s["variant"])) == 4 + 5 + 10  # adv1-3, nocal; 5 θ; 10 γ
    a1 = variant(s, "dcmi/adv1")
    assert a1.loc["doc1", "score"] == pytest.approx(0.5) and a1.loc["doc3", "score"] == pytest.approx(0.0)
    labels = {"doc0": 1, "doc1": 1, "doc2": 0, "doc3": 0, "doc4": 1, "doc5": 0}
    assert a1["decision"].astype(int).to_dict() == labels
    # the scores frame goes through ragmi.metrics (eval = doc1, doc3)
    roles = {d: ("reference" if d in ref else "eval") for d in ids}
    m = evaluate(s.assign(label=s["doc_id"].map(labels), role=s["doc_id"].map(roles)), n_boot=5)
    assert m.set_index("variant").loc["dcmi/adv1", "auc"] == 1.0
    assert m.set_index("variant").loc["dcmi/adv3", "bb_tpr"] == 1.0


def test_params_are_validated():
    with pytest.raises(ConfigError, match="config key attacks.dcmi.perturber"):
        DCMI({"perturber": "gpt"})
    with pytest.raises(ConfigError, match="config key attacks.dcmi.thetas: .*two decimals"):
        DCMI({"thetas": [0.061, 0.062]})
    with pytest.raises(ConfigError, match="config key attacks.dcmi.gammas: .*one decimal"):
        DCMI({"gammas": [0.31, 0.32]})
    with pytest.raises(ConfigError, match="config key attacks.dcmi.theta_adv2"):
        DCMI({"theta_adv2": 0})
    with pytest.raises(ConfigError, match="config key attacks.dcmi.thetas.1"):
        DCMI({"thetas": [0.04, 1.0]})
    with pytest.raises(ConfigError, match="config key attacks.dcmi.gammas"):
        DCMI({"gammas": []})
    assert DCMI().all_thetas() == [0.04, 0.06, 0.08, 0.1, 0.12]
    # theta_adv2 outside thetas gets its own perturbed copy
    assert DCMI({"thetas": [0.1], "theta_adv2": 0.2}).all_thetas() == [0.1, 0.2]
    assert QUERY_TEMPLATE.format(sample="x") == 'Is this: "x" right? Answer with Yes or No.'


def test_thresholds_are_strict():
    # Eq. 9/11: member iff the calibrated probability *exceeds* the threshold; 0.75 - 0.25 is exactly 0.5
    cal = {th: {**c, "e1": 0.5} for th, c in CAL.items()}
    s = run(p_orig={**P_ORIG, "e1": 0.75}, cal=cal)
    assert variant(s, "dcmi/gamma=0.5").loc["e1", "score"] == 0.5
    assert variant(s, "dcmi/gamma=0.5").loc["e1", "decision"] == 0
    assert variant(s, "dcmi/gamma=0.3").loc["e1", "decision"] == 1


def test_black_box_and_gray_box_parts():
    atk = attack()
    docs = ["a", "b", "c"]
    na = {th: [False, False, True] for th in atk.all_thetas()}
    ans_p = {th: [0, 1, None] for th in atk.all_thetas()}
    ans_p[T2] = [0, 0, 1]  # only θ = theta_adv2 counts
    bb = atk.black_box_scores(docs, [1, 0, None], ans_p, na)
    assert set(bb["variant"]) == {"dcmi/adv3"}
    assert bb["score"].tolist() == [1.0, 0.0, -1.0] and bb["decision"].tolist() == [1, 0, 0]
    assert bb["no_answer"].tolist() == [False, False, True]
    # without log-probabilities there is no gray-box part
    none = {th: [None] * 3 for th in atk.all_thetas()}
    assert atk.gray_box_scores(docs, [None] * 3, none, {}, [False] * 3, na) is None
    tops = {th: [[top(0.5)]] * 3 for th in atk.all_thetas()}  # one generated position per answer
    with pytest.raises(ValueError, match="at least 3 reference members"):
        atk.gray_box_scores(docs, [[top(0.9)], [top(0.6)], [top(0.5)]], tops, {"a": 1, "c": 0}, [False] * 3, na)
    docs = ["a", "b", "c", "d", "e", "f", "g"]
    na = {th: [False] * 7 for th in atk.all_thetas()}
    tops = {th: [[top(0.5)]] * 7 for th in atk.all_thetas()}
    tops_o = [[top(p)] for p in (0.9, 0.6, 0.5, 0.8, 0.7, 0.55, 0.52)]
    ref = {"a": 1, "d": 1, "e": 1, "c": 0, "f": 0, "g": 0}
    gray = atk.gray_box_scores(docs, tops_o, tops, ref, [False] * 7, na)
    assert "dcmi/adv3" not in set(gray["variant"])
    assert variant(gray, "dcmi/calibration=none")["score"].tolist() == pytest.approx(
        [0.9, 0.6, 0.5, 0.8, 0.7, 0.55, 0.52]
    )
    assert variant(gray, "dcmi/adv2")["score"].tolist() == pytest.approx([0.4, 0.1, 0.0, 0.3, 0.2, 0.05, 0.02])


def test_p_yes_is_read_at_the_first_yes_no_position():
    """ "**Yes**": token 0 is markup; P(Yes | q) is read where the answer says Yes or No (token 1)."""

    def answer(p_yes):
        return [
            [{"token": "**", "logprob": math.log(0.9)}, {"token": "The", "logprob": math.log(0.1)}],
            top(p_yes),
        ]

    q, r = frames()
    r = r.assign(token_top_logprobs=None).astype({"token_top_logprobs": object})
    for i, qid in enumerate(r["query_id"]):
        d, th = qid.split("::")
        p = P_ORIG[d] if th == "orig" else P_ORIG[d] - CAL[float(th[1:])][d]
        r.at[i, "token_top_logprobs"] = answer(p)
        r.at[i, "first_token_logprobs"] = answer(p)[0]  # token 0 alone: the floor for Yes
    s = check_scores(attack().score(q, r, REF))
    nocal = variant(s, "dcmi/calibration=none")
    assert nocal["score"].to_dict() == pytest.approx(P_ORIG)
    assert (nocal["yes_no_position"] == 1).all() and not nocal["no_yes_no"].any()
    a1 = variant(s, "dcmi/adv1")
    assert a1["score"].to_dict() == pytest.approx({d: CAL[a1.loc[d, "theta"]][d] for d in P_ORIG})


def test_target_without_logprobs_keeps_adversary_3_and_lists_the_rest():
    """A remote target with logprobs: false (rules/common.smk target_returns_logprobs): adversary 3 is the
    same as with log-probabilities, every gray-box variant is listed as skipped, none computed."""
    full = run()
    q, r = frames(logprobs=False)
    a = DCMI({"thetas": THETAS, "theta_adv2": T2, "gammas": GAMMAS, "cv_folds": 3}, logprobs=False)
    s = check_scores(a.score(q, r, REF))
    assert set(s["variant"]) == {"dcmi/adv3"}
    ours = variant(s, "dcmi/adv3")
    pd.testing.assert_frame_equal(ours, variant(full, "dcmi/adv3")[ours.columns], check_dtype=False)
    assert set(a.skipped_variants) == set(full["variant"]) - {"dcmi/adv3"}


def test_the_query_quotes_title_and_text_as_dcmi_code_does():
    import pandas as pd

    from ragmi.attacks.dcmi import DCMI

    cands = pd.DataFrame(
        {"doc_id": ["a", "b"], "text": ["Body one.", "Body two."], "title": ["Deep Voice 2", None], "human_turn": ""}
    )
    assert DCMI.candidate_texts(cands) == ["Deep Voice 2 Body one.", "Body two."]
