"""Mirabel detect-and-hide (Choi et al., Alg. 1; used as a baseline detector in MEntA §C.2, Tables 7-8).

For each query, over the scores of the *whole* database ``S_q`` (``needs_all_scores``):

* ``s_max`` = max, ``d_t`` = its document; ``mu``, ``sigma`` = mean and standard deviation
  (``ddof=0``) of ``S_q`` without that one maximum; ``n = |S_q| - 1``;
* Gumbel location ``mu_n = mu + sigma*sqrt(2 ln n)`` (Alg. 1's approximation; ``mu_n: exact`` uses
  Eq. 7, ``mu + sigma*sqrt(2 ln n - ln ln n - ln 4 pi)``), scale ``beta_n = sigma / sqrt(2 ln n)``;
* ``c = -ln(-ln(1 - rho))`` (rho = 0.05 gives c = 2.970), threshold ``tau = mu_n + c * beta_n``;
* alarm iff ``s_max > tau``: ``d_t`` is hidden and the context is ranks 2..k+1 of the pool
  (backfill, ``pool_size = k + 1``); without an alarm the retrieval is left unchanged.

Per-query verdicts are kept in ``flags`` for detection metrics.  docs/provenance.md#mirabel
"""

from __future__ import annotations

import math

import numpy as np

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense, candidates
from .base import select_top


def gumbel_c(rho: float) -> float:
    """The Gumbel quantile of Mirabel's significance level rho: ``-ln(-ln(1 - rho))``."""
    if not 0.0 < rho < 1.0:
        raise ValueError(f"rho must lie in (0, 1), got {rho}")
    return -math.log(-math.log(1.0 - rho))


def threshold(scores, rho: float, exact: bool = False) -> tuple[float, float, int]:
    """(tau, s_max, argmax) for one query's whole-database scores."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or len(s) < 3:
        raise ValueError(f"Mirabel needs the scores of at least 3 documents, got {s.shape}")
    top = int(np.argmax(s))
    rest = np.delete(s, top)
    n = len(rest)
    mu, sigma = float(rest.mean()), float(rest.std(ddof=0))
    two_ln_n = 2.0 * math.log(n)
    if exact:
        radicand = two_ln_n - math.log(math.log(n)) - math.log(4.0 * math.pi)
        if radicand <= 0:
            raise ValueError(f"Mirabel's exact Eq. 7 is undefined for n = {n} documents; use mu_n: approx")
        mu_n = mu + sigma * math.sqrt(radicand)
    else:
        mu_n = mu + sigma * math.sqrt(two_ln_n)
    tau = mu_n + gumbel_c(rho) * sigma / math.sqrt(two_ln_n)
    return tau, float(s[top]), top


class Mirabel(CountingDefense):
    kind = "mirabel"
    detector = True
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    needs_all_scores = True
    source = "Mirabel (Choi et al.) Alg. 1 and detect-and-hide; MEntA §C.2 (rho = 0.05)"
    chosen = {
        "mu_n": "params.mu_n: approx (Alg. 1, default) or exact (Eq. 7)",
        "hidden document": "the whole-database argmax; the context is backfilled from pool rank k+1",
    }

    def __init__(self, name, params):
        super().__init__(name, params)
        self.flags: dict[str, bool] = {}

    def pool_size(self, k: int) -> int:
        return k + 1

    def on_retrieval(self, states, ctx):
        for s in states:
            if s.all_scores is None:
                raise RuntimeError(f"defense {self.name}: the target gave no whole-database scores")
            if len(s.all_scores) != len(ctx.doc_ids):
                raise RuntimeError(f"defense {self.name}: {len(s.all_scores)} scores for {len(ctx.doc_ids)} documents")
            tau, s_max, top = threshold(s.all_scores, self.params["rho"], self.params["mu_n"] == "exact")
            alarm = s_max > tau
            self.flags[s.query_id] = bool(alarm)
            self.stats["queries"] += 1
            if not alarm:
                continue
            self.stats["alarms"] += 1
            hidden = ctx.doc_ids[top]
            ids, scores = candidates(s)
            keep = [i for i, d in enumerate(ids) if d != hidden]
            select_top(s, [ids[i] for i in keep], scores[keep], ctx.k)
