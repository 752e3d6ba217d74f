"""RandomEmb, a random baseline of the knowledge-extraction benchmark (Qi et al., KDD 2026,
``attacks/random.py``): DGEA's greedy token search towards a fresh random draw from public text's
embedding statistics for every query, never reading an answer (:mod:`ragmi.attacks.adaptive.dgea`
with its feedback off).  docs/provenance.md#adaptive-extraction-campaigns."""

from __future__ import annotations

from .dgea import DGEA


class RandomEmb(DGEA):
    name = "random_emb"
    baseline = True
    adaptive = False
    state_keys = ()
