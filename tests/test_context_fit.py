"""Prompts fitted to the generator's context (``targets.<t>.context_fit``, ``ragmi.rag.fit``): with
SmolLM2's own tokenizer and chat template, a prompt that fits is sent unchanged and untouched by any
tokenizer, and one long retrieved document is cut from its end so that the prompt plus the answer fit
``max_model_len``; the counts reach the responses and the cost column."""

from __future__ import annotations

import pandas as pd
import pytest

from ragmi.costs import TRUNCATED, query_costs
from ragmi.errors import ConfigError
from ragmi.rag.fit import PromptFitter, share
from ragmi.rag.system import RAGSystem
from ragmi.rag.templates import get_template


@pytest.fixture(scope="module")
def tok(smollm2_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir)


def test_share_gives_equal_shares_and_the_short_ones_their_length():
    assert share([100, 100], 100) == [50, 50]
    assert share([10, 5000, 30], 1000) == [10, 960, 30]
    assert share([10, 20], 1000) == [10, 20]
    assert share([7, 9], -5) == [0, 0]
    assert sum(share([3, 400, 401, 399], 900)) == 900


class NoTokenizer:
    """A tokenizer that must not be used."""

    def __getattr__(self, name):
        raise AssertionError("the tokenizer was loaded for a prompt that fits")

    def __call__(self, *a, **k):
        raise AssertionError("the tokenizer was loaded for a prompt that fits")


def test_a_prompt_that_fits_is_sent_unchanged_without_a_tokenizer():
    fitter = PromptFitter(2048, "equal_share", tokenizer=NoTokenizer())
    docs = ["Patient: I have had a cough for a week.\nDoctor: Drink fluids and rest.", "Second short document."]
    msgs = get_template("rag_mia").messages("Does this text appear: I have had a cough?", docs)
    out, out_docs, n, chars = fitter.fit(msgs, docs, 6)
    assert out == msgs and out_docs == docs and (n, chars) == (0, 0)


def test_a_prompt_under_the_context_by_exact_count_is_unchanged(tok):
    docs = ["word " * 500, "short one"]  # over the byte bound of 1024, under 1024 tokens counted
    msgs = get_template("rag_mia").messages("q?", docs)
    fitter = PromptFitter(1024, "equal_share", tokenizer=tok)
    out, _, n, chars = fitter.fit(msgs, docs, 6)
    assert fitter.stats["counted"] == 1 and out == msgs and (n, chars) == (0, 0)


@pytest.mark.parametrize("template", ["rag_mia", "dcmi", "menta", "ia", "mba"])
def test_one_long_document_is_cut_to_fit_and_keeps_its_start(tok, template):
    long_doc = "".join(f"Sentence number {i} of a very long record about the patient. " for i in range(4000))
    short = "Doctor: the knee needs rest for two weeks."
    docs = [long_doc, short]
    t = get_template(template)
    msgs = t.messages("What does the record say?", docs)
    fitter = PromptFitter(2048, "equal_share", tokenizer=tok)
    assert fitter.count(msgs) > 40000
    out, out_docs, n, chars = fitter.fit(msgs, docs, 64)
    assert fitter.count(out) + 64 <= 2048
    assert n == 1 and out_docs[1] == short and long_doc.startswith(out_docs[0]) and len(out_docs[0]) > 1000
    assert chars == len(long_doc) - len(out_docs[0])
    assert out == t.messages("What does the record say?", out_docs)  # the same prompt, built from the cut text


def test_two_long_documents_share_the_room_equally(tok):
    a = "alpha beta gamma delta " * 3000
    b = "one two three four five " * 3000
    msgs = get_template("rag_mia").messages("q?", [a, b])
    out, (ca, cb), n, _ = PromptFitter(2048, "equal_share", tokenizer=tok).fit(msgs, [a, b], 16)
    la, lb = (len(tok(x, add_special_tokens=False)["input_ids"]) for x in (ca, cb))
    assert n == 2 and abs(la - lb) <= 2


def test_rule_none_sends_the_prompt_as_built(tok):
    long_doc = "x y z " * 20000
    msgs = get_template("rag_mia").messages("q?", [long_doc])
    out, _, n, _ = PromptFitter(2048, "none", tokenizer=tok).fit(msgs, [long_doc], 6)
    assert out == msgs and n == 0
    with pytest.raises(ConfigError, match="targets.t.context_fit"):
        PromptFitter(2048, "cut_middle", where="targets.t.context_fit")


class StaticRetriever:
    def __init__(self, ids):
        self.ids = ids

    def search(self, queries, k):
        return [self.ids[:k] for _ in queries], [[1.0] * k for _ in queries]


class RecordingGenerator:
    def __init__(self):
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return [
            {
                "response_text": "ok",
                "first_token_logprobs": [],
                "token_logprobs": [],
                "token_top_logprobs": [],
                "prompt_tokens": 0,
                "completion_tokens": 1,
                "latency_s": 0.0,
                "cached": False,
            }
            for _ in requests
        ]


def test_the_rag_system_fits_before_generation_and_records_the_counts(tok):
    documents = {"long": "The record goes on and on. " * 8000, "short": "A short note."}
    gen = RecordingGenerator()
    rag = RAGSystem(
        StaticRetriever(["long", "short"]),
        documents,
        get_template("rag_mia"),
        gen,
        k=2,
        log=lambda m: None,
        fitter=PromptFitter(2048, "equal_share", tokenizer=tok),
    )
    out = rag.answer(["What is recorded?"], [6], [0], ["q0"])[0]
    assert out["n_docs_truncated"] == 1 and out["chars_truncated"] > 200000
    assert rag.fitter.count(gen.requests[0]["messages"]) + 6 <= 2048
    assert out["retrieved_ids"] == ["long", "short"]


def test_without_a_fitter_the_counts_are_zero():
    rag = RAGSystem(StaticRetriever(["a"]), {"a": "text"}, get_template("rag_mia"), RecordingGenerator(), k=1)
    out = rag.answer(["q"], [6], [0], ["q0"])[0]
    assert (out["n_docs_truncated"], out["chars_truncated"]) == (0, 0)


def test_the_cost_column_appears_only_where_a_prompt_was_cut():
    queries = pd.DataFrame({"query_id": ["a", "b", "c", "d"], "doc_id": ["m1", "m1", "n1", "n1"]})
    base = {"prompt_tokens": 10, "completion_tokens": 1, "retrieved_ids": [["m1"], [], [], []]}
    labels = {"m1": 1, "n1": 0}
    none_cut = pd.DataFrame({"query_id": list("abcd"), **base, "n_docs_truncated": [0, 0, 0, 0]})
    assert TRUNCATED not in query_costs(queries, none_cut, labels)
    cut = pd.DataFrame({"query_id": list("abcd"), **base, "n_docs_truncated": [1, 0, 2, 0]})
    assert query_costs(queries, cut, labels)[TRUNCATED] == 0.5
    old = pd.DataFrame({"query_id": list("abcd"), **base})  # responses written before the column existed
    assert TRUNCATED not in query_costs(queries, old, labels)


def test_the_embedded_defaults_prompts_are_never_cut():
    """The embedded default's longest possible prompt — its template around its longest documents, a
    question twice as long as its longest document, the largest max_tokens of its attacks — fits its
    generator's context, counted with that generator's own tokenizer (Qwen2.5-Coder-0.5B-Instruct,
    converted at install): no default prompt is cut, so its prompts, cache keys and results are
    those of a run without fitting."""
    from transformers import AutoTokenizer

    from ragmi.config import load_config
    from ragmi.datasets import load_corpus
    from ragmi.models import cached_conversion
    from ragmi.rag.index import database_documents

    cfg = load_config("config/config.yaml")
    ((name, spec),) = cfg["datasets"].items()
    corpus, _ = load_corpus(name, spec, cfg["seed"])
    max_tokens = max(
        [p.get("max_tokens") or 0 for p in cfg["attacks"].values()]
        + [p.get("max_tokens_cap") or 0 for p in cfg["attacks"].values()]
    )
    for t in cfg["targets"].values():
        g = cfg["generators"][t["generator"]]
        path = cached_conversion(g["model"])
        if path is None:
            pytest.skip(f"{g['model']} is not converted here (tools/install.sh converts it)")
        docs = sorted(database_documents(corpus, t["with_titles"]).values(), key=len)[-max(t["k"], 1) :]
        msgs = get_template(t["template"]).messages(docs[-1] * 2, docs)
        fitter = PromptFitter(g["max_model_len"], t["context_fit"], tokenizer=AutoTokenizer.from_pretrained(path))
        assert t["context_fit"] == "equal_share" and fitter.count(msgs) + max_tokens < g["max_model_len"] // 2
        assert fitter.fit(msgs, docs, max_tokens) == (msgs, docs, 0, 0)


def test_a_generator_endpoints_refusal_names_the_target(tmp_path):
    """With context_fit: none an oversized prompt reaches the server; its HTTP 400 stops the job with
    one line naming the server's message, the target and its generator."""
    from stand_in import StandIn

    from ragmi.errors import EndpointError
    from ragmi.rag.factory import TargetSpec, rag_system
    from ragmi.rag.index import RetrieverSpec, build_index
    from ragmi.schema import section_params

    msg = "This model's maximum context length is 2048 tokens. However, you requested 70213 tokens."
    s = StandIn(lambda n, p, b, h: (400, {"object": "error", "message": msg, "type": "BadRequestError"}, None))
    try:
        docs = pd.DataFrame({"doc_id": ["a"], "text": ["word " * 30000], "title": [""]})
        build_index(
            docs,
            RetrieverSpec.from_config("r", {"kind": "bm25"}),
            tmp_path / "idx",
            with_titles=True,
            log=lambda m: None,
        )
        spec = TargetSpec(
            name="long-rag",
            target=section_params("targets", {"retriever": "r", "generator": "g", "k": 1, "context_fit": "none"}),
            retriever=section_params("retrievers", {"kind": "bm25"}),
            generator=section_params(
                "generators", {"backend": "openai", "model": "m", "base_url": s.url + "/v1", "max_retries": 0}
            ),
            index_dir=str(tmp_path / "idx"),
            model_dir=None,
            cache_dir=str(tmp_path / "cache"),
            threads=1,
            server_log=str(tmp_path / "s.log"),
            seed=0,
            temperature=0.0,
        )
        with pytest.raises(EndpointError) as e, rag_system(spec, docs, log=lambda m: None) as rag:
            rag.answer(["word?"], [6], [0], ["q0"])
    finally:
        s.close()
    text = str(e.value)
    assert "\n" not in text and f"answered HTTP 400: {msg}" in text and text.endswith("(target long-rag, generator g)")
