"""DP-R: Laplace noise on the retrieval scores (Mind the Hook §IV, Tables I-II; the authors' own
reimplementation, epsilon in {1, 5}).

The first ``pool`` candidates' scores get i.i.d. Laplace noise of scale ``sensitivity / epsilon``
and the context is the top k by noisy score; the released retrieval scores are the noisy ones.  The
paper gives neither the sensitivity nor the candidate set; both are recorded parameters
(``sensitivity`` 1.0, ``pool`` 20).  Only the retrieval hook acts: the paper's generation hook is
a pass-through stub, which ragmi does not declare (the tests' ``tests/plugins/stub_fixture.py`` reproduces that case).
docs/provenance.md#dp_retrieval
"""

from __future__ import annotations

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense, noisy_top_k
from .claims import RELATION_SCORES, DeclaredEpsilon


class DpRetrieval(CountingDefense):
    kind = "dp_retrieval"
    stochastic = True
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    source = "Mind the Hook §IV DP-R (Laplace noise on retrieval scores, epsilon in {1, 5})"
    chosen = {
        "sensitivity": "params.sensitivity (untold; default 1.0), noise scale sensitivity/epsilon",
        "pool": "params.pool candidates noised (untold; default 20)",
        "released scores": "the noisy scores of the selected documents",
    }

    def pool_size(self, k: int) -> int:
        return max(k, self.params["pool"])

    def noise_epsilon(self) -> float:
        """The privacy budget each query's Laplace noise is drawn with."""
        return self.params["epsilon"]

    def epsilon_claim(self) -> DeclaredEpsilon:
        """ε per query: i.i.d. Laplace(Δ/ε) on the scores of the first ``pool`` candidates
        (``_common.noisy_top_k``), the top k by noisy score, noisy scores released: ε-DP for
        :data:`RELATION_SCORES` (Laplace mechanism, then post-processing), per query; an attack sending
        T queries about one candidate spends T·ε on it."""
        p = self.params
        eps = float(p["epsilon"])
        return DeclaredEpsilon(
            eps,
            f"per query: Laplace(Δ/ε) = Laplace({p['sensitivity'] / eps:g}) on the top {p.get('pool')} candidates' "
            f"scores, Δ = {p['sensitivity']}; T queries about one candidate spend T·ε on it",
            RELATION_SCORES,
            noise_scale=float(p["sensitivity"]) / self.noise_epsilon(),
        )

    def on_retrieval(self, states, ctx):
        for s in states:
            noisy_top_k(
                s,
                ctx.k,
                self.noise_epsilon(),
                self.params["sensitivity"],
                self.params["pool"],
                ctx.rng(self.name, s.query_id),
            )
            self.stats["queries"] += 1
