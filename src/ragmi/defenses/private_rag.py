"""Private-RAG: a DP filter on the retrieval scores (Mind the Hook §IV, Tables I-II; "inspired by, not
reproducing" Koga et al.'s DP-RAG).

Each of the top-k documents stays in the context only if its score plus Laplace noise of scale
``sensitivity / epsilon`` exceeds ``threshold`` (kept in rank order, noisy scores released).  When
no document passes, the context is empty: the generator answers from the template alone.  The paper
gives neither the threshold nor the sensitivity; both are recorded parameters (``threshold`` 0.5 on
the retriever's score scale -- cosine for ``flat_ip`` -- and ``sensitivity`` 1.0).
docs/provenance.md#private_rag
"""

from __future__ import annotations

import numpy as np

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense, laplace_scores
from .base import select_top
from .claims import RELATION_SCORES, DeclaredEpsilon


class PrivateRag(CountingDefense):
    kind = "private_rag"
    stochastic = True
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    source = "Mind the Hook §IV Private-RAG (DP-on-scores filter inspired by Koga et al.)"
    chosen = {
        "threshold": "params.threshold (untold; default 0.5 on the retriever's score scale)",
        "sensitivity": "params.sensitivity (untold; default 1.0), noise scale sensitivity/epsilon",
        "filtered set": "the top-k retrieved documents, no backfill",
        "nothing passes": "empty context (counted in stats.empty_contexts)",
    }

    def epsilon_claim(self) -> DeclaredEpsilon:
        """ε per query, Laplace(Δ/ε) on the top-k retrieved scores and a threshold filter:
        :data:`RELATION_SCORES` with the top-k set fixed (the top-k selection itself is not noised)."""
        p = self.params
        eps = float(p["epsilon"])
        return DeclaredEpsilon(
            eps,
            f"per query: Laplace(Δ/ε) = Laplace({p['sensitivity'] / eps:g}) on the retrieved top-k scores, kept when "
            f"above {p.get('threshold')}, Δ = {p['sensitivity']}; the top-k selection is not noised; T queries "
            "spend T·ε",
            RELATION_SCORES,
            noise_scale=float(p["sensitivity"]) / eps,
            keep_threshold=float(p["threshold"]),
        )

    def on_retrieval(self, states, ctx):
        for s in states:
            ids, scores = list(s.retrieved_ids), np.asarray(s.retrieval_scores, dtype=float)
            noisy = laplace_scores(
                scores, self.params["epsilon"], self.params["sensitivity"], ctx.rng(self.name, s.query_id)
            )
            keep = np.flatnonzero(noisy > self.params["threshold"])
            select_top(s, [ids[i] for i in keep], noisy[keep], len(keep))
            self.stats["queries"] += 1
            self.stats["documents_dropped"] += len(ids) - len(keep)
            if len(keep) == 0:
                self.stats["empty_contexts"] += 1
