"""Empirical lower bounds on ε: does a defense that claims ε-differential privacy behave like one?

DP auditing (Jagielski, Ullman & Oprea, NeurIPS 2020, "Auditing Differentially Private Machine
Learning: How Private is Private SGD?"; Nasr, Song, Thakurta, Papernot & Carlini, IEEE S&P 2021,
"Adversary Instantiation: Lower Bounds for Differentially Private Machine Learning"): if a
mechanism M is ε-DP (δ = 0) for a neighbouring relation, every test T on its output satisfies, for
every pair of neighbouring inputs (D1, D0),

    TPR <= e^ε FPR   and   1 - FPR <= e^ε (1 - TPR),

where TPR = P[T fires on M(D1)] and FPR = P[T fires on M(D0)].  Observing T on n1 runs of M(D1) and
n0 runs of M(D0) gives counts; one-sided Clopper-Pearson bounds (a lower bound TPR_lo on TPR, an
upper bound FPR_hi on FPR) turn either inequality into a lower bound on ε:

    ε >= ε_lb = max( ln(TPR_lo / FPR_hi),  ln((1 - FPR_hi) / (1 - TPR_lo)) ),   clipped at 0.

(The second ratio's bounds are the same two: a lower bound on 1 - FPR is 1 - FPR_hi, an upper
bound on 1 - TPR is 1 - TPR_lo.)

Confidence (:func:`epsilon_lower_bound`): with K thresholds ``score >= t`` each giving one test, the
2K one-sided bounds are each taken at level 1 - β, β = (1 - confidence) / (2K) (Bonferroni).  By the
union bound all 2K hold together with probability >= ``confidence``, so the maximum over thresholds
and over both ratios is a lower bound on the true ε with probability >= ``confidence``.  This
requires that the thresholds were chosen without the trials they are applied to (on reference
data, or on a separate batch of runs: :func:`reference_thresholds`), that the runs of each side are
i.i.d., and that the mechanism is pure ε-DP (every DP defense of ragmi adds Laplace noise or draws
from an exponential mechanism: δ = 0).

What a bound measures depends on what the two inputs are.  A document-level membership attack
compares a retrieval database with a document and one without it: its TPR/FPR bound ε for the
relation :data:`RELATION_DOCUMENT` ("document presence").  None of the DP defenses of ragmi claims
that relation (:func:`declared_epsilon`): DP-R, CA-DP and Private-RAG add Laplace noise to the
retrieval scores of one query's candidates, so their ε holds between score vectors that differ by at
most the sensitivity (:data:`RELATION_SCORES`) with the candidate set fixed; the exponential
mechanism's holds per draw between utility vectors (:data:`RELATION_UTILITY`); the DP-style output
perturbation is not ε-DP for any relation (:data:`RELATION_NONE`).  Adding a document changes the
candidate set itself (it can enter the context, where an absent one never can), which no bounded
change of scores describes, so a membership attack's ε_lb says nothing about those claims:
:func:`audit_row` prints "bound not comparable" instead of a flag.  A bound is compared with a
claim only when its trials follow the claim's relation (:func:`audit_row`'s ``bound_relation``), as
the known-answer test does (``tests/test_epsilon_audit.py``: two score vectors one sensitivity
apart, the real DP-R retrieval hook run thousands of times).  A document-level bound for a defense
that did claim document presence would further be approximate: the candidates of one run share a
database, so their outcomes are not independent runs (Steinke, Nasr & Jagielski, NeurIPS 2023,
"Privacy Auditing with One (1) Training Run", treat that case).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .metrics import clopper_pearson, fpr_estimable, threshold_at_fpr

CONFIDENCE = 0.95

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

# Verdicts of :func:`audit_row`
EXCEEDED = "ε exceeded"
CONSISTENT = "consistent"
NOT_COMPARABLE = "bound not comparable"
NO_CLAIM = "no ε declared"

AUDIT_COLUMNS = [
    "defense",
    "claimed_eps",
    "accounting",
    "relation",
    "bound_relation",
    "comparable",
    "eps_lb",
    "confidence",
    "threshold",
    "tpr",
    "fpr",
    "tpr_lo",
    "fpr_hi",
    "n_members",
    "n_nonmembers",
    "flagged",
    "verdict",
]


# --------------------------------------------------------------------------------------------
# The bound
# --------------------------------------------------------------------------------------------
def one_sided_bounds(k: int, n: int, beta: float) -> tuple[float, float]:
    """``(lower, upper)``: the one-sided Clopper-Pearson bounds of a proportion with ``k``
    successes out of ``n``, each at confidence ``1 - beta`` on its own: the ends of the two-sided
    ``1 - 2 beta`` interval of :func:`ragmi.metrics.clopper_pearson` (the ``beta`` quantile of
    Beta(k, n - k + 1), 0 when k = 0; the ``1 - beta`` quantile of Beta(k + 1, n - k), 1 when
    k = n).  0 of n gives the upper bound ``1 - beta ** (1 / n)``."""
    if not 0 < beta < 0.5:
        raise ValueError(f"beta must lie in (0, 0.5), got {beta}")
    return clopper_pearson(int(k), int(n), alpha=2 * beta)


def reference_thresholds(
    ref_nonmember_scores: Sequence[float], fprs: Sequence[float] = (0.1, 0.05, 0.01)
) -> list[float]:
    """Thresholds for :func:`epsilon_lower_bound`, chosen on *reference* non-member scores (never on
    the trials they are applied to): :func:`ragmi.metrics.threshold_at_fpr` at each level of
    ``fprs`` that the reference set resolves (:func:`ragmi.metrics.fpr_estimable`), distinct, in
    the order of ``fprs``.  Raises ``ValueError`` when no level is resolvable.  Each threshold costs
    confidence (the Bonferroni split), so a few levels are better than many."""
    s = np.asarray(ref_nonmember_scores, dtype=float)
    out: list[float] = []
    for f in fprs:
        if fpr_estimable(f, s.size):
            t = threshold_at_fpr(s, f)
            if t not in out:
                out.append(t)
    if not out:
        raise ValueError(f"{s.size} reference non-members resolve none of the FPR levels {list(fprs)}")
    return out


def epsilon_lower_bound(
    member_scores: Sequence[float],
    nonmember_scores: Sequence[float],
    thresholds: Sequence[float],
    confidence: float = CONFIDENCE,
) -> dict:
    """A lower bound on ε from a distinguishing test's scores (module docstring).

    ``member_scores``: the test's score on each run with the element present (D1), higher = more
    "present"; ``nonmember_scores``: on each run without it (D0).  ``thresholds``: the rules
    ``score >= t`` to try, chosen beforehand on other data (:func:`reference_thresholds`); the
    function never picks a threshold from these scores.  Duplicate thresholds count once; K is the
    number of distinct ones.

    Each threshold's TPR_lo and FPR_hi are one-sided Clopper-Pearson bounds at level 1 - β,
    β = (1 - ``confidence``) / (2K) (:func:`one_sided_bounds`), and its bound is
    ``max(ln(TPR_lo / FPR_hi), ln((1 - FPR_hi) / (1 - TPR_lo)))`` (ln 0 = -inf).  ``eps_lb`` is the
    largest over the thresholds, clipped at 0.  Claim: for a pure ε-DP mechanism whose two inputs are
    neighbours, with i.i.d. runs on each side and thresholds fixed in advance,
    P(eps_lb > ε) <= 1 - ``confidence``.

    Returns ``eps_lb``, ``threshold`` (the one attaining it; the first of ties, in the given order),
    ``ratio`` (``"tpr/fpr"`` or ``"(1-fpr)/(1-tpr)"``), ``tpr`` / ``fpr`` (the point rates there),
    ``tpr_lo`` / ``fpr_hi`` (their bounds), ``n_members``, ``n_nonmembers``, ``n_thresholds`` (K),
    ``confidence`` (the joint confidence claimed, after the correction) and
    ``per_bound_confidence`` (1 - β).  Raises ``ValueError`` on empty or non-finite inputs."""
    m = np.asarray(member_scores, dtype=float).reshape(-1)
    n = np.asarray(nonmember_scores, dtype=float).reshape(-1)
    ts = list(dict.fromkeys(float(t) for t in thresholds))
    if m.size == 0 or n.size == 0:
        raise ValueError(f"need member and non-member scores, got {m.size} and {n.size}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(n))):
        raise ValueError("scores contain NaN or infinite values")
    if not ts:
        raise ValueError("no thresholds: choose them on reference data (reference_thresholds)")
    if any(t != t for t in ts):
        raise ValueError("a threshold is NaN")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    beta = (1.0 - confidence) / (2 * len(ts))
    best: dict | None = None
    for t in ts:
        tp, fp = int((m >= t).sum()), int((n >= t).sum())
        tpr_lo, _ = one_sided_bounds(tp, m.size, beta)
        _, fpr_hi = one_sided_bounds(fp, n.size, beta)
        cands = {"tpr/fpr": _log_ratio(tpr_lo, fpr_hi), "(1-fpr)/(1-tpr)": _log_ratio(1.0 - fpr_hi, 1.0 - tpr_lo)}
        ratio = max(cands, key=cands.get)  # the first of equal values
        if best is None or cands[ratio] > best["raw"]:
            best = {
                "raw": cands[ratio],
                "threshold": t,
                "ratio": ratio,
                "tpr": tp / m.size,
                "fpr": fp / n.size,
                "tpr_lo": tpr_lo,
                "fpr_hi": fpr_hi,
            }
    raw = best.pop("raw")
    return {
        "eps_lb": max(0.0, raw),
        **best,
        "n_members": int(m.size),
        "n_nonmembers": int(n.size),
        "n_thresholds": len(ts),
        "confidence": float(confidence),
        "per_bound_confidence": 1.0 - beta,
    }


def _log_ratio(num: float, den: float) -> float:
    if num <= 0:
        return -math.inf
    return math.log(num / den) if den > 0 else math.inf


# --------------------------------------------------------------------------------------------
# What the defenses claim
# --------------------------------------------------------------------------------------------
class DeclaredEpsilon(NamedTuple):
    """A defense's claimed ε, how it is spent (``accounting``, in words) and the neighbouring
    ``relation`` the claim is for (one of the ``RELATION_*`` constants)."""

    claimed_eps: float
    accounting: str
    relation: str


def declared_epsilon(defense) -> DeclaredEpsilon | None:
    """What a built defense object (:func:`ragmi.defenses.build_defense`) claims, read from its
    parameters without changing it; None for a defense that declares no ε.

    * ``dp_retrieval`` (DP-R, ``ragmi/defenses/dp_retrieval.py``; Mind the Hook §IV) and the tests'
      ``stub_fixture`` (its subclass): ε per query: i.i.d. Laplace(Δ/ε) on the scores of the first
      ``pool`` candidates (``_common.noisy_top_k``), the top k by noisy score, noisy scores
      released.  That is ε-DP for :data:`RELATION_SCORES` (score vectors at most Δ apart in L1;
      Laplace mechanism, then post-processing), per query; an attack sending T queries about one
      candidate spends T·ε on it.
    * ``ca_dp`` (CA-DP, ``ca_dp.py``): the claimed ε is per candidate: T queries × ε/T each (even
      split, basic sequential composition), T as set for the attack (``turns``); same relation.
    * ``private_rag`` (``private_rag.py``; "inspired by" Koga et al.'s DP-RAG, not their
      mechanism): ε per query, Laplace(Δ/ε) on the top-k retrieved scores and a threshold filter;
      :data:`RELATION_SCORES` with the top-k set fixed: the top-k selection itself is not noised.
    * ``exp_mechanism`` (``exp_mechanism.py``; the MEntA artifact's ``apply_dp_retrieval``): ε per
      exponential-mechanism draw (weights exp(ε s / 2Δ)), k draws per query compose to k·ε;
      :data:`RELATION_UTILITY`.  With ``scores: uniform`` the draw does not read the scores at all.
    * ``dp_output`` (``dp_output.py``; MEntA §C.2 "DP-style output perturbation"): ε only sets the
      keep probability ε/(1+ε); token dropping is not ε-DP for any relation (:data:`RELATION_NONE`).
    * Every other defense (PAD, LPRAG -- simplified without its local DP --, Mirabel, rerank, the
      instructions, the detectors, paraphrasing, entity triples): None.

    None of these relations is :data:`RELATION_DOCUMENT`, so a document-level membership attack's
    bound is not comparable with any of them (:func:`audit_row`)."""
    from .defenses.ca_dp import CaDp
    from .defenses.dp_output import DpOutput, keep_probability
    from .defenses.dp_retrieval import DpRetrieval
    from .defenses.exp_mechanism import ExpMechanism
    from .defenses.private_rag import PrivateRag

    p = getattr(defense, "params", {}) or {}
    if "epsilon" not in p:
        return None
    eps = float(p["epsilon"])
    if isinstance(defense, CaDp):
        turns = getattr(defense, "_turns", None)  # read without the `turns` property's default of 1
        if turns is None:
            t_words = "T not set yet (turns: attack, measured on the queries of the attack that queries the target)"
        else:
            t_words = f"T = {turns} ({defense.turns_source}), ε/T = {eps / turns:g}"
        return DeclaredEpsilon(
            eps,
            f"per candidate: T queries × ε/T (even split, basic sequential composition); {t_words}; each query "
            f"Laplace(Δ·T/ε) on the top {p.get('pool')} candidates' scores, Δ = {p.get('sensitivity')}",
            RELATION_SCORES,
        )
    if isinstance(defense, DpRetrieval):
        return DeclaredEpsilon(
            eps,
            f"per query: Laplace(Δ/ε) = Laplace({p['sensitivity'] / eps:g}) on the top {p.get('pool')} candidates' "
            f"scores, Δ = {p['sensitivity']}; T queries about one candidate spend T·ε on it",
            RELATION_SCORES,
        )
    if isinstance(defense, PrivateRag):
        return DeclaredEpsilon(
            eps,
            f"per query: Laplace(Δ/ε) = Laplace({p['sensitivity'] / eps:g}) on the retrieved top-k scores, kept when "
            f"above {p.get('threshold')}, Δ = {p['sensitivity']}; the top-k selection is not noised; T queries "
            "spend T·ε",
            RELATION_SCORES,
        )
    if isinstance(defense, ExpMechanism):
        uniform = " (scores: uniform: the draws do not read the scores)" if p.get("scores") == "uniform" else ""
        return DeclaredEpsilon(
            eps,
            f"per draw: exponential mechanism, weights exp(ε s / 2Δ), Δ = {p.get('sensitivity')}; k draws per "
            f"query from the top {p.get('pool')} compose to k·ε per query{uniform}",
            RELATION_UTILITY,
        )
    if isinstance(defense, DpOutput):
        return DeclaredEpsilon(
            eps,
            f"none: ε only sets the keep probability ε/(1+ε) = {keep_probability(eps):.4g} of each response token",
            RELATION_NONE,
        )
    return None


# --------------------------------------------------------------------------------------------
# The table row
# --------------------------------------------------------------------------------------------
def audit_row(
    defense_name: str,
    claimed_eps: float | None,
    accounting: str,
    relation: str,
    bound: dict,
    bound_relation: str = RELATION_DOCUMENT,
) -> dict:
    """One row of the ε audit (columns :data:`AUDIT_COLUMNS`).

    ``claimed_eps`` / ``accounting`` / ``relation``: the defense's claim (:func:`declared_epsilon`;
    ``claimed_eps`` None for a defense without one); ``bound``: :func:`epsilon_lower_bound`'s
    result; ``bound_relation``: what the bound's two inputs were (a membership attack's:
    :data:`RELATION_DOCUMENT`).  ``comparable`` is whether the two relations are the same, and the
    accounting unit must match too (one trial per query for a per-query claim).  ``flagged`` is
    ``eps_lb > claimed_eps`` when comparable, else None; ``verdict`` :data:`EXCEEDED`,
    :data:`CONSISTENT`, :data:`NOT_COMPARABLE` or :data:`NO_CLAIM`."""
    has_claim = claimed_eps is not None and claimed_eps == claimed_eps
    comparable = bool(has_claim and relation == bound_relation)
    flagged = bool(bound["eps_lb"] > float(claimed_eps)) if comparable else None
    if not has_claim:
        word = NO_CLAIM
    elif not comparable:
        word = NOT_COMPARABLE
    else:
        word = EXCEEDED if flagged else CONSISTENT
    return {
        "defense": defense_name,
        "claimed_eps": float(claimed_eps) if has_claim else float("nan"),
        "accounting": accounting,
        "relation": relation,
        "bound_relation": bound_relation,
        "comparable": comparable,
        **{k: bound[k] for k in ("eps_lb", "confidence", "threshold", "tpr", "fpr", "tpr_lo", "fpr_hi")},
        "n_members": bound["n_members"],
        "n_nonmembers": bound["n_nonmembers"],
        "flagged": flagged,
        "verdict": word,
    }


def audit_defense(defense, bound: dict, bound_relation: str = RELATION_DOCUMENT) -> dict:
    """:func:`audit_row` of a built defense: its claim read by :func:`declared_epsilon` (no claim:
    ``claimed_eps`` NaN, verdict :data:`NO_CLAIM`)."""
    d = declared_epsilon(defense)
    if d is None:
        return audit_row(defense.name, None, "", "", bound, bound_relation)
    return audit_row(defense.name, d.claimed_eps, d.accounting, d.relation, bound, bound_relation)


# --------------------------------------------------------------------------------------------
# Driving a DP retrieval hook itself
# --------------------------------------------------------------------------------------------
NOT_RELEASED = -1e9  # the statistic of a run in which the target document is not released


def released_statistic(defense, shift: float, n: int, tag: str) -> np.ndarray:
    """Run ``defense``'s retrieval hook ``n`` times on a three-document pool (a, b, c) with scores
    (0.5 + ``shift``, 0.45, 0.4) — neighbours under :data:`RELATION_SCORES` when |shift| is at most the
    sensitivity — each run its own query id (hence its own seeded noise); the statistic is a's released
    noisy score, :data:`NOT_RELEASED` when a is not released.  DP-R and CA-DP are run with k = 3 on the
    three-document pool (every noisy score released); Private-RAG noises the retrieved scores and keeps those above its
    threshold, so its statistic is a's released score or NOT_RELEASED."""
    from .defenses.base import DefenseContext, QueryState

    base = [0.5 + shift, 0.45, 0.4]
    ids = ["a", "b", "c"]
    # the pool (DP-R and CA-DP noise the first `pool` of it, here all three) and the retrieved set
    # (Private-RAG noises that) are the same three documents
    states = [
        QueryState(
            query_id=f"{tag}-{i}",
            query="q",
            pool_ids=list(ids),
            pool_scores=list(base),
            retrieved_ids=list(ids),
            retrieval_scores=list(base),
        )
        for i in range(n)
    ]
    defense.on_retrieval(states, DefenseContext(seed=0, k=3))
    out = np.full(n, NOT_RELEASED)
    for i, s in enumerate(states):
        if "a" in s.retrieved_ids:
            out[i] = s.retrieval_scores[list(s.retrieved_ids).index("a")]
    return out


def mechanism_bound(defense, trials: int = 3000, confidence: float = CONFIDENCE, seed: int = 0) -> dict | None:
    """The ε lower bound of a DP retrieval hook driven by the audit itself, under the relation it claims
    (:data:`RELATION_SCORES`): thresholds chosen on ``trials`` separate runs of the unshifted pool, then
    ``trials`` fresh runs of each neighbour (a's score + Δ, and unshifted) bounded by
    :func:`epsilon_lower_bound`.  None for a defense without such a hook (no ε claim, the exponential
    mechanism's draws, the output perturbation).  ``seed`` tags the runs' query ids, so the runs are
    reproducible and differ between seeds."""
    from .defenses.dp_retrieval import DpRetrieval
    from .defenses.private_rag import PrivateRag

    claim = declared_epsilon(defense)
    if claim is None or claim.relation != RELATION_SCORES or not isinstance(defense, (DpRetrieval, PrivateRag)):
        return None
    delta = float(defense.params["sensitivity"])
    select = released_statistic(defense, 0.0, trials, f"select-{seed}")
    thresholds = [t for t in reference_thresholds(select, fprs=(0.2, 0.05, 0.01, 0.001)) if t > NOT_RELEASED]
    if not thresholds:
        return None
    return epsilon_lower_bound(
        released_statistic(defense, delta, trials, f"d1-{seed}"),
        released_statistic(defense, 0.0, trials, f"d0-{seed}"),
        thresholds,
        confidence=confidence,
    )
