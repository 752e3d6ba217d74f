"""ragmi.costs on hand-made frames; every expected number is worked out by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragmi.costs import (
    COST_COLUMNS,
    COST_LABELS,
    costs_by_variant,
    no_answer_rate,
    no_yes_no_rate,
    offline_costs,
    query_costs,
    variant_queries,
)

# Four candidates: c1, c3 members; c2, c4 non-members. c4 has no query at all.
LABELS = {"c1": 1, "c2": 0, "c3": 1, "c4": 0}


@pytest.fixture
def queries():
    return pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5"],
            "doc_id": ["c1", "c1", "c2", "c3", "c3"],
            "ask_order": [0, 1, 0, 0, 1],
            "template": [2, 3, 2, 2, 3],
        }
    )


@pytest.fixture
def responses():
    return pd.DataFrame(
        {
            "query_id": ["q1", "q2", "q3", "q4", "q5", "other"],  # "other": a query of another attack
            "prompt_tokens": [100, 120, 90, 110, 80, 999],
            "completion_tokens": [5, 7, 3, 4, 1, 999],
            "retrieved_ids": [["c1", "x"], ["x", "y"], ["c1"], ["c3"], ["y"], ["c1"]],
        }
    )


def test_query_costs_by_hand(queries, responses):
    c = query_costs(queries, responses, LABELS)
    assert list(c) == [
        "queries_per_candidate",
        "prompt_tokens_per_candidate",
        "output_tokens_per_candidate",
        "candidate_retrieved_rate",
    ]
    assert c["queries_per_candidate"] == 5 / 4  # 5 queries over 4 candidates (c4 spent nothing)
    assert c["prompt_tokens_per_candidate"] == (100 + 120 + 90 + 110 + 80) / 4  # 125.0
    assert c["output_tokens_per_candidate"] == (5 + 7 + 3 + 4 + 1) / 4  # 5.0
    # member queries q1 (c1 retrieved), q2 (not), q4 (c3 retrieved), q5 (not); q3 is a non-member's
    assert c["candidate_retrieved_rate"] == 2 / 4


def test_query_costs_without_member_queries_has_no_retrieved_rate(queries, responses):
    c = query_costs(queries[queries["doc_id"] == "c2"], responses, LABELS)
    assert c["queries_per_candidate"] == 1 / 4 and c["prompt_tokens_per_candidate"] == 90 / 4
    assert math.isnan(c["candidate_retrieved_rate"])


def test_query_costs_reject_two_responses_to_one_query(queries, responses):
    doubled = pd.concat([responses, responses.iloc[:1]], ignore_index=True)
    with pytest.raises(pd.errors.MergeError):
        query_costs(queries, doubled, LABELS)


def test_offline_costs_by_hand():
    materials = pd.DataFrame(
        {
            "doc_id": ["c1", "c1", "c2", "c3"],
            "llm_prompt_tokens": [40.0, 60.0, 50.0, np.nan],
            "llm_completion_tokens": [10.0, np.nan, 20.0, 20.0],
            "parse_failed": [False, True, None, False],
            "llm_failure": [True, True, True, True],  # ignored: parse_failed comes first
        }
    )
    c = offline_costs(materials, n_candidates=4)
    assert c["attacker_llm_tokens_per_candidate"] == (40 + 60 + 50 + 10 + 20 + 20) / 4  # 50.0
    assert c["prepare_failure_rate"] == 1 / 4  # only c1 has a failed row
    only_llm = offline_costs(materials.drop(columns="parse_failed"), n_candidates=4)
    assert only_llm["prepare_failure_rate"] == 3 / 4  # c1, c2, c3
    tokens_only = offline_costs(materials[["doc_id", "llm_prompt_tokens"]], n_candidates=5)
    assert tokens_only == {"attacker_llm_tokens_per_candidate": 150 / 5}


def test_offline_costs_without_materials():
    assert offline_costs(None, 4) == {}
    assert offline_costs(pd.DataFrame(columns=["doc_id", "llm_prompt_tokens"]), 4) == {}


def test_no_answer_rate_counts_eval_rows_only():
    g = pd.DataFrame({"role": ["eval", "eval", "eval", "reference"], "no_answer": [True, False, False, True]})
    assert no_answer_rate(g) == {"no_answer_rate": 1 / 3}
    assert no_answer_rate(g.drop(columns="no_answer")) == {}


def test_variant_queries(queries):
    assert list(variant_queries(queries, "ia/paper/n=1")["query_id"]) == ["q1", "q3", "q4"]  # ask_order < 1
    assert list(variant_queries(queries, "ia/paper/n=2")["query_id"]) == ["q1", "q2", "q3", "q4", "q5"]
    assert list(variant_queries(queries, "rag_mia/gray/t3")["query_id"]) == ["q2", "q5"]
    assert len(variant_queries(queries, "ia/paper")) == 5
    assert len(variant_queries(queries.drop(columns="ask_order"), "ia/paper/n=1")) == 5


def test_costs_by_variant(queries, responses):
    scores = pd.DataFrame(
        {
            "variant": ["ia/paper/n=1"] * 2 + ["rag_mia/black/t2"] * 3,
            "doc_id": ["c1", "c2", "c1", "c2", "c3"],
            "role": ["eval", "eval", "eval", "eval", "reference"],
            "no_answer": [np.nan, np.nan, 1.0, 0.0, 1.0],
        }
    )
    materials = pd.DataFrame({"doc_id": ["c1"], "llm_prompt_tokens": [8], "llm_completion_tokens": [4]})
    costs = costs_by_variant(scores, queries, responses, materials, LABELS)
    assert list(costs) == ["ia/paper/n=1", "rag_mia/black/t2"]
    budget = costs["ia/paper/n=1"]
    assert list(budget) == [
        "queries_per_candidate",
        "prompt_tokens_per_candidate",
        "output_tokens_per_candidate",
        "candidate_retrieved_rate",
        "no_answer_rate",
        "attacker_llm_tokens_per_candidate",
    ]
    assert budget["queries_per_candidate"] == 3 / 4  # q1, q3, q4
    assert budget["prompt_tokens_per_candidate"] == (100 + 90 + 110) / 4
    assert budget["candidate_retrieved_rate"] == 1.0  # q1 and q4 retrieve their member candidate
    assert math.isnan(budget["no_answer_rate"])
    assert budget["attacker_llm_tokens_per_candidate"] == 12 / 4
    t2 = costs["rag_mia/black/t2"]
    assert t2["queries_per_candidate"] == 3 / 4  # template 2: q1, q3, q4
    assert t2["no_answer_rate"] == 1 / 2  # eval rows 1.0 and 0.0; the reference row does not count


def test_cost_columns_are_labelled_once():
    assert COST_COLUMNS == tuple(COST_LABELS)
    assert COST_LABELS["queries_per_candidate"] == "queries/candidate"
    assert COST_LABELS["candidate_retrieved_rate"] == "candidate retrieved"
    assert not [c for c in COST_COLUMNS if "target" in c]  # target = the RAG system, not a document


def test_no_yes_no_rate_counts_eval_answers_without_a_yes_no_token():
    """Share of evaluation answers with no Yes/No among the top-K tokens of any position (P(Yes) read
    at the floor); variants that read no log-probabilities (all missing) get no such column."""
    g = pd.DataFrame(
        {"role": ["eval", "eval", "eval", "eval", "reference"], "no_yes_no": [True, False, False, False, True]}
    )
    assert no_yes_no_rate(g) == {"no_yes_no_rate": 1 / 4}
    assert no_yes_no_rate(g.assign(no_yes_no=[None] * 5)) == {}  # e.g. rag_mia/black after parquet
    assert no_yes_no_rate(g.assign(no_yes_no=[pd.NA] * 5)) == {}
    assert no_yes_no_rate(g.drop(columns="no_yes_no")) == {}
    assert COST_LABELS["no_yes_no_rate"] == "no Yes/No in top-K"
    scores = g.assign(variant="rag_mia/gray/t2", doc_id=["c1", "c2", "c3", "c4", "c1"])
    costs = costs_by_variant(
        scores,
        pd.DataFrame(columns=["query_id", "doc_id"]),
        pd.DataFrame(columns=["query_id", "prompt_tokens", "completion_tokens", "retrieved_ids"]),
        None,
        LABELS,
    )
    assert costs["rag_mia/gray/t2"]["no_yes_no_rate"] == 1 / 4


def test_an_attack_without_any_query_costs_nothing():
    # no query was written (e.g. no parsed question): no shard, an empty response frame
    from ragmi.costs import costs_by_variant
    from ragmi.workflow import read_responses

    scores = pd.DataFrame({"doc_id": ["a", "b"], "variant": "menta/similarity", "role": "eval", "score": -1.0})
    queries = pd.DataFrame(
        {c: pd.Series(dtype=object) for c in ["query_id", "doc_id", "user_prompt", "max_tokens", "top_logprobs"]}
    )
    costs = costs_by_variant(scores, queries, read_responses([]), None, {"a": 1, "b": 0})
    row = costs["menta/similarity"]
    assert row["queries_per_candidate"] == 0
    assert row["prompt_tokens_per_candidate"] == 0
