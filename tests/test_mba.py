"""MBA: proxy ranking (one forward pass) against a naive per-prefix computation with the real
SmolLM2, mask selection rules, the exact query, tolerant answer parsing and the choice of gamma."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragmi.attacks.mba import (
    MBA,
    NLTK_ENGLISH_STOPWORDS,
    apply_masks,
    choose_masks,
    count_correct,
    gamma_decisions,
    mask_document,
    normalize_answer,
    parse_mask_answers,
    rank_words,
    select_gamma,
    start_token_id,
    token_ranks,
    word_spans,
)
from ragmi.attacks.models import load_proxy
from ragmi.errors import ConfigError

GAMMAS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]

TEXT = (
    "My baby has been pooing five times a day for a week. In the last few days it has increased to "
    "seven and they are very watery with green stringy bits in them. He does not seem unwell, has no "
    "temperature and is still eating. He now has a very bad nappy rash from the pooing. Thank you for "
    "consulting Chat Doctor. It seems your kid is having viral diarrhea; antibiotics might worsen it."
)


# "nappyzilla" is split by the SmolLM2 tokenizer into 4 tokens whose largest rank is not the first one's
SHORT = (
    "My baby has been pooing five times a day for a week. In the last few days it got worse, "
    "xylophonequark and nappyzilla rash."
)


@pytest.fixture(scope="module")
def proxy64(smollm2_dir):
    """float64, so that one pass and per-prefix passes agree to the last bit (no near-tie flips)."""
    return load_proxy(smollm2_dir, "float64", "cpu")


@pytest.fixture(scope="module")
def short_ranked(proxy64):
    tok, model = proxy64
    return rank_words(SHORT, tok, model)


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------
def naive_rank(model, ids, i):
    """Rank of ids[i] from a separate forward pass over the prefix ids[:i] (the public code's way)."""
    import torch

    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids[:i]])).logits[0, -1]
    return int((logits > logits[ids[i]]).sum())


def test_one_forward_pass_equals_per_prefix_ranks(proxy64):
    tok, model = proxy64
    ids = [start_token_id(tok)] + tok(SHORT, add_special_tokens=False)["input_ids"]
    ranks = token_ranks(model, ids)
    assert ranks.shape == (len(ids),) and ranks[0] == -1
    positions = [1, len(ids) // 2, len(ids) - 1]
    naive = [naive_rank(model, ids, i) for i in positions]
    assert [int(ranks[i]) for i in positions] == naive
    # the check has power: the ranks vary, so a shifted (misaligned) rank vector would not match
    assert max(naive) > 0 and [int(ranks[i - 1]) for i in positions[1:]] != naive[1:]


def test_word_score_is_max_over_its_tokens(short_ranked):
    r = short_ranked
    offs = r["token_offsets"]
    not_first = 0
    for w, (_, _, cs, ce) in enumerate(r["spans"]):
        toks = [k for k, (a, b) in enumerate(offs) if a < ce and b > cs]
        ranks = [int(r["token_ranks"][k]) for k in toks]
        if r["cores"][w]:
            assert r["scores"][w] == max(ranks)
        not_first += len(ranks) > 1 and max(ranks) > ranks[0]
    assert not_first >= 1  # some fragmented word ("nappyzilla") is scored by a later token
    assert r["n_words_ranked"] == len(r["spans"]) == len(SHORT.split())


def test_context_cap_truncates_the_document_not_the_alignment(proxy64, short_ranked):
    tok, model = proxy64
    full = short_ranked
    cap = 12
    capped = rank_words(SHORT, tok, model, max_tokens=cap)
    n = capped["n_words_ranked"]
    assert 0 < n < len(full["spans"])
    # words inside the cap keep exactly the ranks of the uncapped pass (same positions)
    np.testing.assert_array_equal(capped["scores"][:n], full["scores"][:n])
    assert (capped["scores"][n:] == -1).all()
    # word n is the first with a token beyond the cap (cap - 1 document tokens after the start token)
    _, _, cs, ce = capped["spans"][n]
    toks = [k for k, (a, b) in enumerate(capped["token_offsets"]) if a < ce and b > cs]
    assert max(toks) >= cap - 1
    m = mask_document(SHORT, tok, model, n_masks=4, max_tokens=cap)
    assert m["n_words_ranked"] == n and all(j < n for j in m["mask_word_indices"])


def test_masks_one_per_subtext_no_stopwords_not_adjacent(proxy64):
    tok, model = proxy64
    n_masks = 8
    r = rank_words(TEXT, tok, model)  # mask_document = rank_words + choose_masks + apply_masks
    idx = choose_masks(r["cores"], r["scores"], n_masks, r["n_words_ranked"])
    masked, answers = apply_masks(TEXT, r["spans"], idx)
    m = {"mask_word_indices": idx, "n_masks": len(answers), "masked_text": masked, "answers": answers}
    n = len(r["spans"])
    bounds = [(k * n) // n_masks for k in range(n_masks + 1)]
    subtexts = [next(k for k in range(n_masks) if bounds[k] <= j < bounds[k + 1]) for j in idx]
    assert len(set(subtexts)) == len(idx) == m["n_masks"] >= n_masks - 1
    assert all(r["cores"][j].lower() not in NLTK_ENGLISH_STOPWORDS for j in idx)
    assert all(b - a > 1 for a, b in zip(idx, idx[1:]))
    for j, k in zip(idx, subtexts):  # each mask is the highest-ranked eligible word of its subtext
        others = [
            i
            for i in range(bounds[k], bounds[k + 1])
            if r["cores"][i]
            and r["cores"][i].lower() not in NLTK_ENGLISH_STOPWORDS
            and i - 1 not in idx
            and i + 1 not in idx
        ]
        assert r["scores"][j] == max(r["scores"][i] for i in others)
    # the masked text names the masks in order and restores the document with the answers
    text = m["masked_text"]
    for i, a in enumerate(m["answers"], start=1):
        assert text.count(f"[Mask_{i}]") == 1
        text = text.replace(f"[Mask_{i}]", a)
    assert text == TEXT
    assert m["answers"] == [r["cores"][j] for j in idx]


def test_choose_masks_rules_by_hand():
    cores = ["The", "alpha", "beta", "of", "gamma", "", "delta", "the", "and", "epsilon"]
    scores = [99, 5, 7, 98, 9, 97, 8, 96, 95, 1]
    #  subtexts of 10 words / 3 masks: [0,3) [3,6) [6,10)
    # [0,3): "The" is a stop-word -> beta (7); [3,6): "of" stop-word, "" punctuation -> gamma (9)
    # [6,10): delta (8) is next to gamma? no (index 6 vs 4): delta wins over epsilon
    assert choose_masks(cores, scores, 3) == [2, 4, 6]
    # adjacency: make gamma the last word of subtext 1 and delta the best of subtext 2
    cores2 = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    assert choose_masks(cores2, [1, 2, 9, 8, 3, 4], 2) == [2, 5]  # delta (3) is next to gamma (2)
    # a subtext of stop-words only gets no mask; unranked words (-1) are never chosen
    assert choose_masks(["the", "of", "alpha", "beta"], [5, 5, -1, 2], 2) == [3]
    assert choose_masks(["alpha", "beta"], [-1, -1], 1) == []
    # n_ranked restricts the masks to the first words
    assert choose_masks(["alpha", "beta", "gamma", "delta"], [1, 2, 3, 4], 1, n_ranked=2) == [1]


def test_word_spans_core_strips_punctuation():
    text = "Hi... (fever), don't -- 5-6"
    spans = word_spans(text)
    assert [text[cs:ce] for _, _, cs, ce in spans] == ["Hi", "fever", "don't", "", "5-6"]
    assert [text[a:b] for a, b, _, _ in spans] == ["Hi...", "(fever),", "don't", "--", "5-6"]


def test_stopword_list_is_nltk_english():
    assert len(NLTK_ENGLISH_STOPWORDS) == 179
    assert {"i", "ourselves", "don't", "wouldn't", "ma"} <= NLTK_ENGLISH_STOPWORDS
    assert "fever" not in NLTK_ENGLISH_STOPWORDS


# ---------------------------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------------------------
def test_query_prompt_exact():
    candidates = pd.DataFrame({"doc_id": ["d1"], "text": ["I have a fever and cough."], "title": [""]})
    materials = pd.DataFrame(
        {
            "doc_id": ["d1"],
            "masked_text": ["I have a [Mask_1] and [Mask_2]."],
            "answers": [["fever", "cough"]],
            "n_masks": [2],
        }
    )
    q = MBA({}).build_queries(candidates, materials)
    expected = (
        "Predict the answers of the masks in the given texts:\n\n"
        "I have a [Mask_1] and [Mask_2].\n\n"
        "You should strictly follow the contexts below to answer, and provide your answers in the "
        "specified format:\n"
        '"[Mask_i]: answer_i\\n" for each mask:'
    )
    assert q.loc[0, "user_prompt"] == expected
    assert q.loc[0, "query_id"] == "d1::mba"
    assert q.loc[0, "max_tokens"] == 12 * 2 + 16
    assert q.loc[0, "top_logprobs"] == 0
    assert list(q.loc[0, "answers"]) == ["fever", "cough"]
    assert MBA({"max_tokens_per_mask": 8}).build_queries(candidates, materials).loc[0, "max_tokens"] == 32


def test_spell_correction_true_is_refused():
    with pytest.raises(ConfigError, match="config key attacks.mba.spell_correction"):
        MBA({"spell_correction": True})
    MBA({"spell_correction": False})


def test_defaults_come_from_the_schema():
    p = MBA({}).params
    assert p["gamma_grid"] == GAMMAS
    assert (p["n_masks"], p["proxy_lm"], p["proxy_dtype"], p["device"]) == (10, "attacker", "float32", "auto")
    assert (p["max_proxy_tokens"], p["max_tokens"], p["max_tokens_per_mask"]) == (None, None, 12)
    with pytest.raises(ConfigError, match="config key attacks.mba.n_masks"):
        MBA({"n_masks": 0})
    with pytest.raises(ConfigError, match="config key attacks.mba.gamma_grid.0"):
        MBA({"gamma_grid": [1.5]})


# ---------------------------------------------------------------------------------------------
# Parsing and scoring
# ---------------------------------------------------------------------------------------------
ANSWERS = ["fever", "cough", "Antibiotics"]


@pytest.mark.parametrize(
    "response,expected",
    [
        ("[Mask_1]: fever\n[Mask_2]: cough\n[Mask_3]: antibiotics\n", 3),
        ("[MASK_1]: Fever.\n[MASK_2]: COUGH\n[MASK_3]: antibiotics!", 3),
        ("Mask 1: fever\nMask 2: sneeze\nMask 3: antibiotics", 2),
        ("**[Mask_1]**: fever\n**[Mask_2]:** cough\n- [Mask_3]: **antibiotics**", 3),
        ("[Mask_1]: fever, [Mask_2]: cough, [Mask_3]: pills", 2),
        ('{"[Mask_1]": "fever", "[Mask_2]": "cough", "[Mask_3]": "antibiotics"}', 3),
        ("Here are the answers:\n1. fever\n2. cough\n3) antibiotics", 3),
        ("1. headache\n2) cough\n3. antibiotic", 1),
        ("[Mask_2]: fever\n[Mask_1]: cough", 0),  # indices matter, not order
        ("Mask_1 - fever\nMask_3 = antibiotics", 2),
        ("[Mask_1]: a fever\n[Mask_2]: coughing", 0),  # strict word match after normalisation
        ("I don't know.", 0),
        ("", 0),
    ],
)
def test_parser_counts(response, expected):
    assert count_correct(response, ANSWERS) == expected


def test_parser_first_answer_per_index_and_numbered_only_without_markers():
    assert parse_mask_answers("[Mask_1]: fever\n[Mask_1]: cold") == {1: "fever"}
    assert parse_mask_answers("1. fever\n[Mask_2]: cough") == {2: "cough"}
    assert parse_mask_answers("[Mask_10]: x\n[Mask_1]: y") == {10: "x", 1: "y"}
    assert normalize_answer(" Don't! ") == "dont" and normalize_answer("i.e") == "ie"


def test_gamma_selected_by_f1_on_reference():
    # reference fractions (M = 10): members .9 .7 .6 .3, non-members .5 .2 .1 0
    # F1 by gamma: .1 -> 8/11, .2 -> 8/10, .3 -> 8/9 (best), .4/.5 -> 6/8, .6 -> 6/7, .7 -> 4/6 ...
    frac = [0.9, 0.7, 0.6, 0.3, 0.5, 0.2, 0.1, 0.0]
    y = [1, 1, 1, 1, 0, 0, 0, 0]
    gamma, f1 = select_gamma(frac, y, GAMMAS)
    assert gamma == 0.3 and f1 == pytest.approx(8 / 9)
    # the boundary counts: 3 correct of 10 is a member at gamma 0.1 * 3 (= 0.30000000000000004)
    assert gamma_decisions([3 / 10, 0.29], 0.1 * 3).tolist() == [1, 0]
    assert gamma_decisions([6 / 10], 0.1 * 6).tolist() == [1]
    # ties go to the smallest gamma
    assert select_gamma([1.0, 0.0], [1, 0], GAMMAS)[0] == 0.1
    assert select_gamma([1.0, 0.0], [1, 0], [0.5, 0.9])[0] == 0.5  # the grid is the one given


def _mba_score(ref, texts=None, seed=0):
    att = MBA({"cv_folds": 2}, seed=seed)
    docs = [f"d{i}" for i in range(8)]
    materials = pd.DataFrame(
        {"doc_id": docs, "masked_text": ["a [Mask_1] b [Mask_2]"] * 8, "answers": [["x", "y"]] * 8, "n_masks": [2] * 8}
    )
    candidates = pd.DataFrame({"doc_id": docs, "text": ["a x b y"] * 8, "title": [""] * 8})
    q = att.build_queries(candidates, materials)
    texts = texts or [
        "[Mask_1]: x\n[Mask_2]: y",
        "[Mask_1]: x\n[Mask_2]: z",
        "[Mask_1]: w\n[Mask_2]: z",
        "[Mask_1]: x [Mask_2]: y",
        "nothing",
        "[Mask_1]: x",
        "[Mask_1]: x\n[Mask_2]: y",
        "[Mask_1]: q",
    ]
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": texts,
            "first_token_logprobs": [[]] * 8,
            "token_logprobs": [[]] * 8,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
    )
    return att.score(q, resp, ref)


REF_MBA = {"d0": 1, "d1": 1, "d6": 1, "d2": 0, "d4": 0, "d5": 0}


def test_score_end_to_end_with_gamma_chosen_in_fold():
    s = _mba_score(REF_MBA)
    frac = s[s["variant"] == "mba"].set_index("doc_id")["score"]
    assert frac.to_dict() == {"d0": 1.0, "d1": 0.5, "d2": 0.0, "d3": 1.0, "d4": 0.0, "d5": 0.5, "d6": 1.0, "d7": 0.0}
    g = s[s["variant"] == "mba/gamma"].set_index("doc_id")
    assert (g["selection"] == "in-fold").all() and set(g["fold"]) == {0, 1}
    for k in (0, 1):
        train = [d for d in REF_MBA if g.loc[d, "fold"] != k]
        gamma, _ = select_gamma(frac[train], [REF_MBA[d] for d in train], GAMMAS)
        rows = g.index[g["fold"] == k]
        assert (g.loc[rows, "gamma"] == gamma).all()
        assert g.loc[rows, "decision"].tolist() == gamma_decisions(frac[rows], gamma).tolist()
    assert s[s["variant"] == "mba"].set_index("doc_id")["no_answer"].to_dict()["d4"]


def test_gamma_of_a_reference_row_does_not_depend_on_its_own_label(label_blind_folds):
    """The in-fold property: flip one reference label; that row's own gamma and decision stay.  Seed 6:
    a deal in which no flip leaves a class inside one fold (3 + 3 rows in 2 folds; such a flip forces a
    re-deal, which reads the labels: ragmi.attacks.folds.reference_folds)."""
    base = _mba_score(REF_MBA, seed=6).query("variant == 'mba/gamma'").set_index("doc_id")
    moved = False
    for d in REF_MBA:
        flipped = _mba_score({**REF_MBA, d: 1 - REF_MBA[d]}, seed=6).query("variant == 'mba/gamma'")
        flipped = flipped.set_index("doc_id")
        assert (
            flipped.loc[d, ["gamma", "decision", "fold"]].tolist()
            == base.loc[d, ["gamma", "decision", "fold"]].tolist()
        )
        moved |= not flipped["gamma"].equals(base["gamma"])
    assert moved  # the labels are used, by the other folds' rows


def test_prepare_with_attacker_tools(smollm2_dir):
    class Tools:
        asked: list = []

        def local_model_path(self, name):
            self.asked.append(name)
            return smollm2_dir

        def log(self, msg):
            pass

        def chat(self, *a, **k):
            raise AssertionError("MBA must not call the attacker chat model")

    candidates = pd.DataFrame({"doc_id": ["a", "b"], "text": [SHORT, "Short note about zebras."], "title": ["", ""]})
    tools = Tools()
    mat = MBA({"n_masks": 4, "max_proxy_tokens": 20}).prepare(candidates, tools)
    assert tools.asked == ["attacker"]
    assert list(mat["doc_id"]) == ["a", "b"]
    assert mat.loc[0, "n_masks"] == 4 and mat.loc[0, "n_words_ranked"] < mat.loc[0, "n_words"]
    assert mat.loc[1, "n_words_ranked"] == 4 and 1 <= mat.loc[1, "n_masks"] <= 2
    assert (mat["proxy_lm"] == "attacker").all()
    q = MBA({"n_masks": 4}).build_queries(candidates, mat)
    assert q.loc[0, "user_prompt"].count("[Mask_") == 4 + 1  # 4 masks + the format line
