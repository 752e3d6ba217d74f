"""Retrieval-hook defenses on hand-made candidate pools: Mirabel, rerank, exponential mechanism,
DP-R, CA-DP, Private-RAG and the stub fixture."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from ragmi.defenses import build_defense
from ragmi.defenses.base import DefenseContext, QueryState, hook_digest
from ragmi.defenses.mirabel import gumbel_c, threshold

IDS = [f"d{i}" for i in range(10)]
SCORES = [0.91, 0.62, 0.55, 0.51, 0.47, 0.44, 0.40, 0.33, 0.30, 0.21]


def ctx(k=3, seed=0, doc_ids=IDS):
    return DefenseContext(seed=seed, k=k, documents={d: f"text of {d}" for d in doc_ids})


def pool_state(qid="q", n=10, k=3, ids=IDS, scores=SCORES):
    s = QueryState(query_id=qid, query="query", pool_ids=list(ids[:n]), pool_scores=list(scores[:n]))
    s.retrieved_ids, s.retrieval_scores = list(ids[:k]), list(scores[:k])
    return s


# ---------------------------------------------------------------- Mirabel


def test_gumbel_constant_at_the_papers_rho():
    assert round(gumbel_c(0.05), 3) == 2.970
    assert gumbel_c(0.10) < gumbel_c(0.05) < gumbel_c(0.01)  # larger rho: lower threshold, more alarms
    with pytest.raises(ValueError):
        gumbel_c(1.0)


def hand_tau(scores, rho=0.05, exact=False):
    rest = sorted(scores)[:-1]
    n = len(rest)
    mu, sigma = statistics.fmean(rest), statistics.pstdev(rest)  # ddof = 0
    a = math.sqrt(2 * math.log(n))
    loc = math.sqrt(2 * math.log(n) - math.log(math.log(n)) - math.log(4 * math.pi)) if exact else a
    return mu + sigma * loc + (-math.log(-math.log(1 - rho))) * sigma / a


# A spike: d0 far above a flat database.  mu = 0.2678, sigma = 0.0444 (ddof 0), n = 9.
SPIKE = [0.90, 0.30, 0.25, 0.20, 0.35, 0.28, 0.22, 0.31, 0.26, 0.24]
# No spike: the best document is ordinary.
FLAT = [0.40, 0.30, 0.25, 0.20, 0.35, 0.28, 0.22, 0.31, 0.26, 0.24]


@pytest.mark.parametrize("scores", [SPIKE, FLAT])
@pytest.mark.parametrize("exact", [False, True])
def test_mirabel_threshold_matches_the_formula(scores, exact):
    tau, s_max, top = threshold(scores, 0.05, exact)
    assert tau == pytest.approx(hand_tau(scores, exact=exact), rel=1e-12)
    assert (s_max, top) == (max(scores), scores.index(max(scores)))
    # hand arithmetic for the spike: 0.26778 + 0.044414*2.09630 + 2.970*0.044414/2.09630 = 0.42381
    if scores is SPIKE and not exact:
        assert tau == pytest.approx(0.42381, abs=5e-5)


def order_by(scores):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [IDS[i] for i in order], [scores[i] for i in order]


def test_mirabel_hides_the_top_document_on_alarm_and_backfills_rank_k_plus_1():
    d = build_defense("mir", {"kind": "mirabel"})
    assert d.pool_size(3) == 4
    ids, scores = order_by(SPIKE)
    s = pool_state("spike", n=4, ids=ids, scores=scores)
    s.all_scores = np.array(SPIKE)
    before = hook_digest(s, "retrieval")
    d.on_retrieval([s], ctx())
    assert s.retrieved_ids == ids[1:4] == ["d4", "d7", "d1"]
    assert s.retrieval_scores == pytest.approx(scores[1:4])
    assert hook_digest(s, "retrieval") != before
    assert d.flags == {"spike": True}


def test_mirabel_leaves_the_retrieval_unchanged_without_alarm():
    d = build_defense("mir", {"kind": "mirabel"})
    ids, scores = order_by(FLAT)
    s = pool_state("flat", n=4, ids=ids, scores=scores)
    s.all_scores = np.array(FLAT)
    assert max(FLAT) < hand_tau(FLAT)
    d.on_retrieval([s], ctx())
    assert s.retrieved_ids == ids[:3] and s.retrieval_scores == pytest.approx(scores[:3])
    assert d.flags == {"flat": False}
    assert d.record()["stats"] == {"queries": 1}


def test_mirabel_rho_moves_the_alarm():
    # s_max between the rho = 0.5 and rho = 0.01 thresholds: only the permissive level alarms.
    base = [0.30, 0.25, 0.20, 0.35, 0.28, 0.22, 0.31, 0.26, 0.24]
    s_max = (hand_tau(base + [9.0], rho=0.5) + hand_tau(base + [9.0], rho=0.01)) / 2  # tau ignores the max
    scores = [s_max] + base
    assert hand_tau(scores, rho=0.5) < s_max < hand_tau(scores, rho=0.01)
    for rho, alarm in ((0.5, True), (0.01, False)):
        d = build_defense("mir", {"kind": "mirabel", "rho": rho})
        ids, sc = order_by(scores)
        s = pool_state("x", n=4, ids=ids, scores=sc)
        s.all_scores = np.array(scores)
        d.on_retrieval([s], ctx())
        assert d.flags["x"] is alarm
        assert (s.retrieved_ids[0] != "d0") is alarm


def test_mirabel_needs_whole_database_scores():
    d = build_defense("mir", {"kind": "mirabel"})
    assert d.needs_all_scores
    with pytest.raises(RuntimeError, match="whole-database scores"):
        d.on_retrieval([pool_state()], ctx())
    s = pool_state()
    s.all_scores = np.array(SPIKE[:5])
    with pytest.raises(RuntimeError, match="5 scores for 10 documents"):
        d.on_retrieval([s], ctx())
    with pytest.raises(ValueError):
        threshold([0.9, 0.1], 0.05)


# ---------------------------------------------------------------- rerank


def test_rerank_reverse_and_shuffle_keep_the_set_and_each_score():
    d = build_defense("rr", {"kind": "rerank", "mode": "reverse"})
    s = pool_state(k=4)
    d.on_retrieval([s], ctx(k=4))
    assert s.retrieved_ids == ["d3", "d2", "d1", "d0"]
    assert s.retrieval_scores == [0.51, 0.55, 0.62, 0.91]

    d = build_defense("rr", {"kind": "rerank"})
    perms = []
    for qid in ("a", "b", "c", "d", "e", "a"):
        s = pool_state(qid, k=6)
        d.on_retrieval([s], ctx(k=6))
        assert sorted(s.retrieved_ids) == IDS[:6]
        assert all(SCORES[IDS.index(i)] == sc for i, sc in zip(s.retrieved_ids, s.retrieval_scores))
        perms.append(tuple(s.retrieved_ids))
    assert perms[0] == perms[5]  # same (seed, defense, query id): same permutation
    assert len(set(perms[:5])) > 1  # different query ids: different permutations


def test_rerank_shuffle_is_seeded_by_run_seed():
    d = build_defense("rr", {"kind": "rerank"})
    outs = []
    for seed in (1, 2, 1):
        s = pool_state("same", k=8)
        d.on_retrieval([s], ctx(k=8, seed=seed))
        outs.append(tuple(s.retrieved_ids))
    assert outs[0] == outs[2] != outs[1]


def test_rerank_score_noise():
    # Negligible noise: the artifact's pseudo-scores keep the rank order; similarity scores sort.
    d = build_defense("rr", {"kind": "rerank", "mode": "score_noise", "sigma": 1e-9})
    s = pool_state(k=4)
    s.retrieved_ids, s.retrieval_scores = ["d2", "d0", "d3", "d1"], [0.55, 0.91, 0.51, 0.62]
    d.on_retrieval([s], ctx(k=4))
    assert s.retrieved_ids == ["d2", "d0", "d3", "d1"]
    d = build_defense("rs", {"kind": "rerank", "mode": "score_noise", "sigma": 1e-9, "scores": "similarity"})
    d.on_retrieval([s], ctx(k=4))
    assert s.retrieved_ids == ["d0", "d1", "d2", "d3"]
    # sigma = 0.1 on pseudo-scores 1.0 ... 0.5 (k = 2, gap 0.5): a swap needs N(0, 0.1*sqrt 2) > 0.5,
    # P = 2e-4; with k = 8 the gaps are 0.071 and swaps are frequent.
    d = build_defense("rn", {"kind": "rerank", "mode": "score_noise"})
    swaps2 = swaps8 = 0
    for i in range(300):
        s = pool_state(f"q{i}", k=2)
        d.on_retrieval([s], ctx(k=2))
        swaps2 += s.retrieved_ids != ["d0", "d1"]
        s = pool_state(f"q{i}", k=8)
        d.on_retrieval([s], ctx(k=8))
        swaps8 += s.retrieved_ids != IDS[:8]
    assert swaps2 <= 2 and swaps8 > 250


# ---------------------------------------------------------------- exponential mechanism


def test_exp_mechanism_selection_probability():
    # Pool of two, k = 1, scores 1 and 0, epsilon = 2, sensitivity 1: P(d0) = e / (e + 1) = 0.7311.
    d = build_defense("em", {"kind": "exp_mechanism", "epsilon": 2.0, "pool": 2})
    hits = 0
    n = 3000
    for i in range(n):
        s = pool_state(f"q{i}", n=2, k=1, scores=[1.0, 0.0])
        d.on_retrieval([s], ctx(k=1))
        hits += s.retrieved_ids == ["d0"]
    p = math.e / (math.e + 1)
    assert abs(hits / n - p) < 4 * math.sqrt(p * (1 - p) / n)


def test_exp_mechanism_draws_k_distinct_from_the_pool():
    d = build_defense("em", {"kind": "exp_mechanism", "pool": 6, "scores": "uniform"})
    assert d.pool_size(3) == 6 and d.pool_size(8) == 8
    seen = set()
    for i in range(200):
        s = pool_state(f"q{i}")
        d.on_retrieval([s], ctx())
        assert len(s.retrieved_ids) == 3 == len(set(s.retrieved_ids))
        assert set(s.retrieved_ids) <= set(IDS[:6])
        assert s.retrieval_scores == [SCORES[IDS.index(x)] for x in s.retrieved_ids]
        seen.update(s.retrieved_ids)
    assert seen == set(IDS[:6])  # uniform over the pool: every candidate is drawn sometimes
    # A huge epsilon: the draws follow the scores.
    d = build_defense("em", {"kind": "exp_mechanism", "pool": 6, "epsilon": 1e6})
    s = pool_state("z")
    d.on_retrieval([s], ctx())
    assert s.retrieved_ids == ["d0", "d1", "d2"]


# ---------------------------------------------------------------- Laplace score noise: DP-R, CA-DP


def mean_abs_noise(kind, n=3000, **params):
    d = build_defense("dp", {"kind": kind, "pool": 1, **params})
    total = 0.0
    for i in range(n):
        s = pool_state(f"q{i}", n=1, k=1)
        d.on_retrieval([s], ctx(k=1))
        total += abs(s.retrieval_scores[0] - SCORES[0])
    return total / n


def test_dp_retrieval_laplace_scale_is_sensitivity_over_epsilon():
    # E|Laplace(b)| = b; over 3000 draws the standard error is b/sqrt(3000) = 1.8% of b.
    assert mean_abs_noise("dp_retrieval", epsilon=1.0) == pytest.approx(1.0, rel=0.08)
    assert mean_abs_noise("dp_retrieval", epsilon=5.0) == pytest.approx(0.2, rel=0.08)
    assert mean_abs_noise("dp_retrieval", epsilon=5.0, sensitivity=2.0) == pytest.approx(0.4, rel=0.08)


def test_ca_dp_spends_epsilon_over_turns():
    # epsilon 5 over 5 turns: per-turn epsilon 1, scale 1 (DP-R at epsilon 5 would be 0.2).
    assert mean_abs_noise("ca_dp", epsilon=5.0, turns=5) == pytest.approx(1.0, rel=0.08)
    assert mean_abs_noise("ca_dp", epsilon=5.0, turns=1) == pytest.approx(0.2, rel=0.08)


@pytest.mark.parametrize("kind", ["dp_retrieval", "ca_dp", "stub_fixture"])
def test_noisy_top_k_selects_by_noisy_score_from_the_pool(kind, stub_defense):
    d = build_defense("dp", {"kind": kind, "epsilon": 1.0, "pool": 10})
    assert d.pool_size(3) == 10
    sets = set()
    for qid in ("a", "b", "c", "d", "a"):
        s = pool_state(qid)
        before = hook_digest(s, "retrieval")
        d.on_retrieval([s], ctx())
        assert len(s.retrieved_ids) == 3 and set(s.retrieved_ids) <= set(IDS)
        assert s.retrieval_scores == sorted(s.retrieval_scores, reverse=True)  # ranked by the noisy score
        assert hook_digest(s, "retrieval") != before
        sets.add(tuple(s.retrieved_ids))
    assert len(sets) > 1
    # Same (seed, defense, query id): same output.
    a, b = pool_state("a"), pool_state("a")
    d.on_retrieval([a], ctx())
    d.on_retrieval([b], ctx())
    assert (a.retrieved_ids, a.retrieval_scores) == (b.retrieved_ids, b.retrieval_scores)
    # Vanishing noise: the undefended top-k.
    d = build_defense("dp", {"kind": kind, "epsilon": 1e9, "pool": 10})
    s = pool_state("x")
    d.on_retrieval([s], ctx())
    assert s.retrieved_ids == IDS[:3]


# ---------------------------------------------------------------- Private-RAG


def test_private_rag_filters_by_noisy_score_and_may_empty_the_context():
    d = build_defense("pr", {"kind": "private_rag", "epsilon": 1e9, "threshold": 0.6})
    s = pool_state(k=4)
    d.on_retrieval([s], ctx(k=4))
    assert s.retrieved_ids == ["d0", "d1"]  # 0.91 and 0.62 pass, 0.55 and 0.51 do not
    d = build_defense("pr", {"kind": "private_rag", "epsilon": 1e9, "threshold": 0.95})
    s = pool_state(k=4)
    d.on_retrieval([s], ctx(k=4))
    assert s.retrieved_ids == [] and s.retrieval_scores == []
    assert d.record()["stats"] == {"queries": 1, "documents_dropped": 4, "empty_contexts": 1}


def test_private_rag_keep_rate():
    # Score exactly at the threshold: Laplace noise > 0 with probability 1/2.
    d = build_defense("pr", {"kind": "private_rag", "epsilon": 1.0, "threshold": 0.91})
    kept = 0
    n = 2000
    for i in range(n):
        s = pool_state(f"q{i}", k=1)
        d.on_retrieval([s], ctx(k=1))
        kept += len(s.retrieved_ids)
    assert abs(kept / n - 0.5) < 4 * math.sqrt(0.25 / n)
    # Score 1 below the threshold at scale 1: P = exp(-1) / 2 = 0.184.
    d = build_defense("pr", {"kind": "private_rag", "epsilon": 1.0, "threshold": 1.91})
    kept = 0
    for i in range(n):
        s = pool_state(f"q{i}", k=1)
        d.on_retrieval([s], ctx(k=1))
        kept += len(s.retrieved_ids)
    p = math.exp(-1) / 2
    assert abs(kept / n - p) < 4 * math.sqrt(p * (1 - p) / n)


# ---------------------------------------------------------------- stub fixture


def test_stub_fixture_output_hook_is_a_pass_through(stub_defense):
    d = build_defense("stub", {"kind": "stub_fixture"})
    assert d.test_only and set(d.hooks) == {"retrieval", "output"} and "text" in d.channels
    s = pool_state()
    s.response = {
        "response_text": "Alice's e-mail is a@b.org",
        "first_token_logprobs": [{"token": "A", "logprob": -0.1}],
        "token_logprobs": [-0.1, -0.2],
    }
    before = hook_digest(s, "output")
    original = dict(s.response)
    d.on_output([s], ctx())
    assert hook_digest(s, "output") == before and s.response == original


def test_ca_dp_takes_t_from_the_attack_that_queries_the_target():
    """T is the number of queries the attack spends on one candidate (docs/provenance.md#ca_dp), not a
    constant: MEntA-like five queries per candidate give epsilon/5, a one-query attack DP-R itself."""
    import pandas as pd

    from ragmi.defenses import build_defense
    from ragmi.defenses.ca_dp import queries_per_candidate

    five = pd.DataFrame({"doc_id": [f"d{i // 5}" for i in range(20)]})
    one = pd.DataFrame({"doc_id": [f"d{i}" for i in range(20)]})
    assert queries_per_candidate(five) == 5 and queries_per_candidate(one) == 1
    d = build_defense("c", {"kind": "ca_dp", "epsilon": 5.0})
    assert d.params["turns"] == "attack" and d.reads_attack_queries
    d.see_attack_queries({"attack menta": five})
    rec = d.record()
    assert rec["turns"] == 5 and rec["per_turn_epsilon"] == 1.0 and "menta" in rec["turns_source"]
    d = build_defense("c", {"kind": "ca_dp", "epsilon": 5.0})
    d.see_attack_queries({"attack rag_mia": one})
    assert d.per_turn_epsilon == 5.0  # one turn: nothing to compose
    fixed = build_defense("c", {"kind": "ca_dp", "epsilon": 5.0, "turns": 10})
    fixed.see_attack_queries({"attack menta": five})
    assert fixed.per_turn_epsilon == 0.5 and fixed.record()["turns_source"] == "params.turns"
    # the audit's probes see every attack's queries: the largest T, named
    d = build_defense("c", {"kind": "ca_dp", "epsilon": 5.0})
    d.see_attack_queries({"probes, as one": one, "probes, as five": five})
    assert d.turns == 5 and d.record()["turns_source"] == "probes, as five: 5 queries per candidate"
    assert not build_defense("p", {"kind": "dp_retrieval"}).reads_attack_queries
    from ragmi.defenses.base import Defense

    class Forgot(Defense):  # declares it reads the attack's queries but has no way to
        reads_attack_queries = True

    with pytest.raises(NotImplementedError, match="declares reads_attack_queries"):
        Forgot("f", {}).see_attack_queries({"attack x": five})


def test_the_paper_config_measures_ca_dp_turns_per_attack():
    from pathlib import Path

    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/paper/mind_the_hook.yaml").read_text())
    ca = {n: d for n, d in cfg["defenses"].items() if d["kind"] == "ca_dp"}
    assert len(ca) == 2 and all(d.get("turns") == "attack" for d in ca.values())
