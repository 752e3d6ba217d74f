"""TEST-ONLY: a toy DP defense, added to a copy of ragmi (or registered in process) the way
docs/architecture.md says a defense is added (this module, one line in ``ragmi.defenses.REGISTRY`` and
one schema entry ``$defs.defenses.toy_dp``: tests/plugin_tree.py).  It is no subclass of any of
ragmi's DP defenses: the ε audit must find it from its declared claim alone.

Broken on purpose: it claims ε per query for Laplace noise on the retrieval scores, but draws the
noise with 4ε (a quarter of the scale its claim needs), so the audit must say it exceeds its claim."""

from __future__ import annotations

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense, noisy_top_k
from .claims import RELATION_SCORES, DeclaredEpsilon


class ToyDp(CountingDefense):
    kind = "toy_dp"
    test_only = True
    stochastic = True
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    source = "test fixture: Laplace noise on the scores at a quarter of the claimed scale"

    def pool_size(self, k: int) -> int:
        return max(k, self.params["pool"])

    def epsilon_claim(self) -> DeclaredEpsilon:
        p = self.params
        return DeclaredEpsilon(
            float(p["epsilon"]),
            f"per query: Laplace(Δ/ε) on the top {p['pool']} candidates' scores, Δ = {p['sensitivity']}",
            RELATION_SCORES,
            noise_scale=float(p["sensitivity"]) / float(p["epsilon"]),
        )

    def on_retrieval(self, states, ctx):
        for s in states:  # the bug under audit: 4ε where the claim says ε
            eps = 4.0 * self.params["epsilon"]
            noisy_top_k(s, ctx.k, eps, self.params["sensitivity"], self.params["pool"], ctx.rng(self.name, s.query_id))
            self.stats["queries"] += 1
