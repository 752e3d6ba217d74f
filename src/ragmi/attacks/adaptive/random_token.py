"""RandomToken, a random baseline of the knowledge-extraction benchmark (Qi et al., KDD 2026,
``attacks/random.py``): each query is the repeat command with ``pool_size`` tokens of the attacker
embedder's vocabulary, drawn at random and joined by spaces, as the information to ignore.  It never
reads an answer.  docs/provenance.md#adaptive-extraction-campaigns."""

from __future__ import annotations

from .base import AdaptiveAttack, Proposal
from .embedding_space import AttackerEmbedder
from .prompts import REPEAT_TEMPLATE


class RandomToken(AdaptiveAttack):
    name = "random_token"
    baseline = True
    embedder_param = "embedder"

    @classmethod
    def work(cls, params):
        return 60.0 + params["pool_size"] * 6.0, 0.0, 0.0, 0.0  # the repeat command and the random tokens

    def start(self, tools) -> None:
        super().start(tools)
        self.words = AttackerEmbedder(self.params["embedder"]).token_words(self.params["allow_non_ascii"])

    def propose(self, n: int) -> list[Proposal]:
        out = []
        for _ in range(n):
            pick = self.rng.choice(len(self.words), size=min(self.params["pool_size"], len(self.words)), replace=False)
            info = " ".join(self.words[int(i)] for i in pick)
            out.append(Proposal(REPEAT_TEMPLATE.replace("<info>", info), step="random"))
        return out
