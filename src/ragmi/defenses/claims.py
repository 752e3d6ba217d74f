"""What a DP defense claims: its ε, how it is spent, the neighbouring relation the claim is for, and
how the ε audit (:mod:`ragmi.epsilon_audit`) can drive its hook.  A defense declares its claim with
:meth:`ragmi.defenses.base.Defense.epsilon_claim`; the audit lists every defense that declares one
and drives every one that declares a Laplace score trial, with no other edit (docs/audit.md)."""

from __future__ import annotations

from typing import NamedTuple

# Neighbouring relations (what the two inputs of a DP guarantee, or of an audit's trials, are)
RELATION_DOCUMENT = "document presence: retrieval databases differing by one document (added or removed)"
RELATION_SCORES = (
    "per-query retrieval scores: one query's candidate score vectors differing by at most the "
    "sensitivity in L1 norm, the candidate set fixed (not document presence)"
)
RELATION_UTILITY = (
    "per-draw retrieval utilities: every candidate's score moved by at most the sensitivity, the "
    "candidate pool fixed (not document presence)"
)
RELATION_NONE = (
    "none: dropping tokens is not ε-DP under any relation on responses (a token present in one "
    "response and absent from the other can appear only in the first's output; not document presence)"
)


class DeclaredEpsilon(NamedTuple):
    """A defense's claimed ε, how it is spent (``accounting``, in words) and the neighbouring
    ``relation`` the claim is for (one of the ``RELATION_*`` constants).

    ``per_candidate``: ε covers the T queries an attack sends about one candidate (ε/T each; the
    defense then has ``declared_turns`` and ``set_turns(T, source)``, as CA-DP), else ε is per query.
    ``noise_scale``: the scale of the i.i.d. Laplace noise its retrieval hook adds to each candidate's
    score per query (Δ / the per-query ε), when it is such a mechanism under :data:`RELATION_SCORES`:
    the audit then drives the hook on neighbouring score vectors; None: no hook trial.
    ``keep_threshold``: a score a noisy candidate must exceed to be released (None: all are)."""

    claimed_eps: float
    accounting: str
    relation: str
    per_candidate: bool = False
    noise_scale: float | None = None
    keep_threshold: float | None = None
