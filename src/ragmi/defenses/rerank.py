"""Re-ranking of the retrieved documents (MEntA §C.2 "random-shuffle re-ranking"; the MEntA
artifact's ``rerank_retrieved_docs``).  The retrieved set is unchanged; its order in the context is:

* ``shuffle``: a uniformly random permutation (the paper's setting; seeded per query here, the
  artifact's ``np.random.shuffle`` is unseeded);
* ``reverse``: reversed;
* ``score_noise``: sorted by score + N(0, sigma), sigma = 0.1.  The artifact adds the noise to
  pseudo-scores ``linspace(1.0, 0.5, k)`` (``scores: pseudo``, the default); ``scores: similarity``
  adds it to the retriever's scores instead.

Each document keeps its own retrieval score.  docs/provenance.md#rerank
"""

from __future__ import annotations

import numpy as np

from ._common import CONTEXT_DOWNSTREAM, CountingDefense
from .base import select_top


class Rerank(CountingDefense):
    kind = "rerank"
    hooks = ("retrieval",)
    channels = CONTEXT_DOWNSTREAM

    @property
    def stochastic(self) -> bool:  # shuffle and score noise draw from ctx.rng; reverse does not
        return self.params["mode"] != "reverse"

    vocabulary = ()
    source = "MEntA §C.2 re-ranking; artifact MEntA/generate_rag_output.py rerank_retrieved_docs"
    chosen = {
        "randomness": "seeded per (run seed, defense name, query id); the artifact is unseeded",
        "score_noise scores": "params.scores: pseudo (artifact, linspace(1.0, 0.5, k)) or similarity",
    }

    def order(self, scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = len(scores)
        mode = self.params["mode"]
        if mode == "shuffle":
            return rng.permutation(n)
        if mode == "reverse":
            return np.arange(n)[::-1]
        base = np.linspace(1.0, 0.5, n) if self.params["scores"] == "pseudo" else scores
        noisy = base + rng.normal(0.0, self.params["sigma"], size=n)
        return np.argsort(-noisy, kind="stable")

    def on_retrieval(self, states, ctx):
        for s in states:
            ids, scores = list(s.retrieved_ids), np.asarray(s.retrieval_scores, dtype=float)
            order = self.order(scores, ctx.rng(self.name, s.query_id))
            select_top(s, [ids[i] for i in order], scores[order], len(ids))
            self.stats["queries"] += 1
