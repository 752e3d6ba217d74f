import math

import numpy as np
import pandas as pd
import pytest

from ragmi.attacks.rag_mia import PROMPTS, RagMIA


def test_prompts_are_table_1():
    assert (
        PROMPTS[2].format(sample="S") == "Does this :\n \u201cS\u201d\n appear in the context? Answer with Yes or No."
    )
    assert PROMPTS[3].format(sample="S") == "S\n Is this part of your context? Answer with one word."


def test_defaults_come_from_the_schema():
    p = RagMIA({}).params
    assert (p["templates"], p["max_chars"], p["max_tokens"], p["top_logprobs"]) == ([2], 1000, 6, 20)
    assert (p["ensemble_size"], p["cv_folds"]) == (40, 5)
    q = RagMIA({}).build_queries(pd.DataFrame({"doc_id": ["a"], "text": ["y" * 1200], "title": [""]}))
    assert q["query_id"].tolist() == ["a::t2"]
    assert "\u201c" + "y" * 1000 + "\u201d" in q.loc[0, "user_prompt"]  # the first 1000 characters
    assert (q.loc[0, "max_tokens"], q.loc[0, "top_logprobs"]) == (6, 20)


def test_build_queries_truncates_and_uses_templates():
    attack = RagMIA({"templates": [0, 2], "max_chars": 5, "max_tokens": 3, "top_logprobs": 7})
    q = attack.build_queries(pd.DataFrame({"doc_id": ["a"], "text": ["abcdefgh"], "title": [""]}))
    assert q["query_id"].tolist() == ["a::t0", "a::t2"]
    assert "\u201cabcde\u201d" in q.loc[1, "user_prompt"] and "abcdef" not in q.loc[1, "user_prompt"]
    assert q["max_tokens"].tolist() == [3, 3] and q["top_logprobs"].tolist() == [7, 7]


def _responses(n_ref, n_eval, rng):
    """Members answer Yes with high P(Yes); non-members lower; some answers are neither."""
    rows, labels = [], {}
    for i in range(n_ref + n_eval):
        for label in (1, 0):
            doc = f"{'m' if label else 'n'}{i}"
            p = rng.uniform(0.6, 0.95) if label else rng.uniform(0.05, 0.7)
            text = "Yes." if p > 0.5 else ("No." if i % 3 else "unanswerable")
            rows.append({"doc_id": doc, "p": p, "text": text})
            if i < n_ref:
                labels[doc] = label
    return rows, labels


def test_score_black_and_gray_box():
    rows, ref_labels = _responses(20, 10, np.random.default_rng(0))
    candidates = pd.DataFrame({"doc_id": [r["doc_id"] for r in rows], "text": ["x"] * len(rows), "title": ""})
    attack = RagMIA({"templates": [2], "ensemble_size": 5, "cv_folds": 3}, seed=1)
    q = attack.build_queries(candidates)
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": [r["text"] for r in rows],
            "first_token_logprobs": [
                [{"token": "Yes", "logprob": math.log(r["p"])}, {"token": "No", "logprob": math.log(1 - r["p"])}]
                for r in rows
            ],
            "token_top_logprobs": [
                [[{"token": "Yes", "logprob": math.log(r["p"])}, {"token": "No", "logprob": math.log(1 - r["p"])}]]
                for r in rows
            ],
            "token_logprobs": [[] for _ in rows],
            "prompt_tokens": 1,
            "completion_tokens": 1,
        }
    )
    s = attack.score(q, resp, ref_labels)
    assert set(s["variant"]) == {
        "rag_mia/black/t2",
        "rag_mia/gray/t2",
        "rag_mia/gray-pyes/t2",
        "rag_mia/gray-pyes/t2/reading=first-topk",
    }
    black = s[s.variant == "rag_mia/black/t2"].set_index("doc_id")
    for r in rows:
        assert black.loc[r["doc_id"], "decision"] == (1 if r["text"] == "Yes." else 0)
        assert black.loc[r["doc_id"], "no_answer"] == (r["text"] == "unanswerable")
    pyes = s[s.variant == "rag_mia/gray-pyes/t2"].set_index("doc_id")["score"]
    for r in rows:
        assert pyes[r["doc_id"]] == pytest.approx(r["p"])  # P(Yes)/(P(Yes)+P(No)) with P(No) = 1-p
    gray = s[s.variant == "rag_mia/gray/t2"].set_index("doc_id")["score"]
    assert gray.between(0, 1).all()
    # the ensemble's decision rule: mean member probability > 0.5 (soft voting, the predicted class)
    gdec = s[s.variant == "rag_mia/gray/t2"].set_index("doc_id")["decision"]
    assert (gdec.astype(int) == (gray > 0.5).astype(int)).all() and 0 < gdec.astype(int).sum() < len(gdec)
    assert s.loc[s.variant == "rag_mia/gray-pyes/t2", "decision"].isna().all()  # no rule: a bare score
    members = [r["doc_id"] for r in rows if r["doc_id"].startswith("m")]
    nonmembers = [r["doc_id"] for r in rows if r["doc_id"].startswith("n")]
    assert gray[members].mean() > gray[nonmembers].mean() + 0.3


def test_a_text_only_target_gets_the_black_box_without_log_probability_columns():
    """Responses of a target without log-probabilities need no log-probability column: the black box is
    scored and the gray-box variants are skipped (it once refused such responses outright)."""
    rows, ref_labels = _responses(5, 5, np.random.default_rng(0))
    candidates = pd.DataFrame({"doc_id": [r["doc_id"] for r in rows], "text": ["x"] * len(rows), "title": ""})
    attack = RagMIA({"templates": [2]}, seed=1, logprobs=False)
    q = attack.build_queries(candidates)
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": [r["text"] for r in rows],
            "prompt_tokens": 1,
            "completion_tokens": 1,
        }
    )
    s = attack.score(q, resp, ref_labels)
    assert set(s["variant"]) == {"rag_mia/black/t2"}
    assert "rag_mia/gray/t2" in attack.skipped_variants
    with pytest.raises(ValueError, match="token_top_logprobs"):
        RagMIA({"templates": [2]}, seed=1, logprobs=True).score(q, resp, ref_labels)


def test_gray_box_never_sees_evaluation_labels():
    rows, ref_labels = _responses(15, 10, np.random.default_rng(1))
    candidates = pd.DataFrame({"doc_id": [r["doc_id"] for r in rows], "text": ["x"] * len(rows), "title": ""})
    attack = RagMIA({"templates": [2], "ensemble_size": 4, "cv_folds": 3}, seed=2)
    q = attack.build_queries(candidates)
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": [r["text"] for r in rows],
            "first_token_logprobs": [[{"token": "Yes", "logprob": math.log(r["p"])}] for r in rows],
            "token_top_logprobs": [[[{"token": "Yes", "logprob": math.log(r["p"])}]] for r in rows],
            "token_logprobs": [[] for _ in rows],
            "prompt_tokens": 1,
            "completion_tokens": 1,
        }
    )
    a = attack.score(q, resp, ref_labels)
    flipped = {d: 1 - v for d, v in ref_labels.items()}
    b = attack.score(q, resp, flipped)
    # reference labels drive the attack model: flipping them changes the scores of evaluation docs
    ev = [r["doc_id"] for r in rows if r["doc_id"] not in ref_labels]
    ga = a[a.variant == "rag_mia/gray/t2"].set_index("doc_id")["score"][ev]
    gb = b[b.variant == "rag_mia/gray/t2"].set_index("doc_id")["score"][ev]
    assert np.corrcoef(ga, gb)[0, 1] < 0


def _dialogue_candidates():
    return pd.DataFrame(
        {
            "doc_id": ["hcm", "enron"],
            "text": ["Patient: my knee hurts\nDoctor: rest it", "E" * 1500],
            "title": ["", ""],
            "human_turn": ["my knee hurts", ""],
        }
    )


def test_sample_is_the_human_turn_where_the_corpus_has_one():
    """RAG-MIA §4: HealthCareMagic's sample is the human part of the dialogue; Enron's the first 1000
    characters of the e-mail."""
    q = RagMIA({}).build_queries(_dialogue_candidates())
    hcm, enron = q.loc[0, "user_prompt"], q.loc[1, "user_prompt"]
    assert "\u201cmy knee hurts\u201d" in hcm and "Doctor" not in hcm and "Patient" not in hcm
    assert "\u201c" + "E" * 1000 + "\u201d" in enron
    assert q["sample"].tolist() == ["human_turn", "full_text"]


def test_sample_full_text_option_quotes_the_whole_document():
    q = RagMIA({"sample": "full_text"}).build_queries(_dialogue_candidates())
    assert "\u201cPatient: my knee hurts\nDoctor: rest it\u201d" in q.loc[0, "user_prompt"]
    assert q["sample"].tolist() == ["full_text", "full_text"]


def _pos(*alternatives):
    return [{"token": t, "logprob": math.log(p)} for t, p in alternatives]


def test_gray_box_reads_p_yes_where_the_answer_says_yes_or_no():
    """A chat model that opens with a space, "Sure" or "**" has no Yes/No among its first token's top
    alternatives; P(Yes) is read at the first position that has one, and that position is recorded."""
    answers = {  # doc: (answer text, top-K per generated position)
        "m0": (" Yes", [_pos((" Yes", 0.9), (" No", 0.05), (" The", 0.05))]),
        "m1": (
            "Sure, yes",
            [_pos(("Sure", 0.9), ("I", 0.1)), _pos((",", 0.99), ("!", 0.01)), _pos((" yes", 0.8), (" no", 0.2))],
        ),
        "m2": (
            "**Yes**",
            [_pos(("**", 0.95), ("The", 0.05)), _pos(("Yes", 0.7), ("No", 0.3)), _pos(("**", 0.99), ("*", 0.01))],
        ),
        "n0": (
            "**No**",
            [_pos(("**", 0.95), ("The", 0.05)), _pos(("No", 0.9), ("Yes", 0.1)), _pos(("**", 0.99), ("*", 0.01))],
        ),
        "n1": ("Based on the context", [_pos(("Based", 0.6), ("The", 0.4)), _pos((" on", 0.99), (" upon", 0.01))]),
        "n2": ("No", [_pos(("No", 0.6), ("Yes", 0.4))]),
    }
    ids = list(answers)
    attack = RagMIA({"templates": [2], "ensemble_size": 2, "cv_folds": 2}, seed=0)
    q = attack.build_queries(pd.DataFrame({"doc_id": ids, "text": "x", "title": "", "human_turn": ""}))
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": [answers[d][0] for d in ids],
            "first_token_logprobs": [answers[d][1][0] for d in ids],  # token 0 only, as generated before
            "token_top_logprobs": [answers[d][1] for d in ids],
            "token_logprobs": [[] for _ in ids],
            "prompt_tokens": 1,
            "completion_tokens": 1,
        }
    )
    s = attack.score(q, resp, {"m0": 1, "m1": 1, "n0": 0, "n1": 0})
    pyes = s[s.variant == "rag_mia/gray-pyes/t2"].set_index("doc_id")
    assert pyes["score"].to_dict() == pytest.approx(
        {"m0": 0.9 / 0.95, "m1": 0.8, "m2": 0.7, "n0": 0.1, "n1": 0.5, "n2": 0.4}
    )
    assert pyes["yes_no_position"].to_dict() == {"m0": 0, "m1": 2, "m2": 1, "n0": 1, "n1": -1, "n2": 0}
    assert pyes["no_yes_no"].to_dict() == {d: d == "n1" for d in ids}  # flagged, for the cost column
    gray = s[s.variant == "rag_mia/gray/t2"].set_index("doc_id")
    assert gray["yes_no_position"].to_dict() == pyes["yes_no_position"].to_dict()
    assert s.loc[s.variant == "rag_mia/black/t2", "no_yes_no"].isna().all()  # the text variant reads no log-probs


def test_attacks_see_only_the_response_columns_and_refuse_old_responses():
    from ragmi.attacks.base import RESPONSE_COLUMNS, attack_responses

    full = pd.DataFrame(
        {c: [[]] for c in RESPONSE_COLUMNS} | {"query_id": ["q"], "retrieved_ids": [["d"]], "hook_trace": ["[]"]}
    )
    assert list(attack_responses(full).columns) == RESPONSE_COLUMNS and "token_top_logprobs" in RESPONSE_COLUMNS
    with pytest.raises(ValueError, match="token_top_logprobs"):
        attack_responses(full.drop(columns="token_top_logprobs"))


def test_the_first_topk_reading_is_kept_as_a_named_variant():
    """An opener ("Sure") whose low-ranked alternatives hold a "No": the headline P(Yes) is read at the
    generated "Yes" (DCMI's code), the named variant ``reading=first-topk`` at the opener."""
    top = [_pos(("Sure", 0.9), ("No", 0.05), ("Yes", 0.05)), _pos((" yes", 0.95), (" no", 0.05))]
    ids = ["m0", "m1", "n0", "n1"]
    attack = RagMIA({"templates": [2], "ensemble_size": 2, "cv_folds": 2}, seed=0)
    q = attack.build_queries(pd.DataFrame({"doc_id": ids, "text": "x", "title": "", "human_turn": ""}))
    resp = pd.DataFrame(
        {
            "query_id": q["query_id"],
            "response_text": "Sure, yes",
            "first_token_logprobs": [top[0]] * 4,
            "token_top_logprobs": [top] * 4,
            "token_logprobs": [[] for _ in ids],
            "prompt_tokens": 1,
            "completion_tokens": 2,
        }
    )
    s = attack.score(q, resp, {"m0": 1, "m1": 1, "n0": 0, "n1": 0}).set_index(["variant", "doc_id"])
    assert s.loc[("rag_mia/gray-pyes/t2", "m0"), "score"] == pytest.approx(0.95)
    assert s.loc[("rag_mia/gray-pyes/t2/reading=first-topk", "m0"), "score"] == pytest.approx(0.5)
    assert s.loc[("rag_mia/gray-pyes/t2/reading=first-topk", "m0"), "yes_no_position"] == 0
