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
retrieval scores of one query's candidates, so their claim is stated for score vectors that differ
by at most the sensitivity (:data:`RELATION_SCORES`) with the candidate set fixed; the exponential
mechanism's per draw for utility vectors (:data:`RELATION_UTILITY`); the DP-style output
perturbation is not ε-DP for any relation (:data:`RELATION_NONE`).  Adding a document changes the
candidate set itself (it can enter the context, where an absent one never can), which no bounded
change of scores describes, so a membership attack's ε_lb says nothing about those claims:
:func:`audit_row` prints "bound not comparable" instead of a flag.  A bound is compared with a
claim only when its trials follow the claim's relation and unit (:func:`trial_rows`): the audit
drives the defense's own hook on two positional score vectors, taken where it can from the target's
real retriever for D and D with one document removed or added (:mod:`ragmi.epsilon_sensitivity`), so a
defense whose declared Δ is too small is driven past it; one query per trial against a per-query ε,
T queries against T·ε (basic composition) or against CA-DP's per-candidate ε.

A bound at or below the claim only fails to refute it (:data:`NOT_REFUTED`); what the audit could have
shown is printed beside it: :func:`max_certifiable` and the bound's distribution for a mechanism
exactly at its claim (:func:`correct_mechanism_bounds`).  A document-level bound for a defense that did
claim document presence would further be approximate: the candidates of one run share a database, so
their outcomes are not independent runs (Steinke, Nasr & Jagielski, NeurIPS 2023, "Privacy Auditing
with One (1) Training Run", treat that case).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# the neighbouring relations and a defense's claim are declared by the defense (ragmi.defenses.claims)
from .defenses.claims import (  # noqa: F401 (RELATION_NONE, RELATION_UTILITY: the audit's readers name them here)
    RELATION_DOCUMENT,
    RELATION_NONE,
    RELATION_SCORES,
    RELATION_UTILITY,
    DeclaredEpsilon,
)
from .metrics import clopper_pearson, fpr_estimable, threshold_at_fpr

CONFIDENCE = 0.95

# Verdicts of :func:`audit_row`.  A lower bound at or below the claim only fails to refute it: it never
# shows that the claim holds (a weak test, or too few trials, gives a small bound for any mechanism).
EXCEEDS = "exceeds its claim"  # the bound is above the claim: a violation at the stated confidence
NOT_REFUTED = "not refuted"  # the bound is at or below the claim: the audit fails to refute it
NOT_COMPARABLE = "bound not comparable"
NO_CLAIM = "no ε declared"
NO_TRIAL = "no trial of this hook"

AUDIT_COLUMNS = [
    "defense",
    "claimed_eps",
    "accounting",
    "relation",
    "unit",  # what one trial is: one query, T queries about one document, or a membership attack's runs
    "queries",  # queries composed in one trial (T)
    "claim_in_unit",  # the claim the bound is compared with: ε, T·ε (per document), ε (CA-DP per candidate)
    "delta_declared",
    "delta_trial",  # L1 distance of the two score vectors the hook was driven on
    "delta_measured",  # the largest L1 change measured on the real retriever (NaN: not measured)
    "delta_tried",  # what that maximum is over
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
    "eps_certifiable",  # the largest bound these trials and thresholds could give (TPR = 1, FPR = 0)
    "correct_median",  # the bound of a mechanism exactly at its claim, same procedure: median
    "correct_q05",
    "correct_q95",
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
def declared_epsilon(defense) -> DeclaredEpsilon | None:
    """What a built defense object (:func:`ragmi.defenses.build_defense`) claims, read without changing
    it (its :meth:`~ragmi.defenses.base.Defense.epsilon_claim`); None for a defense that declares no ε.
    Today: DP-R (ε per query, :data:`RELATION_SCORES`), CA-DP (ε per candidate over its T queries, same
    relation), Private-RAG (ε per query, the top-k set fixed), the exponential mechanism (ε per draw,
    :data:`RELATION_UTILITY`) and the DP-style output perturbation (:data:`RELATION_NONE`); each
    defense's ``epsilon_claim`` says how.  None of these relations is :data:`RELATION_DOCUMENT`, so a
    document-level membership attack's bound is not comparable with any of them (:func:`audit_row`)."""
    claim = getattr(defense, "epsilon_claim", None)
    return claim() if claim is not None else None


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
    unit: str = "",
    queries: int = 1,
    claim_in_unit: float | None = None,
) -> dict:
    """One row of the ε audit (columns :data:`AUDIT_COLUMNS`).

    ``claimed_eps`` / ``accounting`` / ``relation``: the defense's claim (:func:`declared_epsilon`;
    ``claimed_eps`` None for a defense without one); ``claim_in_unit``: the claim in the trial's unit
    (default ``claimed_eps``; T·ε for T queries of a per-query claim); ``bound``:
    :func:`epsilon_lower_bound`'s result; ``bound_relation``: what the bound's two inputs were (a
    membership attack's: :data:`RELATION_DOCUMENT`).  ``comparable`` is whether the two relations are the
    same (the caller matches the accounting unit: :func:`trial_rows` composes as many queries as the
    claim covers).  ``flagged`` is ``eps_lb > claim_in_unit`` when comparable, else None; ``verdict``
    :data:`EXCEEDS`, :data:`NOT_REFUTED`, :data:`NOT_COMPARABLE` or :data:`NO_CLAIM`.
    ``eps_certifiable``: :func:`max_certifiable` at the bound's sizes."""
    nan = float("nan")
    if claim_in_unit is None:
        claim_in_unit = claimed_eps
    has_claim = claimed_eps is not None and claimed_eps == claimed_eps
    comparable = bool(has_claim and relation == bound_relation)
    flagged = bool(bound["eps_lb"] > float(claim_in_unit)) if comparable else None
    if not has_claim:
        word = NO_CLAIM
    elif not comparable:
        word = NOT_COMPARABLE
    else:
        word = EXCEEDS if flagged else NOT_REFUTED
    k = bound.get("n_thresholds")
    return {
        "defense": defense_name,
        "claimed_eps": float(claimed_eps) if has_claim else nan,
        "accounting": accounting,
        "relation": relation,
        "unit": unit,
        "queries": int(queries),
        "claim_in_unit": float(claim_in_unit) if has_claim else nan,
        "delta_declared": nan,
        "delta_trial": nan,
        "delta_measured": nan,
        "delta_tried": "",
        "bound_relation": bound_relation,
        "comparable": comparable,
        **{k_: bound[k_] for k_ in ("eps_lb", "confidence", "threshold", "tpr", "fpr", "tpr_lo", "fpr_hi")},
        "n_members": bound["n_members"],
        "n_nonmembers": bound["n_nonmembers"],
        "eps_certifiable": (
            max_certifiable(bound["n_members"], bound["n_nonmembers"], k, bound["confidence"]) if k else nan
        ),
        "correct_median": nan,
        "correct_q05": nan,
        "correct_q95": nan,
        "flagged": flagged,
        "verdict": word,
    }


def audit_defense(defense, bound: dict, bound_relation: str = RELATION_DOCUMENT, **unit) -> dict:
    """:func:`audit_row` of a built defense: its claim read by :func:`declared_epsilon` (no claim:
    ``claimed_eps`` NaN, verdict :data:`NO_CLAIM`); ``unit``: :func:`audit_row`'s ``unit``, ``queries``,
    ``claim_in_unit``."""
    d = declared_epsilon(defense)
    if d is None:
        return audit_row(defense.name, None, "", "", bound, bound_relation, **unit)
    return audit_row(defense.name, d.claimed_eps, d.accounting, d.relation, bound, bound_relation, **unit)


# --------------------------------------------------------------------------------------------
# Driving a DP retrieval hook itself: neighbouring score vectors, composed over T queries
# --------------------------------------------------------------------------------------------
TRIAL_FPRS = (0.2, 0.05, 0.01, 0.001)  # the levels at which thresholds are chosen on the selection runs
DECLARED_PAIR = "declared Δ (no retriever measured): (0.5 + Δ, 0.45, 0.4) against (0.5, 0.45, 0.4)"
CORRECT_REPLICATES = 200


def declared_pair(delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Two score vectors exactly ``delta`` apart in L1 (the first coordinate moved): the trial of a
    defense that runs on no measured retriever."""
    v0 = np.array([0.5, 0.45, 0.4])
    return v0 + np.array([float(delta), 0.0, 0.0]), v0


def has_trial(defense) -> bool:
    """Whether the audit can drive the defense's retrieval hook on neighbouring score vectors: its claim
    is for :data:`RELATION_SCORES` and names the Laplace ``noise_scale`` of each query (DP-R, CA-DP and
    Private-RAG today)."""
    claim = declared_epsilon(defense)
    return claim is not None and claim.relation == RELATION_SCORES and claim.noise_scale is not None


def trial_copy(defense, turns: int | None):
    """A copy of ``defense`` to drive (the configured object is never changed); a copy whose claim is per
    candidate (CA-DP) and whose T is unset gets ``turns`` (its ``params.turns``, when an integer, wins:
    :meth:`CaDp.set_turns`)."""
    import copy

    d = copy.deepcopy(defense)
    if turns is not None and d.epsilon_claim().per_candidate:
        d.set_turns(int(turns), f"the audit: {turns} queries per candidate")
    return d


def released_matrix(defense, scores: Sequence[float], n: int, turns: int, tag: str, seed: int) -> np.ndarray:
    """Run ``defense``'s retrieval hook ``n`` × ``turns`` times on one candidate pool whose positional
    scores are ``scores`` (candidate ids fixed: the relation :data:`RELATION_SCORES`), each run its own
    query id, hence its own seeded noise; k = the pool's size, so a DP-R or CA-DP run releases every noisy
    score.  Returns (n, turns, m) released scores, NaN where a candidate is not released (Private-RAG's
    threshold)."""
    from .defenses.base import DefenseContext, QueryState

    v = [float(x) for x in scores]
    m = len(v)
    ids = [f"c{i}" for i in range(m)]
    states = [
        QueryState(
            query_id=f"{tag}-{i}-{t}",
            query="q",
            pool_ids=list(ids),
            pool_scores=list(v),
            retrieved_ids=list(ids),
            retrieval_scores=list(v),
        )
        for i in range(n)
        for t in range(turns)
    ]
    defense.on_retrieval(states, DefenseContext(seed=seed, k=m))
    pos = {c: j for j, c in enumerate(ids)}
    out = np.full((n * turns, m), np.nan)
    for i, s in enumerate(states):
        for c, x in zip(s.retrieved_ids, s.retrieval_scores):
            out[i, pos[c]] = x
    return out.reshape(n, turns, m)


def _laplace_log_cdf(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return np.where(x < 0, math.log(0.5) + np.minimum(x, 0), np.log1p(-0.5 * np.exp(-np.maximum(x, 0))))


def log_ratio_statistic(
    y: np.ndarray, v1: np.ndarray, v0: np.ndarray, scale: float, threshold: float | None = None
) -> np.ndarray:
    """The Neyman-Pearson statistic of a run (n, T, m released scores, NaN = not released): the log
    likelihood ratio of ``v1`` against ``v0`` under i.i.d. Laplace(``scale``) noise, summed over the
    T queries; a coordinate not released (below ``threshold``) counts by its Laplace CDF.  Any function
    of the output is a valid test; this one is the most powerful for a mechanism at its declared scale."""
    rel = ~np.isnan(y)
    yy = np.where(rel, y, 0.0)
    v1 = np.asarray(v1, dtype=float)
    v0 = np.asarray(v0, dtype=float)
    term = np.where(rel, (np.abs(yy - v0) - np.abs(yy - v1)) / scale, 0.0)
    if threshold is not None:
        hidden = _laplace_log_cdf((threshold - v1) / scale) - _laplace_log_cdf((threshold - v0) / scale)
        term = term + np.where(rel, 0.0, hidden)
    return term.sum(axis=(1, 2))


def _scale_and_threshold(defense) -> tuple[float, float | None]:
    """The per-query Laplace scale the defense declares (Δ / its noise ε) and its keep threshold."""
    claim = defense.epsilon_claim()
    return claim.noise_scale, claim.keep_threshold


def vector_trial(
    defense,
    v1: Sequence[float],
    v0: Sequence[float],
    turns: int = 1,
    trials: int = 3000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> dict:
    """The ε lower bound of ``defense``'s hook (a copy: :func:`trial_copy`) between the neighbouring
    positional score vectors ``v1`` and ``v0``, one trial = ``turns`` queries about the same candidate
    pool (independent noise each; the bound is for their composition).  Thresholds on the log-ratio
    statistic (:func:`log_ratio_statistic`) are chosen on ``trials`` separate runs of ``v0`` at the levels
    :data:`TRIAL_FPRS`, then ``trials`` fresh runs of each side are bounded by
    :func:`epsilon_lower_bound`.  The result also holds ``scale`` and ``threshold`` (the statistic's)."""
    d = trial_copy(defense, turns)
    v1, v0 = np.asarray(v1, dtype=float), np.asarray(v0, dtype=float)
    scale, thr = _scale_and_threshold(d)

    def stat(v, tag):
        return log_ratio_statistic(released_matrix(d, v, trials, turns, f"{tag}-{seed}", seed), v1, v0, scale, thr)

    thresholds = reference_thresholds(stat(v0, "select"), fprs=TRIAL_FPRS)
    bound = epsilon_lower_bound(stat(v1, "d1"), stat(v0, "d0"), thresholds, confidence=confidence)
    return {**bound, "scale": scale, "statistic_threshold": thr}


def max_certifiable(n_members: int, n_nonmembers: int, n_thresholds: int, confidence: float = CONFIDENCE) -> float:
    """The largest ε_lb :func:`epsilon_lower_bound` can return at these sizes: TPR = 1 and FPR = 0 at one
    threshold, so TPR_lo = β^(1/n1), FPR_hi = 1 - β^(1/n0), β = (1 - confidence) / (2K).  A mechanism
    whose ε lies above it cannot be shown to exceed its claim by this audit, whatever it does."""
    beta = (1.0 - confidence) / (2 * int(n_thresholds))
    tlo, fhi = beta ** (1.0 / n_members), 1.0 - beta ** (1.0 / n_nonmembers)
    return max(math.log(tlo / fhi), math.log((1.0 - fhi) / (1.0 - tlo)))


def correct_mechanism_bounds(
    v1: Sequence[float],
    v0: Sequence[float],
    eps_per_query: float,
    delta: float,
    turns: int,
    scale: float,
    threshold: float | None = None,
    trials: int = 3000,
    confidence: float = CONFIDENCE,
    replicates: int = CORRECT_REPLICATES,
    seed: int = 0,
) -> dict:
    """What the same procedure gives on a mechanism exactly as private as claimed: the bound's median
    and 5-95% range over ``replicates`` seeded replicates of :func:`vector_trial` on a Laplace mechanism
    of scale max(``delta``, ‖v1 - v0‖₁) / ``eps_per_query`` (correct for this pair whatever the declared
    Δ), composed over ``turns`` queries, censored below ``threshold`` like Private-RAG, scored with the
    trial's own statistic (``scale``, ``threshold``).

    Cheaper equivalent of rerunning the procedure: the statistic is drawn once, vectorised, for a pool
    of 20 × ``trials`` runs of each side (two separate pools for ``v0``: one the selection runs are drawn
    from, one the bounded runs), and every replicate draws its selection, D1 and D0 runs from these pools
    with replacement.  With pools twenty times the sample, a replicate shares few runs with another, so
    the spread is close to (slightly under) that of fresh draws.  Returns ``median``, ``q05``, ``q95``,
    ``replicates``, ``correct_scale``."""
    v1, v0 = np.asarray(v1, dtype=float), np.asarray(v0, dtype=float)
    b = max(float(delta), float(np.abs(v1 - v0).sum())) / float(eps_per_query)
    rng = np.random.default_rng([int(seed), 7])
    pool = 20 * int(trials)

    def draws(v):
        out = []
        for start in range(0, pool, 4096):
            n = min(4096, pool - start)
            y = v + rng.laplace(0.0, b, size=(n, int(turns), v.size))
            if threshold is not None:
                y = np.where(y > threshold, y, np.nan)
            out.append(log_ratio_statistic(y, v1, v0, scale, threshold))
        return np.concatenate(out)

    p1, p0_sel, p0 = draws(v1), draws(v0), draws(v0)
    bounds = np.empty(int(replicates))
    for r in range(int(replicates)):
        sel = rng.choice(p0_sel, trials)
        bounds[r] = epsilon_lower_bound(
            rng.choice(p1, trials),
            rng.choice(p0, trials),
            reference_thresholds(sel, fprs=TRIAL_FPRS),
            confidence=confidence,
        )["eps_lb"]
    q05, med, q95 = np.quantile(bounds, [0.05, 0.5, 0.95])
    return {
        "median": float(med),
        "q05": float(q05),
        "q95": float(q95),
        "replicates": int(replicates),
        "correct_scale": b,
    }


def trial_rows(
    defense,
    v1: Sequence[float],
    v0: Sequence[float],
    turns: int | None,
    trials: int = 3000,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    delta_measured: float = float("nan"),
    delta_tried: str = DECLARED_PAIR,
) -> list[dict]:
    """The audit's rows of one DP retrieval defense (:func:`has_trial`) driven between ``v1`` and ``v0``,
    each in the unit its claim is in:

    * DP-R, Private-RAG (ε per query): a one-query trial against ε, and, when ``turns`` (T, the attack's
      queries per candidate) is known, a T-query trial against T·ε (basic sequential composition: one
      document's privacy loss over the T queries an attack sends about it; T = 1 reuses the one-query trial).
    * CA-DP (ε per candidate over its T queries, ε/T each): a T-query trial against ε, T = ``turns``, else
      the defense's own fixed ``params.turns``; with neither, one row "bound not comparable", T unknown.

    Each row carries :func:`max_certifiable` and :func:`correct_mechanism_bounds` at its sizes, the declared
    Δ, the L1 distance of the pair, and ``delta_measured`` / ``delta_tried`` (the real retriever's
    largest change, :mod:`ragmi.epsilon_sensitivity`).  The configured ``defense`` is not changed."""
    claim = declared_epsilon(defense)
    eps = claim.claimed_eps
    delta = float(defense.params["sensitivity"])
    v1, v0 = np.asarray(v1, dtype=float), np.asarray(v0, dtype=float)
    extra = {
        "delta_declared": delta,
        "delta_trial": float(np.abs(v1 - v0).sum()),
        "delta_measured": float(delta_measured),
        "delta_tried": delta_tried,
    }
    if claim.per_candidate:
        t = turns if turns is not None else defense.declared_turns
        if t is None:
            return [{**_no_turns_row(defense.name, eps, claim), **extra}]
        units = [(f"per candidate: {t} queries (ε in total)", int(t), eps)]
        claim = declared_epsilon(trial_copy(defense, t))  # the accounting with the T the trial uses
    else:
        units = [("per query: 1 query", 1, eps)]
        if turns is not None:
            units.append((f"per document: {turns} queries (T·ε, basic composition)", int(turns), int(turns) * eps))
    rows, done = [], {}
    for unit, t, claim_u in units:
        if t not in done:
            done[t] = _trial_and_reference(defense, v1, v0, t, claim_u, delta, trials, confidence, seed)
        bound, correct = done[t]
        row = audit_row(
            defense.name,
            eps,
            claim.accounting,
            claim.relation,
            bound,
            bound_relation=claim.relation,
            unit=unit,
            queries=t,
            claim_in_unit=claim_u,
        )
        row.update(extra, correct_median=correct["median"], correct_q05=correct["q05"], correct_q95=correct["q95"])
        rows.append(row)
    return rows


def _no_turns_row(name: str, eps: float, claim) -> dict:
    """The one row of a per-candidate claim whose T is unknown (no attack queries the target): no trial."""
    empty = {k: float("nan") for k in ("eps_lb", "confidence", "threshold", "tpr", "fpr", "tpr_lo", "fpr_hi")}
    return audit_row(
        name,
        eps,
        claim.accounting,
        claim.relation,
        {**empty, "n_members": 0, "n_nonmembers": 0},
        bound_relation=RELATION_DOCUMENT,  # no trial: nothing to compare
        unit="per candidate: T unknown (no attack queries this target)",
        queries=0,
    )


def _trial_and_reference(defense, v1, v0, t: int, claim_u: float, delta: float, trials, confidence, seed):
    """A T-query trial of the defense's hook between ``v1`` and ``v0``, and the same procedure's bounds over
    a Laplace mechanism exactly at the claim (:func:`correct_mechanism_bounds`)."""
    bound = vector_trial(defense, v1, v0, turns=t, trials=trials, confidence=confidence, seed=seed)
    correct = correct_mechanism_bounds(
        v1,
        v0,
        claim_u / t,
        delta,
        t,
        bound["scale"],
        bound["statistic_threshold"],
        trials=trials,
        confidence=confidence,
        seed=seed,
    )
    return bound, correct
