"""Helpers shared by several defenses: candidate pools, Laplace noise on scores, counters.

Not a defense itself (it is not in the registry).  Provenance of the mechanisms that use these
helpers: docs/provenance.md#dp_retrieval, #ca_dp, #private_rag, and the tests' inert-hook fixture
(tests/plugins/stub_fixture.py, #stub_fixture).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .base import Defense, QueryState, select_top

# Downstream channels of a change made before generation (the prompt, hence every response channel).
PROMPT_DOWNSTREAM = ("prompt", "text", "first_token_logprobs", "token_logprobs")
CONTEXT_DOWNSTREAM = ("context",) + PROMPT_DOWNSTREAM
RETRIEVAL_DOWNSTREAM = ("retrieval_set",) + CONTEXT_DOWNSTREAM


class CountingDefense(Defense):
    """A defense that counts what it did (``stats``) and records the values it chose where its paper
    is silent (``chosen``: parameter -> why)."""

    chosen: dict = {}

    def __init__(self, name, params):
        super().__init__(name, params)
        self.stats: Counter = Counter()

    def record(self) -> dict:
        r = super().record()
        r["chosen"] = dict(self.chosen)
        r["stats"] = dict(self.stats)
        return r


def candidates(state: QueryState, limit: int | None = None) -> tuple[list, np.ndarray]:
    """The retrieval candidates of a state, best first: its pool (``pool_ids``) when the target filled
    one, else the retrieved set; at most ``limit``."""
    ids, scores = (
        (state.pool_ids, state.pool_scores) if state.pool_ids else (state.retrieved_ids, state.retrieval_scores)
    )
    if len(ids) != len(scores):
        raise ValueError(f"query {state.query_id}: {len(ids)} candidate ids but {len(scores)} scores")
    ids = list(ids)[:limit] if limit is not None else list(ids)
    return ids, np.asarray(scores[: len(ids)], dtype=float)


def laplace_scores(scores: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator) -> np.ndarray:
    """``scores`` plus i.i.d. Laplace noise of scale ``sensitivity / epsilon`` (the Laplace mechanism)."""
    return scores + rng.laplace(0.0, sensitivity / epsilon, size=len(scores))


def noisy_top_k(
    state: QueryState, k: int, epsilon: float, sensitivity: float, pool: int, rng: np.random.Generator
) -> None:
    """Report-noisy-max style retrieval: Laplace noise on the first ``pool`` candidates' scores, then
    the top ``k`` by noisy score.  The released scores are the noisy ones (what the mechanism output)."""
    ids, scores = candidates(state, pool)
    noisy = laplace_scores(scores, epsilon, sensitivity, rng)
    order = np.argsort(-noisy, kind="stable")[:k]
    select_top(state, [ids[i] for i in order], noisy[order], k)
