"""Retrieval-level DP by the exponential mechanism (the MEntA artifact's ``apply_dp_retrieval``).

From the top ``pool`` candidates, k documents are drawn one at a time without replacement, each
with probability proportional to ``exp(epsilon * s / (2 * sensitivity))`` among those left.

``scores: similarity`` uses the retriever's scores (the mechanism as stated); the retriever must
return scores comparable across one query's candidates (cosine, negated L2, BM25 all are).
``scores: uniform`` is the artifact's case: its retrieval has no scores, so it uses all-ones and
the draw is a uniform random subset.  The artifact draws from the already-retrieved top-k (so it only
reorders); ``pool`` (default 20) is ragmi's choice.  The retained documents keep their retrieval
scores, in draw order.  docs/provenance.md#exp_mechanism
"""

from __future__ import annotations

import numpy as np

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense, candidates
from .base import select_top
from .claims import RELATION_UTILITY, DeclaredEpsilon


def exponential_draws(
    scores: np.ndarray, k: int, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> list[int]:
    """Indices of ``k`` sequential exponential-mechanism draws without replacement."""
    left = list(range(len(scores)))
    chosen = []
    for _ in range(min(k, len(scores))):
        u = epsilon * scores[left] / (2.0 * sensitivity)
        w = np.exp(u - u.max())
        pick = int(rng.choice(len(left), p=w / w.sum()))
        chosen.append(left.pop(pick))
    return chosen


class ExpMechanism(CountingDefense):
    kind = "exp_mechanism"
    stochastic = True
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    source = "MEntA artifact, MEntA/generate_rag_output.py apply_dp_retrieval / exponential_mechanism"
    chosen = {
        "pool": "params.pool candidates (the artifact draws from the retrieved top-k only)",
        "scores": "params.scores: similarity, or uniform (the artifact's all-ones scores)",
        "sensitivity": "params.sensitivity (the artifact's default 1.0)",
    }

    def pool_size(self, k: int) -> int:
        return max(k, self.params["pool"])

    def epsilon_claim(self) -> DeclaredEpsilon:
        """ε per exponential-mechanism draw (weights exp(ε s / 2Δ)); k draws per query compose to k·ε:
        :data:`RELATION_UTILITY`.  With ``scores: uniform`` the draw does not read the scores at all."""
        p = self.params
        uniform = " (scores: uniform: the draws do not read the scores)" if p.get("scores") == "uniform" else ""
        return DeclaredEpsilon(
            float(p["epsilon"]),
            f"per draw: exponential mechanism, weights exp(ε s / 2Δ), Δ = {p.get('sensitivity')}; k draws per "
            f"query from the top {p.get('pool')} compose to k·ε per query{uniform}",
            RELATION_UTILITY,
        )

    def on_retrieval(self, states, ctx):
        for s in states:
            ids, scores = candidates(s, self.params["pool"])
            utility = scores if self.params["scores"] == "similarity" else np.ones(len(ids))
            picks = exponential_draws(
                utility, ctx.k, self.params["epsilon"], self.params["sensitivity"], ctx.rng(self.name, s.query_id)
            )
            select_top(s, [ids[i] for i in picks], scores[picks], ctx.k)
            self.stats["queries"] += 1
