"""The target's defense hooks and the active-path audit (hook inventory, channel map), on a
hand-made database, retriever and generator (no model)."""

import json
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from ragmi.audit.inventory import (
    AuditError,
    check_inventory,
    defense_status,
    effective_channels,
    hook_status,
    interpretable,
    inventory,
    trace_fire_rates,
)
from ragmi.defenses.base import Defense, select_top, set_response_text
from ragmi.rag.system import RAGSystem
from ragmi.rag.templates import get_template

DOCS = {f"d{i}": f"document {i} about topic{i % 3} with words w{i} w{i + 1} w{i + 2}" for i in range(8)}


class OverlapRetriever:
    """Scores = word overlap with the query; ties broken by id."""

    def __init__(self, docs):
        self.docs = docs
        self.ids = list(docs)

    def all_scores(self, queries):
        out = []
        for q in queries:
            qw = set(q.split())
            out.append(np.array([len(qw & set(self.docs[d].split())) for d in self.ids], dtype=float))
        return out

    def search(self, queries, k):
        ids, scores = [], []
        for s in self.all_scores(queries):
            order = sorted(range(len(self.ids)), key=lambda i: (-s[i], self.ids[i]))[:k]
            ids.append([self.ids[i] for i in order])
            scores.append([float(s[i]) for i in order])
        return ids, scores


class CosineRetriever(OverlapRetriever):
    """Scores = cosine of the query's and the document's word-count vectors (a retriever whose scores
    are cosines, for the defenses that declare ``needs_cosine_scores``); ties broken by id."""

    def all_scores(self, queries):
        out = []
        for q in queries:
            qc = Counter(q.split())
            row = []
            for d in self.ids:
                dc = Counter(self.docs[d].split())
                dot = sum(qc[w] * dc[w] for w in qc)
                norm = math.sqrt(sum(v * v for v in qc.values()) * sum(v * v for v in dc.values()))
                row.append(dot / norm if norm else 0.0)
            out.append(np.array(row))
        return out


class EchoGenerator:
    def __init__(self):
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return [
            {
                "response_text": "answer to: " + r["messages"][-1]["content"][-40:],
                "first_token_logprobs": [{"token": "Yes", "logprob": -0.1}],
                "token_logprobs": [-0.1],
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "latency_s": 0.0,
                "cached": False,
            }
            for r in requests
        ]


class Upper(Defense):
    kind = "upper"
    hooks = ("output",)
    channels = ("text",)

    def on_output(self, states, ctx):
        for s in states:
            set_response_text(s, s.response["response_text"].upper())


class DropTop(Defense):
    kind = "drop_top"
    hooks = ("retrieval",)
    channels = ("retrieval_set", "context", "prompt", "text", "first_token_logprobs", "token_logprobs")

    def pool_size(self, k):
        return k + 1

    def on_retrieval(self, states, ctx):
        for s in states:
            select_top(s, s.pool_ids[1:], s.pool_scores[1:], ctx.k)


class Inert(Defense):
    """Declares retrieval and output hooks; the output hook returns its input unchanged."""

    kind = "inert"
    hooks = ("retrieval", "output")
    channels = ("retrieval_set", "text")

    def on_retrieval(self, states, ctx):
        for s in states:
            rng = ctx.rng(self.name, s.query_id)
            order = rng.permutation(len(s.retrieved_ids))
            select_top(s, [s.retrieved_ids[i] for i in order], [s.retrieval_scores[i] for i in order], ctx.k)

    def on_output(self, states, ctx):
        for s in states:
            s.response = dict(s.response)


class RefuseAll(Defense):
    kind = "refuse"
    hooks = ("query",)
    channels = ("text",)

    def on_query(self, states, ctx):
        for s in states:
            s.refusal = "I don't know."


def rag(defenses, k=3):
    return RAGSystem(
        retriever=OverlapRetriever(DOCS),
        documents=DOCS,
        template=get_template("rag_mia"),
        generator=EchoGenerator(),
        k=k,
        seed=7,
        defenses=defenses,
    )


def test_output_hook_runs_after_generation_and_keeps_the_raw_text():
    r = rag([Upper("up", {})])
    out = r.answer(["topic1 w2"], [5], [0], ["q1"])[0]
    assert out["response_text"] == out["response_text_raw"].upper() != out["response_text_raw"]
    assert json.loads(out["hook_trace"]) == [{"defense": "up", "hook": "output", "changed": True, "channels": ["text"]}]
    # generation saw the undefended prompt: the output hook acts after it
    assert "topic1 w2" in r.generator.requests[0]["messages"][-1]["content"]


def test_retrieval_hook_uses_the_pool_and_changes_the_context():
    plain = rag([]).answer(["w3 w4 w5"], [5], [0], ["q"])[0]
    dropped = rag([DropTop("drop", {})]).answer(["w3 w4 w5"], [5], [0], ["q"])[0]
    assert dropped["retrieved_ids"] == plain["retrieved_ids"][1:] + [dropped["retrieved_ids"][-1]]
    assert dropped["retrieved_ids"][-1] not in plain["retrieved_ids"]  # backfilled from rank k+1
    assert len(dropped["retrieved_ids"]) == 3


def test_refusal_skips_generation_and_later_hooks():
    r = rag([RefuseAll("ref", {}), DropTop("drop", {})])
    out = r.answer(["w1"], [5], [3], ["q"])[0]
    assert out["response_text"] == "I don't know." and out["refused"]
    assert r.generator.requests == []
    assert out["first_token_logprobs"] == [] and out["retrieved_ids"] == []
    assert [t["defense"] for t in json.loads(out["hook_trace"])] == ["ref"]


def test_random_hooks_are_seeded_per_query_not_per_batch():
    # k = 6 of 8 documents: 720 orders per query, so batch-seeded draws agree with per-query ones by
    # chance with probability (1/720) per query, and never for all six queries of the batch
    queries = [f"w{i} w{i + 1}" for i in range(6)]
    ids = [f"q{i}" for i in range(6)]
    a = rag([Inert("stub", {})], k=6).answer(queries, [5] * 6, [0] * 6, ids)
    rev = rag([Inert("stub", {})], k=6).answer(queries[::-1], [5] * 6, [0] * 6, ids[::-1])[::-1]
    alone = [rag([Inert("stub", {})], k=6).answer([q], [5], [0], [i])[0] for q, i in zip(queries, ids)]
    orders = [x["retrieved_ids"] for x in a]
    assert orders == [x["retrieved_ids"] for x in rev] == [x["retrieved_ids"] for x in alone]
    assert len({tuple(o) for o in orders}) > 1  # the hook did draw different orders


def test_inventory_flags_the_inert_output_hook_as_retrieval_only_and_stops():
    r = rag([Inert("stub", {})])
    resp = pd.DataFrame(r.answer([f"w{i} w{i + 1}" for i in range(6)], [5] * 6, [0] * 6, [f"q{i}" for i in range(6)]))
    rows, statuses = inventory("t", r, resp)
    by_hook = {row.hook: row for row in rows}
    assert by_hook["output"].status == "inactive" and by_hook["output"].probe_fire_rate == 0
    assert by_hook["retrieval"].status != "inactive"
    assert statuses["stub"] == "retrieval-only"
    with pytest.raises(AuditError, match="stub.*output hook.*retrieval-only"):
        check_inventory(rows, statuses)


def test_inventory_of_working_defenses_passes():
    r = rag([DropTop("drop", {}), Upper("up", {})])
    resp = pd.DataFrame(r.answer(["w1 w2", "w5"], [5, 5], [0, 0], ["a", "b"]))
    rows, statuses = inventory("t", r, resp)
    assert {row.status for row in rows} == {"active"}
    assert statuses == {"drop": "retrieval-only", "up": "output-only"}
    check_inventory(rows, statuses)


def test_trace_fire_rates_count_changes():
    traces = pd.DataFrame(
        {
            "hook_trace": [
                json.dumps([{"defense": "p", "hook": "output", "changed": c}]) for c in (True, False, False, True)
            ]
        }
    )
    assert trace_fire_rates(traces) == {("p", "output"): (2, 4)}


class NudgeScores(Defense):
    """Adds 0.01 to every released score: the retrieved set, its order and the context stay as they
    were, so the generated text is the undefended one."""

    kind = "nudge"
    hooks = ("retrieval",)
    channels = ("retrieval_set",)

    def on_retrieval(self, states, ctx):
        for s in states:
            s.retrieval_scores = [x + 0.01 for x in s.retrieval_scores]


def test_a_score_only_retrieval_hook_is_not_active():
    r = rag([NudgeScores("nudge", {})])
    resp = pd.DataFrame(r.answer([f"w{i} w{i + 1}" for i in range(4)], [5] * 4, [0] * 4, [f"q{i}" for i in range(4)]))
    trace = json.loads(resp["hook_trace"].iloc[0])
    assert trace == [{"defense": "nudge", "hook": "retrieval", "changed": False, "channels": ["scores"]}]
    plain = pd.DataFrame(rag([]).answer([f"w{i} w{i + 1}" for i in range(4)], [5] * 4, [0] * 4, list("abcd")))
    assert resp["response_text"].tolist() == plain["response_text"].tolist()
    rows, statuses = inventory("t", r, resp)
    (row,) = rows
    assert row.status == "scores-only" and statuses["nudge"] == "scores-only"
    assert row.probe_fire_rate == 0 and row.attack_fire_rate == 0
    assert json.loads(row.attack_channels) == {"scores": 1.0}
    with pytest.raises(AuditError, match="nudge.*scores-only"):
        check_inventory(rows, statuses)


def test_the_trace_names_each_channel_a_retrieval_hook_changed():
    from ragmi.defenses.base import QueryState, changed_channels, channel_digests

    s = QueryState("q", "x", retrieved_ids=["a", "b"], retrieval_scores=[0.9, 0.5])
    b = channel_digests(s, "retrieval")
    s.retrieved_ids, s.retrieval_scores = ["b", "a"], [0.5, 0.9]
    assert changed_channels(b, s, "retrieval") == ["order", "scores"]
    s.retrieved_ids = ["b", "c"]
    assert changed_channels(b, s, "retrieval") == ["retrieval_set", "order", "scores"]


def test_an_empty_probe_set_is_untested_not_fired():
    assert hook_status(float("nan"), 0, 0) == "untested"
    assert hook_status(float("nan"), 0, 0, stochastic=True) == "untested"
    assert hook_status(float("nan"), 10, 10) == "active"  # the attack queries reached it
    assert defense_status({"retrieval": "untested", "output": "active"}) == "output-only"


@pytest.mark.parametrize(
    "probe, changed, n, status",
    [
        (0.0, 0, 10, "inactive"),
        (1.0, 10, 10, "active"),
        (0.5, 3, 10, "pattern-limited"),
        (0.4, 0, 10, "pattern-limited"),
        (1.0, 0, 0, "active"),
        (0.4, 0, 0, "pattern-limited"),
    ],
)
def test_hook_status(probe, changed, n, status):
    assert hook_status(probe, changed, n) == status


def test_a_randomised_hook_is_active_when_it_fires_at_all():
    assert hook_status(0.5, 5, 10, stochastic=True) == "active"
    assert hook_status(0.5, 5, 10, stochastic=False) == "pattern-limited"
    assert hook_status(0.0, 0, 10, stochastic=True) == "inactive"


def test_defense_status():
    assert defense_status({"retrieval": "active", "output": "inactive"}) == "retrieval-only"
    assert defense_status({"content": "active", "output": "active"}) == "end-to-end"
    assert defense_status({"output": "pattern-limited"}) == "pattern-limited"
    assert defense_status({"output": "inactive"}) == "inactive"
    assert defense_status({"template": "active"}) == "prompt-only"
    assert defense_status({"template": "active", "content": "active"}) == "retrieval-only"


def test_channel_map_text_only_output_defense_is_indirect_for_gray_box():
    up = Upper("up", {})
    ch = effective_channels(up, ["output"])
    assert ch == {"text"}
    assert not interpretable(ch, {"first_token_logprobs"})
    assert interpretable(ch, {"text"})
    up.logprobs = "drop"
    assert interpretable(effective_channels(up, ["output"]), {"first_token_logprobs"})
    assert "retrieval_set" in effective_channels(DropTop("d", {}), ["retrieval"])


def test_every_model_free_defense_fires_on_its_probes(stub_defense):
    """The audit's generic probes trigger every declared hook of every registered defense that needs
    no LLM (the stub fixture's pass-through output hook excepted, which the audit must catch)."""
    from ragmi.defenses import REGISTRY, build_defense, defense_class

    docs = {
        f"d{i}": f"Patient {i}: pain in the {w} for {i + 2} days, advised rest and fluids by Dr Smith."
        for i, w in enumerate(["head", "back", "knee", "chest", "stomach", "neck", "hand", "foot"] * 4)
    }
    checked_stub = False
    for kind in sorted(REGISTRY):
        cls = defense_class(kind)
        if cls.needs_llm:
            continue
        d = build_defense(kind, {"kind": kind})
        r = RAGSystem(
            retriever=CosineRetriever(docs) if cls.needs_cosine_scores else OverlapRetriever(docs),
            documents=docs,
            template=get_template("rag_mia"),
            generator=EchoGenerator(),
            k=4,
            seed=3,
            defenses=[d],
        )
        rows, statuses = inventory("t", r, None)
        inactive = [row.hook for row in rows if row.status == "inactive"]
        if getattr(cls, "test_only", False):
            assert inactive == ["output"] and statuses[kind] == "retrieval-only", kind
            checked_stub = True
        else:
            assert inactive == [], (kind, inactive)
    assert checked_stub  # the registered test-only fixture was among them


def test_dropping_log_probs_drops_the_top_k_of_every_position_too():
    """An output defense that withholds log-probabilities must withhold token_top_logprobs as well (the
    gray-box attacks read P(Yes) there), and the audit sees a change to it."""
    from ragmi.defenses.base import QueryState, hook_digest

    top = [[{"token": "**", "logprob": -0.1}], [{"token": "Yes", "logprob": -0.2}]]
    s = QueryState(query_id="q", query="x")
    s.response = {"response_text": "**Yes**", "first_token_logprobs": top[0], "token_logprobs": [-0.1, -0.2]}
    s.response["token_top_logprobs"] = top
    before = hook_digest(s, "output")
    set_response_text(s, "**Yes**", drop_logprobs=True)
    assert s.response["token_top_logprobs"] == [] and s.response["first_token_logprobs"] == []
    assert hook_digest(s, "output") != before
    s.response = {"response_text": "a", "first_token_logprobs": [], "token_logprobs": [], "token_top_logprobs": top}
    d = hook_digest(s, "output")
    s.response = dict(s.response, token_top_logprobs=top[:1])  # only the later positions changed
    assert hook_digest(s, "output") != d
