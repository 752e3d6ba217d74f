"""DGEA, the Dynamic Greedy Embedding Attack (Cohen et al., arXiv 2409.08045), as the knowledge-extraction
benchmark runs it (Qi et al., KDD 2026, ``attacks/dgea.py``; docs/provenance.md#adaptive-extraction-campaigns).

Each query is the repeat command followed by 20 information tokens to ignore.  Its target vector: for
the first query (and while nothing was extracted) a random draw from public text's embedding
statistics; afterwards a vector pointing away from the centroid of everything extracted so far
(:func:`~ragmi.attacks.adaptive.embedding_space.farthest_vector`).  The information tokens are then
moved towards the target by greedy token search in the attacker's embedder
(:func:`~ragmi.attacks.adaptive.embedding_space.greedy_token_search`).  Every piece of context an answer
repeats (:func:`ragmi.attacks.adaptive.answers.segments`) joins the extracted set.

White box or black box: ``embedder: target`` is the target retriever's own embedder (the attacker
knows which model the retriever uses: the benchmark's white-box DGEA); any other embedder name is the
black-box form.  The variant (``dgea/white``, ``dgea/black``) says which one ran.

``adaptive: false`` is the benchmark's RandomEmb baseline (:mod:`ragmi.attacks.adaptive.random_emb`):
every target is a random draw and the answers are never read.
"""

from __future__ import annotations

import numpy as np

from .answers import segments
from .base import AdaptiveAttack, Proposal
from .embedding_space import AttackerEmbedder, farthest_vector, greedy_token_search, public_statistics
from .prompts import DGEA_START_INFO, REPEAT_TEMPLATE


class DGEA(AdaptiveAttack):
    name = "dgea"
    embedder_param = "embedder"
    adaptive = True
    state_keys = ("extracted",)

    @classmethod
    def work(cls, params):
        return 60.0 + 20 * 5.0, 0.0, 0.0, 0.0  # the repeat command and 20 tokens of about 5 characters

    @classmethod
    def variant(cls, params, retriever_embedder):
        if not cls.adaptive:
            return cls.name
        white = params["embedder"] in ("target", retriever_embedder)
        return f"{cls.name}/{'white' if white else 'black'}"

    def start(self, tools) -> None:
        super().start(tools)
        self.embedder = AttackerEmbedder(self.params["embedder"])
        self.mean, self.var = public_statistics(self.embedder, self.params["embedding_statistics"])
        self.start_ids = self.embedder.encode_ids(DGEA_START_INFO)
        self.extracted: list[list] = []  # [text, embedding] of every distinct piece extracted so far

    def _target(self) -> np.ndarray:
        if not self.adaptive or not self.extracted:
            return self.rng.normal(self.mean, np.sqrt(self.var))
        space = np.array([e for _, e in self.extracted], dtype=np.float64)
        return farthest_vector(space, self.rng, self.params["far_steps"])

    def propose(self, n: int) -> list[Proposal]:
        out = []
        for i in range(n):
            info, cos = greedy_token_search(
                self.embedder,
                REPEAT_TEMPLATE,
                self.start_ids,
                self._target(),
                iterations=self.params["iterations"],
                pool_size=self.params["pool_size"],
                allow_non_ascii=self.params["allow_non_ascii"],
                rng=self.rng,
            )
            out.append(Proposal(REPEAT_TEMPLATE.replace("<info>", info), step="search", note={"cosine": round(cos, 4)}))
            # the search takes seconds a query on a CPU: a line each, so that a run's console is not silent
            self.log(f"{self.name}: query {i + 1} of {n} of this round written (cosine {cos:.3f} with its target)")
        return out

    def observe(self, queries: list[str], answers: list[str]) -> None:
        if not self.adaptive:
            return
        seen = {t for t, _ in self.extracted}
        pieces = [p for a in answers for p in segments(a) if p not in seen]
        pieces = list(dict.fromkeys(pieces))
        if pieces:
            vecs = self.embedder.embed(pieces)
            self.extracted += [[p, [float(x) for x in v]] for p, v in zip(pieces, vecs, strict=True)]
