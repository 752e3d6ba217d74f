"""RAGCrawler (ragmi.attacks.adaptive.ragcrawler): the scheduler's scores are the paper's equations worked
by hand on a small graph, the knowledge graph grows from what the answers say, every query is a natural
question whose cost is the LLM calls that wrote it, a repeated question is rewritten and at last sent as
converged, and a campaign resumed from its saved state proposes what the uninterrupted one would.  No
model server: a fake attacker LLM answers from the prompt and its seed; the attacker's embedder is the
packaged all-MiniLM-L6-v2 (offline)."""

from __future__ import annotations

import json
import math
import re
import zlib

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from ragmi.attacks.adaptive import get_adaptive, prompts_ragcrawler
from ragmi.attacks.adaptive.ragcrawler import RAGCrawler, parse_schema, parse_triples
from ragmi.errors import ConfigError
from ragmi.schema import plugin_params

PARAMS = plugin_params("adaptive_attacks", "ragcrawler", {"topic": "medicine"})


@pytest.fixture(scope="module", autouse=True)
def one_blas_thread():
    with threadpool_limits(limits=1):
        yield


# --- a fake attacker LLM and a fake target ------------------------------------------------------------
FACT = re.compile(r"(P\d+) (has symptom|is treated by|is diagnosed with) ([a-z]+)")
CATEGORY = {"has symptom": "symptom", "is treated by": "treatment", "is diagnosed with": "disease"}


def fake_llm(prompt: str, seed: int, same_question: bool = False) -> str:
    if prompt.startswith("You are organising knowledge about"):
        return 'Sure: {"entity_types": ["patient", "disease", "symptom", "treatment"], "relation_types": ["has symptom", "is treated by"]}'
    if prompt.startswith("Extract the facts"):
        text = prompt.split("Text:\n", 1)[1]
        return "\n".join(
            f"{i + 1}. {p} | patient | {r} | {o} | {CATEGORY[r]}" for i, (p, r, o) in enumerate(FACT.findall(text))
        )
    if prompt.startswith("Below are a text"):
        return "NONE" if seed % 2 else "- P0 | patient | lives in | Oslo | place"
    if same_question:
        return "What is medicine?"
    if "asks about the" in prompt:  # relation-driven
        m = re.search(r"about the (.+?) of (.+?) \(a", prompt)
        return f"Could you tell me about the {m.group(1)} of {m.group(2)}? I am asking for a friend ({seed % 1000})."
    if "This is what you already know about" in prompt:
        entity = prompt.split("already know about ", 1)[1].split(" (a ", 1)[0]
        return f"What else should I know about {entity}, for instance case {seed % 1000}?"
    if "that someone might ask about" in prompt:
        forms = [
            "How do {} work?",
            "Why do {} get worse at night?",
            "Who should worry about {}?",
            "Can {} be prevented?",
        ]
        subjects = ["vaccines", "migraines", "kidney stones", "food allergies", "sleep problems", "knee injuries"]
        question = forms[seed % 4].format(subjects[(seed // 4) % 6])
        return f'"{question}"'  # quoted, as the 0.5B Qwen writes some
    raise AssertionError(f"unexpected prompt: {prompt[:80]!r}")


class FakeTools:
    def __init__(self, same_question: bool = False):
        self.calls: list[dict] = []
        self.same_question = same_question

    def chat(self, prompts, max_tokens, temperature, seeds=None):
        assert seeds is not None and len(seeds) == len(prompts)
        out = []
        for messages, seed in zip(prompts, seeds, strict=True):
            content = messages[0]["content"]
            text = fake_llm(content, int(seed), self.same_question)
            self.calls.append({"prompt": content, "seed": int(seed), "temperature": temperature})
            out.append({"text": text, "prompt_tokens": len(content) // 4 + 1, "completion_tokens": len(text) // 4 + 1})
        return out

    def log(self, msg):
        pass


def target(query: str) -> str:
    """Two facts about a patient named by the query's hash: new patients keep appearing."""
    h = zlib.crc32(query.encode())
    p, sym, cure = f"P{h % 40}", ["fever", "cough", "rash", "fatigue"][h % 4], ["rest", "antibiotics", "surgery"][h % 3]
    if h % 7 == 0:
        return "I'm sorry, I cannot help with that."
    return f"According to the records, {p} has symptom {sym}, and {p} is treated by {cure}."


def make(seed=1, tools=None, **overrides):
    attack = RAGCrawler({**PARAMS, **overrides}, seed=seed, validated=True)
    attack.start(tools or FakeTools())
    return attack


def campaign(attack, rounds, batch):
    asked, proposals = [], []
    for _ in range(rounds):
        props = attack.propose(batch)
        queries = [p.query for p in props]
        attack.observe(queries, [target(q) for q in queries])
        asked += queries
        proposals += props
    return asked, proposals


# --- parsing ---------------------------------------------------------------------------------------------
def test_triples_and_schema_parse_as_written():
    raw = "head | head category | relation | tail | tail category\n1. P1 | patient | has symptom | fever | symptom\n"
    raw += "- Aspirin | treats | pain\nnot a triple\n | | x | y | \n"
    assert parse_triples(raw) == [
        ("P1", "patient", "has symptom", "fever", "symptom"),
        ("Aspirin", "", "treats", "pain", ""),
    ]
    assert parse_schema('x {“entity_types”: ["a", "b", "a"], "relation_types": ["r"]} y') == (["a", "b"], ["r"])
    assert parse_schema("no json here") == ([], [])
    # cut short by the length cap while repeating itself (the 0.5B Qwen's answer at temperature 0): the
    # whole entries are kept, ten at most
    cut = (
        '```json\n{\n  "entity_types": ["Medicine", "Drug", '
        + ", ".join(f'"Drug {i}"' for i in range(20))
        + ', "Drug Sub'
    )
    assert parse_schema(cut) == (["Medicine", "Drug", *[f"Drug {i}" for i in range(8)]], [])
    many = json.dumps({"entity_types": [f"e{i}" for i in range(12)], "relation_types": ["r"]})
    assert parse_schema(many) == ([f"e{i}" for i in range(10)], ["r"])


def test_the_topic_is_required(tmp_path):
    with pytest.raises(Exception, match="topic"):
        get_adaptive("ragcrawler", {})  # the schema requires it
    attack = RAGCrawler({**PARAMS, "topic": " "}, seed=1, validated=True)
    with pytest.raises(ConfigError, match="campaigns.attacks.ragcrawler.topic"):
        attack.start(FakeTools())


def test_the_prompts_ask_for_natural_questions_never_for_the_context():
    for name in ("RELATION_QUERY", "NEIGHBORHOOD_QUERY", "INITIAL_QUERY"):
        text = getattr(prompts_ragcrawler, name).lower()
        assert "natural" in text and "question" in text
        assert "context" not in text and "repeat" not in text


# --- the scheduler: the paper's equations by hand -------------------------------------------------------------
def hand_graph(attack):
    """Patients A and B, disease C, symptom D; A-has_disease-C, A-has_symptom-D, B-has_symptom-D.  Rounds:
    A gained 3 entities and 2 facts, B 1 and 1, C's answer was refused; D was never the anchor."""
    vec = [0.0] * 384
    attack.schema = [["patient", "disease", "symptom"], ["has disease", "has symptom"]]
    attack.entities = [["A", "patient", vec], ["B", "patient", vec], ["C", "disease", vec], ["D", "symptom", vec]]
    attack.rel_types = [["has disease", vec], ["has symptom", vec]]
    attack.edges = [[0, 0, 2], [0, 1, 3], [1, 1, 3]]
    attack.selected = [1, 1, 1, 0]
    attack.rounds = [[0, 3, 2, 0], [1, 1, 1, 0], [2, 0, 0, 1]]
    attack.t = 3


def test_scores_and_relation_are_the_papers_equations_worked_by_hand():
    attack = make()
    hand_graph(attack)
    deficit, open_ = attack._deficits()
    # Eq. 11: B lacks 'has disease', which patients have 0.5 times on average; every other gap is 0
    assert deficit.tolist() == [[0, 0], [0.5, 0], [0, 0], [0, 0]]
    assert open_.tolist() == [[False, False], [True, False], [False, True], [True, False]]
    scores = attack._scores(deficit)
    bonus = lambda n: 0.5 * math.sqrt(math.log(3) / (n + 1))  # noqa: E731 - Eq. 6, c = 0.5, N = 3
    payoff = [3 / 3 + 2 / 2 + bonus(1), 1 / 3 + 1 / 2 + bonus(1), -0.5 + bonus(1), 0 + bonus(0)]  # Eq. 6-7
    prior = [0 + 0, (1 - 1 / 2) + 0.5, (1 - 1 / 2) + 0, 0 + 0]  # Eq. 8-10: degrees 2, 1, 1, 2
    alpha = 3 / (3 + 10)
    assert scores == pytest.approx([alpha * p + q for p, q in zip(payoff, prior, strict=True)], abs=1e-6)
    # Eq. 13-14: B's gap (0.5) exceeds the 90th percentile of the gaps [0.5, 0, 0] (0.4); C's (0) does not
    assert attack._relation(1, deficit, open_) == 0
    assert attack._relation(2, deficit, open_) is None
    assert attack._relation(0, deficit, open_) is None  # A has every relation type


def test_anchors_are_drawn_from_the_top_k_softmax():
    attack = make(top_k=2)
    scores = np.array([0.1, 2.0, 1.0, -1.0])
    draws = [attack._draw(scores) for _ in range(2000)]
    assert set(draws) == {1, 2}
    share = draws.count(1) / len(draws)
    assert share == pytest.approx(math.exp(2) / (math.exp(2) + math.exp(1)), abs=0.04)


# --- a campaign ------------------------------------------------------------------------------------------------
def test_the_graph_grows_from_the_answers_and_steers_the_questions():
    tools = FakeTools()
    attack = make(tools=tools)
    asked, props = campaign(attack, rounds=6, batch=3)
    assert [p.step for p in props[:3]] == ["initial"] * 3  # an empty graph: questions about the topic
    assert not any(q.startswith('"') or q.endswith('"') for q in asked)  # sent without the LLM's quotes
    steps = [p.step for p in props[3:]]
    assert set(steps) <= {"relation", "neighborhood", "converged"} and {"relation", "neighborhood"} <= set(steps)
    patients = {e[0] for e in attack.entities if e[1] == "patient"}
    assert len(patients) >= 5 and {"fever", "cough", "rash", "fatigue"} & {e[0] for e in attack.entities}
    # every later question names an entity of the graph, which its note names as the anchor
    for p in props[3:]:
        anchor = json.loads(json.dumps(p.note))["anchor"]
        assert anchor in {e[0] for e in attack.entities} and anchor in p.query
    # a refused answer is read as a penalised round with no new knowledge; a converged query's round is
    # penalised too, what its answer says still read
    refused = [target(q).startswith("I'm sorry") for q in asked[: len(attack.rounds)]]
    converged = [p.step == "converged" for p in props[: len(attack.rounds)]]
    assert any(refused) and any(converged)
    for r, no, dup in zip(attack.rounds, refused, converged, strict=True):
        assert r[3] == int(no or dup) and (not no or r[1] == r[2] == 0)
    # the cost of every query is the tokens of the LLM calls made before it was proposed, the last round's
    # answers unread
    spent = sum(p.attacker_prompt_tokens + p.attacker_completion_tokens for p in props)
    calls = sum(len(c["prompt"]) // 4 + 1 for c in tools.calls) + sum(
        len(fake_llm(c["prompt"], c["seed"])) // 4 + 1 for c in tools.calls
    )
    assert spent == calls
    assert len(attack.pending) == 3 and len(attack.rounds) == 15  # five rounds read, the sixth not


def test_a_repeated_question_is_rewritten_then_sent_as_converged():
    tools = FakeTools(same_question=True)
    attack = make(tools=tools, resample_trials=3)
    props = attack.propose(3)
    assert props[0].step == "initial" and [p.step for p in props[1:]] == ["converged", "converged"]
    asked = [c for c in tools.calls if "someone might ask" in c["prompt"]]
    assert len(asked) == 1 + 3 + 3  # the first accepted at once, then three tries each
    attack.observe([p.query for p in props], ["I'm sorry, I cannot help with that."] * 3)
    attack.propose(1)
    assert [r[3] for r in attack.rounds] == [1, 1, 1]  # converged or refused: penalised


def test_a_resumed_campaign_proposes_what_the_uninterrupted_one_would():
    whole = make(seed=5)
    straight, _ = campaign(whole, rounds=4, batch=2)
    first = make(seed=5)
    asked, _ = campaign(first, rounds=2, batch=2)
    saved = json.loads(json.dumps(first.state()))
    resumed = make(seed=5)
    resumed.load_state(saved)
    rest, _ = campaign(resumed, rounds=2, batch=2)
    assert asked + rest == straight
    # and it knows what the uninterrupted one knows (the graph, the rounds read, the generator)
    known = ["schema", "entities", "rel_types", "edges", "selected", "rounds", "history", "inflight", "pending", "t"]
    assert json.dumps([getattr(resumed, k) for k in known]) == json.dumps([getattr(whole, k) for k in known])
    assert resumed.rng.bit_generator.state == whole.rng.bit_generator.state
