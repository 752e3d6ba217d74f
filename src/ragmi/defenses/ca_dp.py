"""CA-DP: composition-aware DP over a multi-turn dialogue (Mind the Hook §IV, Tables I-II; the
authors' own reimplementation, "per-turn split", epsilon in {1, 5}).

The total budget epsilon is split evenly over T turns (``turns``): each query gets the per-turn budget
``epsilon / T`` and is answered like DP-R with it (Laplace noise of scale ``sensitivity * T / epsilon``
on the first ``pool`` candidates' scores, top k by noisy score, noisy scores released).  The paper
does not say what T is; ragmi takes it as the number of queries one attack (or conversation) spends
on one candidate document and records it.  docs/provenance.md#ca_dp
"""

from __future__ import annotations

from ._common import RETRIEVAL_DOWNSTREAM
from .dp_retrieval import DpRetrieval


class CaDp(DpRetrieval):
    kind = "ca_dp"
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    source = "Mind the Hook §IV CA-DP (composition-aware per-turn DP budget)"
    chosen = {
        "turns": "params.turns = T, queries per candidate document (untold; default 5, MEntA's budget)",
        "per-turn budget": "epsilon / T (even split, basic sequential composition)",
        "sensitivity": "params.sensitivity (untold; default 1.0)",
        "pool": "params.pool candidates noised (untold; default 20)",
    }

    @property
    def per_turn_epsilon(self) -> float:
        return self.params["epsilon"] / self.params["turns"]

    def record(self):
        r = super().record()
        r["per_turn_epsilon"] = self.per_turn_epsilon
        return r

    def noise_epsilon(self) -> float:
        return self.per_turn_epsilon
