"""Metrics over membership-inference attack scores.

Input is a long *scores* frame, one row per (document, variant):

=========  =====================================================================================
doc_id     document identifier (str)
variant    attack variant, e.g. ``"rag_mia/gray/t2"`` (str)
score      float, higher = more likely a member; must be finite
decision   0/1 verdict of the variant's own decision rule (RAG-MIA's Yes/No, DCMI's C > γ, MBA's γ,
           S2MIA's T, a trained attack model's predicted class), else NA (column optional)
label      1 member, 0 non-member
role       ``"reference"`` (the adversary's calibration documents) or ``"eval"``
no_answer  True when the attack could not read the target's answer (neither Yes nor No, an empty
           response); NA counts as False (column optional)
=========  =====================================================================================

Other columns are ignored.

Protocol (the project's standards)
----------------------------------
* Thresholds are never fitted on the data they are scored on: every threshold is chosen on the
  ``reference`` rows of a variant and applied, unchanged, to its ``eval`` rows.  The one exception
  is the ROC read-out ``tpr_roc_{k}`` below, which is labelled as such.
* AUC is computed on the eval rows.
* Accuracy is the papers' accuracy: that of the variant's own decision rule (its ``decision``
  column: DCMI Eq. 9/11/13, RAG-MIA's black-box Yes/No, MBA's γ, S2MIA's T, an attack model's
  predicted class), with the rule's TPR and FPR (``bb_tpr`` / ``bb_fpr``).  A variant without a
  rule has no accuracy (NaN).  The accuracy of the reference-set accuracy-maximising threshold on
  the score is reported apart as ``threshold_accuracy``: it is ragmi's, not a paper's, and is never
  compared with a published accuracy (docs/provenance.md#metrics).
* Every number carries its n (members / non-members, for reference and eval) and a 95% confidence
  interval that keeps its width at the boundary (an AUC of 1.00 or a TPR of 0 is an estimate from
  a finite sample, not a certainty):

  - AUC: the score interval of Newcombe (2006, "Confidence intervals for an effect size measure
    based on the Mann-Whitney statistic. Part 2: asymptotic methods and evaluation", Statistics in
    Medicine 25:559-573), his method 5: the Hanley-McNeil variance with both sample sizes replaced
    by N* = (m + n)/2 - 1, evaluated at the candidate θ, and the interval the set of θ with
    |Â - θ| <= z SE(θ) (:func:`auc_ci`).  At 20+20 an AUC of 1.00 gets about [0.90, 1.00] and
    constant scores (0.50) about [0.33, 0.67], where the former percentile bootstrap collapsed to
    [1.00, 1.00] and [0.50, 0.50].
  - Every rate (TPR, FPR, accuracy): the exact binomial interval of Clopper & Pearson (1934,
    Biometrika 26:404-413) on the count and its n (:func:`clopper_pearson`); an accuracy is k
    correct of the n eval rows.

  - The test of AUC = 0.5 beside it: ``auc_p`` (two-sided) and ``auc_p_greater`` (one-sided, AUC >
    0.5), the Mann-Whitney test on the eval scores, exact where scipy can (:func:`auc_pvalues`).  The
    summary reads the negative controls and the leaking cells of a whole run family-wise from them
    (Holm, ragmi.multiplicity).

  None of them is random: ``n_boot`` changes no number of :func:`evaluate` (it is still recorded).

TPR at low FPR is the headline number for membership inference (Carlini et al. 2022, "Membership
Inference Attacks From First Principles"), as used in RAG-MIA §5: an attack is only dangerous if it
identifies some members with confidence, i.e. at a threshold that almost never fires on
non-members.  Two figures are reported, each named for what it is:

* ``tpr_at_fpr_{k}`` (operational): the eval TPR of the threshold ``threshold_fpr_{k}`` chosen on
  the *reference* non-members for FPR x = k%.  An adversary can deploy it; its realised eval FPR,
  ``fpr_realized_{k}`` with a Clopper-Pearson interval (``_lo`` / ``_hi``), can lie far from x, so
  read the two together: the TPR is "at x% FPR" only as far as the realised FPR says so.
* ``tpr_roc_{k}`` (the field's "TPR at x% FPR", as LiRA and MIMIR report it): the largest eval TPR
  over the thresholds whose *eval* FPR is at most x, read from the evaluation ROC curve (a
  threshold sits between distinct scores, so tied scores move together).  Its threshold is chosen on
  the data it is scored on, so the figure is optimistic, and its Clopper-Pearson interval (on the
  members above that threshold) is conditional on that choice.

A threshold at FPR x > 0 needs at least 1/x reference non-members (5% needs 20, 0.5% needs 200):
with fewer, the smallest non-zero reference FPR is 1/n > x, so the only threshold with reference FPR
at most x is the one above every reference non-member, and "TPR at x% FPR" would silently repeat
TPR@0%FPR.  Such levels are *not estimable* (:func:`fpr_estimable`): their ``threshold_fpr_{k}``,
``tpr_at_fpr_{k}`` (with its interval) and ``fpr_realized_{k}`` (with its interval) are NaN, and
the tables print "n/e".  Likewise ``tpr_roc_{k}`` needs x · (eval non-members) >= 1
(:func:`roc_estimable`; x = 0 never qualifies: the ROC's TPR at FPR 0 hinges on the single highest
non-member score).

A variant is *uninformative* (``informative`` False, with ``uninformative_reason``) when its eval
scores are all equal (the attack gave every candidate the same score, e.g. every answer was "No.")
or when every eval row is ``no_answer`` (the attack could not read a single answer; ``n_no_answer``
counts them).  Its AUC of 0.5 then says nothing about the target: it is no measurement, not
evidence of no leakage.

Two more quantities serve the headline tables: :func:`paired_auc_difference` (the change in AUC
between two targets scored on the same candidates, with a MOVER interval built from the two AUCs'
score intervals and DeLong's correlation, which keeps its width at AUC 1) and
:func:`min_detectable_auc` / :func:`min_detectable_auc_power` (the smallest AUC a run of a given size
can tell from 0.5, at 50% and at a chosen power).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

DEFAULT_FPRS: tuple[float, ...] = (0.0, 0.005, 0.01, 0.05)
REQUIRED_COLUMNS = ["doc_id", "variant", "score", "label", "role"]
ROLES = ("reference", "eval")
BB_COLUMNS = ["bb_tpr", "bb_tpr_lo", "bb_tpr_hi", "bb_fpr", "bb_fpr_lo", "bb_fpr_hi"]
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: two-sided 95% intervals
CONSTANT_SCORES = "constant scores"  # uninformative_reason: every eval score is the same
NO_ANSWER_READ = "no answer read"  # uninformative_reason: every eval row is no_answer

# Tolerance when comparing an empirical rate k/n with a requested rate (e.g. 5/100 <= 0.05).
_RATE_EPS = 1e-12


# --------------------------------------------------------------------------------------------
# Elementary metrics
# --------------------------------------------------------------------------------------------
def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` for the binary ``labels`` (1 = member).

    The Mann-Whitney statistic: the fraction of (member, non-member) pairs whose member scores
    higher, tied pairs counting one half -- the value of :func:`sklearn.metrics.roc_auc_score`
    (``tests/test_metrics.py`` checks them against each other), without importing sklearn (1.1 s in
    every metrics job).  Raises ``ValueError`` when only one class is present.
    """
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    if y.size == 0 or np.unique(y).size < 2:
        raise ValueError("AUC is undefined unless both members and non-members are present")
    members, nonmembers = s[y == 1], np.sort(s[y == 0])
    below = np.searchsorted(nonmembers, members, side="left")
    equal = np.searchsorted(nonmembers, members, side="right") - below
    return float((below.sum() + 0.5 * equal.sum()) / (members.size * nonmembers.size))


def roc_points(labels: Sequence[int], scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr)`` of ``scores`` (all operating points, from (0, 0) to (1, 1)): one point
    per distinct score, highest first, as :func:`sklearn.metrics.roc_curve` with
    ``drop_intermediate=False`` gives them."""
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    if y.size == 0 or np.unique(y).size < 2:
        raise ValueError("a ROC curve needs both members and non-members")
    order = np.argsort(s, kind="mergesort")[::-1]
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]  # the last item of each run of equal scores
    tps = np.cumsum(y)[last]
    fps = (last + 1) - tps
    tps, fps = np.r_[0, tps], np.r_[0, fps]
    return fps / fps[-1], tps / tps[-1]


def _candidate_thresholds(scores: np.ndarray) -> np.ndarray:
    """Every distinct rule ``score >= t``: the distinct scores, plus one just above the maximum."""
    uniq = np.unique(scores)  # sorted ascending
    return np.append(uniq, np.nextafter(uniq[-1], np.inf))


def threshold_max_accuracy(ref_labels: Sequence[int], ref_scores: Sequence[float]) -> float:
    """Threshold ``t`` maximising the accuracy of the rule ``score >= t`` on the reference set.

    Candidates are the distinct reference scores and ``nextafter(max, +inf)`` (everything
    predicted non-member); each candidate stands for the whole interval of thresholds that give the
    same predictions.  Ties between candidates are broken by the smallest ``t``.
    """
    y = np.asarray(ref_labels, dtype=int)
    s = np.asarray(ref_scores, dtype=float)
    if s.size == 0:
        raise ValueError("threshold_max_accuracy needs at least one reference score")
    if y.shape != s.shape:
        raise ValueError("ref_labels and ref_scores differ in length")
    _check_finite(s, "reference scores")
    cand = _candidate_thresholds(s)
    members = np.sort(s[y == 1])
    nonmembers = np.sort(s[y == 0])
    # members predicted positive: score >= t; non-members predicted negative: score < t.
    tp = members.size - np.searchsorted(members, cand, side="left")
    tn = np.searchsorted(nonmembers, cand, side="left")
    correct = tp + tn
    return float(cand[int(np.argmax(correct))])  # argmax returns the first (smallest t) of ties


def threshold_at_fpr(ref_nonmember_scores: Sequence[float], fpr: float) -> float:
    """Smallest threshold ``t`` with ``mean(ref_nonmember_scores >= t) <= fpr``.

    Candidates are the distinct non-member scores and ``nextafter(max, +inf)``; for ``fpr = 0``
    the result is therefore strictly above the largest reference non-member score.
    """
    s = np.asarray(ref_nonmember_scores, dtype=float)
    if s.size == 0:
        raise ValueError("threshold_at_fpr needs at least one reference non-member score")
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    _check_finite(s, "reference non-member scores")
    cand = _candidate_thresholds(s)
    srt = np.sort(s)
    rate = (srt.size - np.searchsorted(srt, cand, side="left")) / srt.size  # non-increasing
    ok = np.flatnonzero(rate <= fpr + _RATE_EPS)
    return float(cand[ok[0]])  # the last candidate always has rate 0


def fpr_estimable(fpr: float, n_ref_nonmembers: int) -> bool:
    """Whether ``n_ref_nonmembers`` reference non-members resolve a threshold at FPR ``fpr``: 0 always
    (the threshold above every reference non-member); otherwise ``fpr * n >= 1``, i.e. at least 1/fpr
    non-members (5% needs 20), so that one false positive in the reference set is within the level."""
    f = float(fpr)
    return f == 0.0 or f * int(n_ref_nonmembers) >= 1.0 - 1e-9


def roc_estimable(fpr: float, n_eval_nonmembers: int) -> bool:
    """Whether the evaluation ROC curve of ``n_eval_nonmembers`` non-members resolves FPR ``fpr``
    (``tpr_roc_{k}`` is printed): ``fpr * n >= 1``, i.e. at least one eval false positive is within
    the level (5% needs 20).  Never for ``fpr = 0``: the ROC's TPR at FPR 0 is decided by the single
    highest non-member score, and with fewer than 1/fpr non-members "FPR <= x" means FPR 0 again."""
    f = float(fpr)
    return f > 0.0 and f * int(n_eval_nonmembers) >= 1.0 - 1e-9


def fpr_key(fpr: float) -> str:
    """Column suffix of a false-positive rate, in percent: 0 -> "0", 0.005 -> "0.5", 0.05 -> "5"."""
    return f"{round(float(fpr) * 100, 6):g}"


def metric_columns(fprs: Iterable[float] = DEFAULT_FPRS) -> list[str]:
    """The columns of :func:`evaluate`'s output, in order, for the given FPR levels."""
    cols = [
        "variant",
        "n_ref_members",
        "n_ref_nonmembers",
        "n_members",
        "n_nonmembers",
        "n_boot",
        "informative",
        "uninformative_reason",
        "n_no_answer",
        "auc",
        "auc_lo",
        "auc_hi",
        "auc_p",
        "auc_p_greater",
        "accuracy",
        "accuracy_lo",
        "accuracy_hi",
        "threshold_acc",
        "threshold_accuracy",
        "threshold_accuracy_lo",
        "threshold_accuracy_hi",
    ]
    for f in fprs:
        k = fpr_key(f)
        cols += [
            f"threshold_fpr_{k}",
            f"tpr_at_fpr_{k}",
            f"tpr_at_fpr_{k}_lo",
            f"tpr_at_fpr_{k}_hi",
            f"fpr_realized_{k}",
            f"fpr_realized_{k}_lo",
            f"fpr_realized_{k}_hi",
            f"tpr_roc_{k}",
            f"tpr_roc_{k}_lo",
            f"tpr_roc_{k}_hi",
        ]
    return cols + BB_COLUMNS


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------
def _check_finite(values: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{what} contain NaN or infinite values; attacks must emit finite scores")


_TRUE_WORDS = {"true", "1", "1.0", "yes"}
_FALSE_WORDS = {"false", "0", "0.0", "no", ""}


def _no_answer_flags(values: pd.Series) -> pd.Series:
    """``no_answer`` as pandas' nullable ``boolean``: True / False, NA where it is missing (None, NA,
    NaN).  Accepts booleans, 0/1 and the words true/false (a CSV round trip); anything else is an
    attack's bug and raises ``ValueError``."""

    def one(v):
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            return pd.NA
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, float, np.integer, np.floating)) and float(v) in (0.0, 1.0):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
            return v.strip().lower() in _TRUE_WORDS
        raise ValueError(f"no_answer must be True, False or missing, got {v!r}")

    if pd.api.types.is_bool_dtype(values.dtype):  # bool or boolean: nothing to parse
        return values.astype("boolean")
    return pd.Series([one(v) for v in values], index=values.index, dtype="boolean")


def check_scores_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Validate a scores frame and return a normalised copy.

    The copy has ``label`` as int, ``score`` as float, ``decision`` as float (NaN when absent) and,
    when the frame has one, ``no_answer`` as pandas' nullable ``boolean`` (NA where missing; other
    columns are kept as they are).  Raises ``ValueError`` for missing columns, labels outside
    {0, 1}, unknown roles, non-finite scores, decisions outside {0, 1}, ``no_answer`` values that are
    not booleans, or a document listed twice within one variant.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"scores frame lacks columns {missing}")
    out = df.copy()
    out["variant"] = out["variant"].astype(str)
    out["doc_id"] = out["doc_id"].astype(str)
    bad_roles = sorted(set(out["role"].astype(str)) - set(ROLES))
    if bad_roles:
        raise ValueError(f"role must be 'reference' or 'eval', got {bad_roles}")
    out["role"] = out["role"].astype(str)
    labels = pd.to_numeric(out["label"], errors="coerce")
    if labels.isna().any() or not labels.isin([0, 1]).all():
        raise ValueError("label must be 1 (member) or 0 (non-member) on every row")
    out["label"] = labels.astype(int)
    scores = pd.to_numeric(out["score"], errors="coerce").astype(float)
    bad = ~np.isfinite(scores.to_numpy())
    if bad.any():
        variants = sorted(out.loc[bad, "variant"].unique())
        raise ValueError(f"non-finite or missing scores in variants {variants}")
    out["score"] = scores
    if "decision" in out.columns:
        dec = out["decision"].astype(object).where(out["decision"].notna(), np.nan)
        dec = pd.to_numeric(dec, errors="coerce").astype(float)
        given = out["decision"].notna()
        if (given & ~dec.isin([0.0, 1.0])).any():
            raise ValueError("decision must be 0, 1 or missing")
        out["decision"] = dec
    else:
        out["decision"] = np.nan
    for col in ("no_answer", "no_yes_no"):  # no_yes_no: a gray-box variant found no Yes/No in the top-K
        if col in out.columns:
            out[col] = _no_answer_flags(out[col])
    dup = out.duplicated(["variant", "doc_id"], keep=False)
    if dup.any():
        first = out.loc[dup, ["variant", "doc_id"]].iloc[0]
        raise ValueError(f"document {first['doc_id']!r} appears more than once in variant {first['variant']!r}")
    return out


def _split(df: pd.DataFrame, variant: str):
    """Reference/eval arrays of one validated variant, with the class-size checks.

    Rows are sorted by ``doc_id`` so that nothing depends on the input row order.
    """
    df = df.sort_values("doc_id", kind="stable")
    ref = df[df["role"] == "reference"]
    ev = df[df["role"] == "eval"]
    ref_m = ref.loc[ref["label"] == 1, "score"].to_numpy(float)
    ref_n = ref.loc[ref["label"] == 0, "score"].to_numpy(float)
    ev_m = ev[ev["label"] == 1]
    ev_n = ev[ev["label"] == 0]
    if len(ev_m) == 0 or len(ev_n) == 0:
        raise ValueError(
            f"variant {variant!r}: the eval set needs members and non-members "
            f"(has {len(ev_m)} members, {len(ev_n)} non-members)"
        )
    if ref_m.size == 0 or ref_n.size == 0:
        raise ValueError(
            f"variant {variant!r}: the reference set needs members and non-members to choose "
            f"thresholds (has {ref_m.size} members, {ref_n.size} non-members)"
        )
    return ref_m, ref_n, ev_m, ev_n


# --------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------
def paired_rng(target: str, variant: str, seed: int = 0) -> np.random.Generator:
    """The generator of a paired bootstrap of one (defended target, variant): seeded from ``seed``
    and the CRC-32 of each name, so a pair's interval depends neither on the other pairs nor on the
    order in which they are computed."""
    crc = [zlib.crc32(str(x).encode("utf-8")) for x in (target, variant)]
    return np.random.default_rng([int(seed), *crc])


def named_rng(seed: int, *names: str) -> np.random.Generator:
    """A generator seeded from ``seed`` and the CRC-32 of each name (e.g. dataset, target, measure),
    so that one cell's interval depends neither on the other cells nor on their order."""
    return np.random.default_rng([int(seed), *(zlib.crc32(str(n).encode("utf-8")) for n in names)])


def _resample_counts(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """``(n_boot, n)`` matrix: how often each item is drawn in each resample of size ``n``."""
    idx = rng.integers(0, n, size=(n_boot, n))
    flat = (idx + np.arange(n_boot)[:, None] * n).ravel()
    return np.bincount(flat, minlength=n_boot * n).reshape(n_boot, n)


def _weighted_auc(members: np.ndarray, nonmembers: np.ndarray, cm: np.ndarray, cn: np.ndarray) -> np.ndarray:
    """AUC of each bootstrap resample given by the count matrices ``cm`` and ``cn``.

    A resample's AUC is the Mann-Whitney statistic
    ``sum_ij cm[i] cn[j] ([m_i > n_j] + 0.5 [m_i == n_j]) / (sum(cm) sum(cn))``, which equals
    sklearn's ROC AUC of the resampled data (ties count one half there too).  Computed with
    cumulative counts over the sorted non-members, O(n_boot * n).
    """
    order = np.argsort(nonmembers, kind="stable")
    srt = nonmembers[order]
    cum = np.concatenate([np.zeros((cn.shape[0], 1)), np.cumsum(cn[:, order], axis=1)], axis=1)
    lt = np.searchsorted(srt, members, side="left")
    le = np.searchsorted(srt, members, side="right")
    below = cum[:, lt]  # non-members strictly below each member, per resample
    equal = cum[:, le] - below
    num = np.sum(cm * (below + 0.5 * equal), axis=1)
    den = cm.sum(axis=1) * cn.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _ci(values: np.ndarray) -> tuple[float, float]:
    """Percentile 2.5 / 97.5 of the finite values (NaN, NaN when there are none)."""
    v = values[np.isfinite(values)]  # undefined replicates are skipped
    if v.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(v, [2.5, 97.5])
    return float(lo), float(hi)


def _placements(members: np.ndarray, nonmembers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's structural components of the Mann-Whitney AUC, batched over the leading axes:
    ``v10[..., i]`` = the share of non-members that member i outscores (ties one half) and
    ``v01[..., j]`` = the share of members that outscore non-member j.  Their means are the AUC."""
    cmp = members[..., :, None] - nonmembers[..., None, :]
    psi = (cmp > 0) + 0.5 * (cmp == 0)
    return psi.mean(axis=-1), psi.mean(axis=-2)


def _cov_last(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sample covariance (ddof 1) along the last axis; 0 with a single item."""
    k = x.shape[-1]
    if k < 2:
        return np.zeros(x.shape[:-1])
    return ((x - x.mean(-1, keepdims=True)) * (y - y.mean(-1, keepdims=True))).sum(-1) / (k - 1)


def paired_auc_mover(a_members, a_nonmembers, b_members, b_nonmembers, z: float = Z95):
    """The vectorised core of :func:`paired_auc_difference`: arrays of shape ``(..., m)`` (members) and
    ``(..., n)`` (non-members), the same candidates in the same order for ``a`` and ``b``; returns
    ``(delta, lo, hi)`` of shape ``(...)``.

    MOVER (Zou & Donner 2008, "Construction of confidence limits about effect measures: a general
    approach", Statistics in Medicine 27:1693-1702; Newcombe 1998, "Improved confidence intervals for
    the difference between binomial proportions based on paired data", Statistics in Medicine
    17:2635-2650, for correlated proportions): with the score intervals ``(l_a, u_a)``, ``(l_b, u_b)`` of
    the two AUCs (:func:`auc_ci`) and the correlation ``r`` of the two estimates (DeLong, DeLong &
    Clarke-Pearson 1988, "Comparing the areas under two or more correlated receiver operating
    characteristic curves: a nonparametric approach", Biometrics 44:837-845: the covariance of the
    paired structural components),::

        lo = Δ - sqrt((A_a - l_a)² + (u_b - A_b)² - 2 r (A_a - l_a)(u_b - A_b))
        hi = Δ + sqrt((u_a - A_a)² + (A_b - l_b)² - 2 r (u_a - A_a)(A_b - l_b))

    Where either DeLong variance is 0 (an AUC of exactly 0 or 1: every resample agrees) the correlation
    is not estimable and is taken as 0, the conservative choice for positively correlated scores; r is
    clipped to [-1, 1].  The single-AUC score intervals keep their width at the boundary, so the
    difference's does too."""
    am, an = np.asarray(a_members, float), np.asarray(a_nonmembers, float)
    bm, bn = np.asarray(b_members, float), np.asarray(b_nonmembers, float)
    if am.shape != bm.shape or an.shape != bn.shape:
        raise ValueError("the two targets' scores must cover the same candidates")
    m, n = am.shape[-1], an.shape[-1]
    a10, a01 = _placements(am, an)
    b10, b01 = _placements(bm, bn)
    auc_a, auc_b = a10.mean(-1), b10.mean(-1)
    var_a = _cov_last(a10, a10) / m + _cov_last(a01, a01) / n
    var_b = _cov_last(b10, b10) / m + _cov_last(b01, b01) / n
    cov = _cov_last(a10, b10) / m + _cov_last(a01, b01) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where((var_a > 0) & (var_b > 0), cov / np.sqrt(var_a * var_b), 0.0)
    r = np.clip(np.nan_to_num(r), -1.0, 1.0)
    la, ua = auc_ci(auc_a, m, n, z)
    lb, ub = auc_ci(auc_b, m, n, z)
    delta = auc_a - auc_b
    da, db = auc_a - la, ub - auc_b
    lo = delta - np.sqrt(np.maximum(da * da + db * db - 2 * r * da * db, 0.0))
    ea, eb = ua - auc_a, auc_b - lb
    hi = delta + np.sqrt(np.maximum(ea * ea + eb * eb - 2 * r * ea * eb, 0.0))
    return delta, np.maximum(lo, -1.0), np.minimum(hi, 1.0)


def paired_auc_difference(
    labels: Sequence[int],
    scores_a: Sequence[float],
    scores_b: Sequence[float],
) -> tuple[float, float, float]:
    """``(delta, lo, hi)``: ``delta = AUC(scores_a) - AUC(scores_b)`` over the same candidates (one
    label and two scores per candidate, e.g. a defended target's and the undefended target's) and its
    95% MOVER interval (:func:`paired_auc_mover`: the two single-AUC score intervals of :func:`auc_ci`
    combined with DeLong's correlation of the paired estimates).

    It keeps its width at the boundary, where the paired percentile bootstrap it replaces collapsed
    (two perfectly separating targets gave ``(0, 0, 0)``; now about ``(0, -0.10, 0.10)`` at 20+20).
    Coverage on paired binormal scores at 20+20 (``tests/test_intervals.py``, seeded, vectorised) is
    at least 93% for true ΔAUC from 0 to 0.3, one AUC exactly 1 included.  Nothing is random."""
    y = np.asarray(labels, dtype=int)
    a = np.asarray(scores_a, dtype=float)
    b = np.asarray(scores_b, dtype=float)
    if not (y.shape == a.shape == b.shape):
        raise ValueError("labels, scores_a and scores_b differ in length")
    _check_finite(a, "scores_a")
    _check_finite(b, "scores_b")
    if not ((y == 1).any() and (y == 0).any()):
        raise ValueError("AUC is undefined unless both members and non-members are present")
    mem, non = y == 1, y == 0
    delta, lo, hi = paired_auc_mover(a[mem], a[non], b[mem], b[non])
    return float(delta), float(lo), float(hi)


def bootstrap_mean(values: Sequence[float], n_boot: int, rng: np.random.Generator) -> tuple[float, float, float, int]:
    """``(mean, lo, hi, n)`` of the finite ``values`` (one per question; NaN = no value, left out):
    the mean and its 95% percentile bootstrap interval (the items resampled with replacement,
    ``n_boot`` times; percentiles 2.5 / 97.5); all NaN with n = 0 when no value is finite."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan"), 0
    counts = _resample_counts(rng, x.size, int(n_boot))
    lo, hi = _ci(counts @ x / x.size)
    return float(x.mean()), lo, hi, int(x.size)


def paired_mean_difference(
    values_a: Sequence[float], values_b: Sequence[float], n_boot: int, rng: np.random.Generator
) -> tuple[float, float, float, int]:
    """``(delta, lo, hi, n)``: ``delta = mean(a) - mean(b)`` over the items where both values are
    finite (the same questions answered by two targets) and its 95% paired bootstrap interval: the
    *same* resampled items score both means, so the interval is that of the difference; all NaN with
    n = 0 when no item has both.  Identical values give ``(0, 0, 0, n)``."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    a = np.asarray(values_a, dtype=float)
    b = np.asarray(values_b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("values_a and values_b differ in length")
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    if d.size == 0:
        return float("nan"), float("nan"), float("nan"), 0
    counts = _resample_counts(rng, d.size, int(n_boot))
    lo, hi = _ci(counts @ d / d.size)
    return float(d.mean()), lo, hi, int(d.size)


def hanley_mcneil_se(auc: float, n_members: int, n_nonmembers: int) -> float:
    """Standard error of an AUC ``A`` estimated from ``n_members`` members and ``n_nonmembers``
    non-members (Hanley & McNeil 1982, "The meaning and use of the area under a receiver operating
    characteristic (ROC) curve", Radiology 143:29-36, eq. 2)::

        SE(A)^2 = (A(1 - A) + (n_m - 1)(Q1 - A^2) + (n_n - 1)(Q2 - A^2)) / (n_m n_n),
        Q1 = A / (2 - A),  Q2 = 2 A^2 / (1 + A).
    """
    a, nm, nn = float(auc), int(n_members), int(n_nonmembers)
    if nm < 1 or nn < 1:
        raise ValueError(f"need at least one member and one non-member, got {nm}/{nn}")
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (nm - 1) * (q1 - a * a) + (nn - 1) * (q2 - a * a)) / (nm * nn)
    return float(np.sqrt(max(var, 0.0)))


def newcombe_variance(theta, n_members: int, n_nonmembers: int):
    """Variance of the Mann-Whitney AUC at the true value ``theta`` as Newcombe's method 5 takes it
    (Newcombe 2006, "Confidence intervals for an effect size measure based on the Mann-Whitney
    statistic. Part 2: asymptotic methods and evaluation", Statistics in Medicine 25:559-573): the
    Hanley-McNeil variance (:func:`hanley_mcneil_se`, exponential model Q1 = θ/(2 - θ),
    Q2 = 2θ²/(1 + θ)) with both n_m - 1 and n_n - 1 replaced by N* = (n_m + n_n)/2 - 1::

        V(θ) = θ(1 - θ) / (n_m n_n) · [1 + N* ((1 - θ)/(2 - θ) + θ/(1 + θ))].

    Symmetric, V(θ) = V(1 - θ); equal to ``hanley_mcneil_se(θ) ** 2`` when n_m = n_n; 0 at θ = 0
    and 1.  Vectorised over ``theta``."""
    nm, nn = int(n_members), int(n_nonmembers)
    if nm < 1 or nn < 1:
        raise ValueError(f"need at least one member and one non-member, got {nm}/{nn}")
    t = np.asarray(theta, dtype=float)
    n_star = (nm + nn) / 2 - 1
    return t * (1 - t) / (nm * nn) * (1 + n_star * ((1 - t) / (2 - t) + t / (1 + t)))


def _score_lower(a: np.ndarray, nm: int, nn: int, z: float, grid: int = 512, steps: int = 60) -> np.ndarray:
    """Lower end of Newcombe's score interval for each finite ``a`` in [0, 1]: the smallest θ in
    [0, a] with (a - θ)² <= z² V(θ).  At θ = a the inequality holds, at θ = 0 it fails unless a = 0;
    the first grid point of [0, a] where it holds brackets the crossing with its predecessor, and
    ``steps`` bisections narrow it to (a / grid) / 2**steps."""
    frac = np.linspace(0.0, 1.0, grid + 1)
    th = a[:, None] * frac[None, :]
    inside = (a[:, None] - th) ** 2 <= z * z * newcombe_variance(th, nm, nn)
    j = np.argmax(inside, axis=1)  # the first grid point inside (the last one, θ = a, always is)
    left = a * frac[np.maximum(j - 1, 0)]
    right = a * frac[j]
    for _ in range(steps):
        mid = (left + right) / 2
        ok = (a - mid) ** 2 <= z * z * newcombe_variance(mid, nm, nn)
        left, right = np.where(ok, left, mid), np.where(ok, mid, right)
    return np.where(j == 0, 0.0, right)


def auc_ci(auc, n_members: int, n_nonmembers: int, z: float = Z95):
    """``(lo, hi)``: the 95% (for the default ``z``) confidence interval of an AUC ``auc`` estimated
    from ``n_members`` members and ``n_nonmembers`` non-members by Newcombe's method 5 (Newcombe
    2006, Statistics in Medicine 25:559-573, Part 2 of "Confidence intervals for an effect size
    measure based on the Mann-Whitney statistic"): the set of θ with ``|auc - θ| <= z SE(θ)``, the
    standard error evaluated at the candidate θ (:func:`newcombe_variance`), not at the estimate.

    A score interval, in the way Wilson's is for a proportion: it keeps its width at the boundary,
    where a percentile bootstrap collapses to a point (every resample of perfectly separated scores
    has AUC 1; every resample of constant scores has AUC 0.5).  At 20+20, AUC 1.00 gets [0.90, 1]
    and 0.50 gets [0.33, 0.67].  Coverage measured on binormal scores at 20+20 (4,000 replicates
    each, ``tests/test_intervals.py`` keeps a seeded 2,000): 94.4% at AUC 0.5, 95.5% at 0.6 to 0.8,
    96.4% at 0.9, 96.8% at 0.95, 97.4% at 0.99 -- nominal, conservative near 1 (where the percentile
    bootstrap covered 86% at 0.97).  The set is found by a grid over [0, auc] and bisection (to
    1e-12); it is one interval (checked against a 5e-7 grid).
    ``auc`` may be a scalar (floats back) or an array (arrays back); NaN gives NaN.  The
    interval contains 0.5 exactly when ``|auc - 0.5| <= z SE(0.5)``, i.e. when ``auc`` is below
    :func:`min_detectable_auc` (and above its mirror image)."""
    a = np.asarray(auc, dtype=float)
    nm, nn = int(n_members), int(n_nonmembers)
    if nm < 1 or nn < 1:
        raise ValueError(f"need at least one member and one non-member, got {nm}/{nn}")
    if np.any((a < 0) | (a > 1)):
        raise ValueError(f"an AUC lies in [0, 1], got {auc}")
    flat = a.reshape(-1)
    lo = np.full(flat.shape, np.nan)
    hi = np.full(flat.shape, np.nan)
    ok = np.isfinite(flat)
    if ok.any():
        lo[ok] = _score_lower(flat[ok], nm, nn, float(z))
        hi[ok] = 1.0 - _score_lower(1.0 - flat[ok], nm, nn, float(z))  # V(θ) = V(1 - θ): mirror image
    if a.ndim == 0:
        return float(lo[0]), float(hi[0])
    return lo.reshape(a.shape), hi.reshape(a.shape)


EXACT_MWU_MAX_PAIRS = 10_000  # the exact Mann-Whitney null up to 100 x 100 pairs (0.1 s); normal beyond


def auc_pvalues(member_scores: Sequence[float], nonmember_scores: Sequence[float]) -> tuple[float, float]:
    """``(p, p_greater)``: the Mann-Whitney test of AUC = 0.5 on a variant's evaluation scores, two-sided
    (``auc_p``) and one-sided against AUC > 0.5 (``auc_p_greater``: members score higher).

    Exact (the permutation null of U, :func:`scipy.stats.mannwhitneyu` ``method="exact"``) when no two
    scores tie and there are at most :data:`EXACT_MWU_MAX_PAIRS` member × non-member pairs; otherwise
    the normal approximation with the tie-corrected variance and a continuity correction.  Constant
    scores (every pair tied) give 1, 1: an uninformative variant rejects nothing."""
    from scipy import stats

    m = np.asarray(member_scores, dtype=float)
    n = np.asarray(nonmember_scores, dtype=float)
    if m.size == 0 or n.size == 0:
        raise ValueError("the Mann-Whitney test needs members and non-members")
    pooled = np.r_[m, n]
    if np.all(pooled == pooled[0]):
        return 1.0, 1.0
    ties = np.unique(pooled).size < pooled.size
    method = "exact" if not ties and m.size * n.size <= EXACT_MWU_MAX_PAIRS else "asymptotic"
    two = stats.mannwhitneyu(m, n, alternative="two-sided", method=method).pvalue
    greater = stats.mannwhitneyu(m, n, alternative="greater", method=method).pvalue
    return float(min(1.0, two)), float(min(1.0, greater))


def auc_pvalues_from_auc(auc, n_members: int, n_nonmembers: int) -> tuple[float, float]:
    """``(p, p_greater)`` of AUC = 0.5 from an AUC and its sizes alone, for a metrics row written
    before ``auc_p`` existed: the normal approximation with the null variance of U without ties,
    ``(m + n + 1) / (12 m n)`` on the AUC scale.  NaN, NaN for a missing AUC."""
    from statistics import NormalDist

    a, nm, nn = float(auc), int(n_members), int(n_nonmembers)
    if a != a or nm < 1 or nn < 1:
        return float("nan"), float("nan")
    z = (a - 0.5) / float(np.sqrt((nm + nn + 1) / (12.0 * nm * nn)))
    greater = 1.0 - NormalDist().cdf(z)
    return float(min(1.0, 2 * min(greater, 1.0 - greater))), float(greater)


def clopper_pearson_lower(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson lower bound on a proportion with ``k`` successes out of ``n``:
    the ``1 - confidence`` quantile of Beta(k, n - k + 1); 0 when k = 0."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    if k == 0:
        return 0.0
    from scipy import stats

    return float(stats.beta.ppf(1.0 - confidence, k, n - k + 1))


def clopper_pearson(k, n, alpha: float = 0.05):
    """``(lo, hi)``: the exact (Clopper & Pearson 1934, "The use of confidence or fiducial limits
    illustrated in the case of the binomial", Biometrika 26:404-413) two-sided ``1 - alpha``
    interval of a binomial proportion with ``k`` successes in ``n`` trials: ``lo`` the
    ``alpha/2`` quantile of Beta(k, n - k + 1) (0 when k = 0), ``hi`` the ``1 - alpha/2`` quantile of
    Beta(k + 1, n - k) (1 when k = n).  Its coverage is at least ``1 - alpha`` for every true
    proportion (conservative), and it never collapses to a point: 0 of 20 gives [0, 0.168].  NaN,
    NaN when n = 0.  Scalars give floats, arrays (broadcast) give arrays."""
    from scipy.special import betaincinv  # the inverse regularised incomplete beta function

    kk = np.asarray(k, dtype=float)
    nn = np.asarray(n, dtype=float)
    if np.any(kk < 0) or np.any(kk > nn) or np.any(kk != np.round(kk)) or np.any(nn != np.round(nn)):
        raise ValueError(f"clopper_pearson needs whole counts 0 <= k <= n, got k={k}, n={n}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    kk, nn = np.broadcast_arrays(kk, nn)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(kk > 0, betaincinv(np.maximum(kk, 1e-300), nn - kk + 1, alpha / 2), 0.0)
        hi = np.where(kk < nn, betaincinv(kk + 1, np.maximum(nn - kk, 1e-300), 1 - alpha / 2), 1.0)
    lo = np.where(nn > 0, lo, np.nan)
    hi = np.where(nn > 0, hi, np.nan)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def min_detectable_auc(n_members: int, n_nonmembers: int, z: float = 1.96) -> float:
    """The smallest AUC ``A > 0.5`` whose interval (:func:`auc_ci` at this ``z``) excludes 0.5 with
    ``n_members`` members and ``n_nonmembers`` non-members in the evaluation set:
    ``0.5 + z SE(0.5)``, ``SE`` Newcombe's method-5 standard error (:func:`newcombe_variance`, the
    Hanley-McNeil 1982 variance with N* = (n_m + n_n)/2 - 1; Hanley-McNeil's own when n_m = n_n).
    An observed AUC above it is reported as leaking; 0.68 at 20+20, 0.76 at 10+10.

    As a power statement it is weak: an attack whose *true* AUC equals this value is detected only
    about half the time (its estimate falls on either side of the boundary about equally often), so
    it is the AUC detected with 50% power.  :func:`min_detectable_auc_power` gives the AUC detected
    with a chosen power (80% by default).  NaN when no AUC in [0, 1] is detectable (1+1, 2+2)."""
    a = 0.5 + float(z) * float(np.sqrt(newcombe_variance(0.5, n_members, n_nonmembers)))
    return a if a <= 1.0 else float("nan")


def min_detectable_auc_power(n_m: int, n_n: int, power: float = 0.8, z: float = 1.96) -> float:
    """The smallest *true* AUC ``A`` that a run with ``n_m`` members and ``n_n`` non-members detects
    (its interval, :func:`auc_ci`, excludes 0.5) with probability ``power``.

    The interval excludes 0.5 (on the upper side) when the estimate exceeds
    ``c = 0.5 + z SE_N(0.5)`` (:func:`min_detectable_auc`); with the estimate approximately normal
    around ``A`` with the Hanley-McNeil standard error ``SE_HM(A)`` (:func:`hanley_mcneil_se`), the
    power at ``A`` is ``Φ((A - c) / SE_HM(A))``, and the function returns the root of
    ``A - z_power SE_HM(A) = c``, ``z_power = Φ⁻¹(power)``, on (0.5, 1] (``A - z_power SE_HM(A)``
    increases there; bisection to 1e-12).  At 20+20 it is 0.747: ``tests/test_intervals.py`` draws
    binormal scores at that AUC and detects 79.8% of 2,000 runs (at :func:`min_detectable_auc`, 0.681,
    50.3%).  The shortcut ``A - (z + z_power) SE_HM(A) = 0.5``, which takes the standard error at
    ``A`` for the null as well, gives 0.726 at 20+20, detected only 72% of the time with this
    interval.  8+8: 0.871, 10+10: 0.838, 50+50: 0.660.  NaN when no AUC <= 1 reaches ``power``."""
    from statistics import NormalDist

    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    c = 0.5 + float(z) * float(np.sqrt(newcombe_variance(0.5, n_m, n_n)))
    zp = NormalDist().inv_cdf(float(power))

    def gap(a: float) -> float:
        return a - zp * hanley_mcneil_se(a, n_m, n_n) - c

    if gap(1.0) < 0:
        return float("nan")
    lo, hi = 0.5, 1.0
    if gap(lo) > 0:  # power below 50%: the root may lie at or below 0.5; not a detectable AUC above chance
        return float("nan")
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(mid) <= 0 else (lo, mid)
    return float(hi)


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------
def _roc_true_positives(members: np.ndarray, nonmembers: np.ndarray, fpr: float) -> int:
    """The members above the eval-ROC threshold with the largest TPR at eval FPR <= ``fpr``.

    With ``a = floor(fpr * n)`` false positives allowed, the lowest admissible threshold lies just
    above the (a + 1)-th largest non-member score ``v`` (every rule ``score > v`` keeps at most ``a``
    non-members, and no lower threshold does); the count is then the members scoring above ``v``.
    A threshold sits between distinct scores, so members tied with ``v`` are not counted, and
    non-members tied at the top move together.  All members when ``a >= n``."""
    allowed = int(np.floor(float(fpr) * nonmembers.size + 1e-9))
    if allowed >= nonmembers.size:
        return int(members.size)
    v = np.sort(nonmembers)[::-1][allowed]
    return int((members > v).sum())


def informative_flags(eval_scores: Sequence[float], no_answer: Sequence[bool] | None = None) -> tuple[bool, str]:
    """``(informative, uninformative_reason)`` of a variant from its eval scores and, when the
    attack reports it, its eval ``no_answer`` flags (NA counts as False).  Uninformative when every
    eval score is the same (:data:`CONSTANT_SCORES`: the attack gave every candidate the same score,
    e.g. every answer was "No.") or when every eval row is ``no_answer`` (:data:`NO_ANSWER_READ`:
    the attack could not read a single answer); both reasons, joined by "; ", when both hold.  The
    reason is "" for an informative variant."""
    s = np.asarray(eval_scores, dtype=float)
    reasons = []
    if s.size and np.all(s == s[0]):
        reasons.append(CONSTANT_SCORES)
    if no_answer is not None:
        flags = pd.array(list(no_answer), dtype="boolean").fillna(False).to_numpy(dtype=bool)
        if flags.size and flags.all():
            reasons.append(NO_ANSWER_READ)
    return not reasons, "; ".join(reasons)


def evaluate_variant(
    df_one_variant: pd.DataFrame,
    fprs: Sequence[float] = DEFAULT_FPRS,
    n_boot: int = 1000,
) -> dict:
    """All metrics of one variant; see the module docstring for the protocol.

    Returns a dict with the keys of :func:`metric_columns` (``bb_*`` keys only when the variant
    has a decision rule).  ``accuracy`` is the eval accuracy of the variant's own decision rule
    (NaN without one) and ``bb_tpr`` / ``bb_fpr`` its eval TPR / FPR (no threshold of ragmi's
    involved).  ``threshold_acc`` / ``threshold_fpr_{k}`` are the reference-set thresholds on the
    score; ``threshold_accuracy`` and ``tpr_at_fpr_{k}`` are their eval-set results and
    ``fpr_realized_{k}`` the eval FPR of ``threshold_fpr_{k}``; those of ``fpr_{k}`` are NaN for a
    level the reference set cannot resolve (fewer than 1/fpr reference non-members,
    :func:`fpr_estimable`).  ``tpr_roc_{k}`` is the TPR read from the eval ROC curve at eval FPR
    <= k% (NaN unless :func:`roc_estimable`).  The AUC interval is :func:`auc_ci`, every rate's
    :func:`clopper_pearson`; ``n_boot`` changes no number (it is recorded).
    ``informative`` / ``uninformative_reason``: :func:`informative_flags`; ``n_no_answer``: the eval
    rows with ``no_answer`` True (NaN when the frame has no ``no_answer`` column, or it is NA on
    every eval row of the variant).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    variants = df_one_variant["variant"].astype(str).unique() if "variant" in df_one_variant else []
    if len(variants) != 1:
        raise ValueError(f"evaluate_variant needs exactly one variant, got {list(variants)}")
    variant = str(variants[0])
    df = check_scores_frame(df_one_variant)
    ref_m, ref_n, ev_m, ev_n = _split(df, variant)
    m = ev_m["score"].to_numpy(float)
    n = ev_n["score"].to_numpy(float)
    labels = np.r_[np.ones(m.size, int), np.zeros(n.size, int)]

    row: dict = {
        "variant": variant,
        "n_ref_members": int(ref_m.size),
        "n_ref_nonmembers": int(ref_n.size),
        "n_members": int(m.size),
        "n_nonmembers": int(n.size),
        "n_boot": int(n_boot),
    }
    _add_answer_flags(row, df, ev_m, ev_n, m, n)

    row["auc"] = roc_auc(labels, np.r_[m, n])
    row["auc_lo"], row["auc_hi"] = auc_ci(row["auc"], m.size, n.size)
    row["auc_p"], row["auc_p_greater"] = auc_pvalues(m, n)

    _add_threshold_accuracy(row, ref_m, ref_n, m, n)
    for f in fprs:
        _add_fpr_level(row, f, ref_n, m, n)
    _add_decision_rule(row, variant, ev_m, ev_n, m, n)
    return row


def _add_answer_flags(row: dict, df: pd.DataFrame, ev_m, ev_n, m: np.ndarray, n: np.ndarray) -> None:
    """``n_no_answer``, ``informative`` and ``uninformative_reason`` of the variant's eval rows."""
    no_answer = None
    row["n_no_answer"] = float("nan")
    if "no_answer" in df.columns:
        flags = pd.concat([ev_m["no_answer"], ev_n["no_answer"]])
        if flags.notna().any():  # all NA: the attack did not say (e.g. a frame concatenated with others)
            no_answer = flags.fillna(False).to_numpy(dtype=bool)
            row["n_no_answer"] = int(no_answer.sum())
    unread = no_answer
    if "no_yes_no" in df.columns:
        # a gray-box variant reads the top-K log-probabilities, not the text: what it could not read is a
        # response with no Yes/No among them (no_yes_no), where the attack says so, not an unparsed text
        gray = pd.concat([ev_m["no_yes_no"], ev_n["no_yes_no"]])
        if gray.notna().any():
            text = np.zeros(len(gray), dtype=bool) if no_answer is None else no_answer
            unread = np.where(gray.notna().to_numpy(), gray.fillna(False).to_numpy(dtype=bool), text)
    row["informative"], row["uninformative_reason"] = informative_flags(np.r_[m, n], unread)


def _add_threshold_accuracy(row: dict, ref_m, ref_n, m: np.ndarray, n: np.ndarray) -> None:
    """The reference set's max-accuracy threshold and its eval accuracy (``accuracy*`` set to NaN: the
    decision rule's, filled by :func:`_add_decision_rule`)."""
    n_eval = m.size + n.size
    nan = float("nan")
    t_acc = threshold_max_accuracy(np.r_[np.ones(ref_m.size, int), np.zeros(ref_n.size, int)], np.r_[ref_m, ref_n])
    correct = int((m >= t_acc).sum() + (n < t_acc).sum())
    row["accuracy"] = row["accuracy_lo"] = row["accuracy_hi"] = nan  # filled when there is a rule
    row["threshold_acc"] = t_acc
    row["threshold_accuracy"] = correct / n_eval
    row["threshold_accuracy_lo"], row["threshold_accuracy_hi"] = clopper_pearson(correct, n_eval)


def _add_fpr_level(row: dict, f: float, ref_n, m: np.ndarray, n: np.ndarray) -> None:
    """The columns of FPR level ``f``: the reference threshold's TPR and realised FPR, the eval ROC's TPR."""
    k = fpr_key(f)
    nan = float("nan")
    if fpr_estimable(f, ref_n.size):
        t = threshold_at_fpr(ref_n, f)
        tp, fp = int((m >= t).sum()), int((n >= t).sum())
        row[f"threshold_fpr_{k}"] = t
        row[f"tpr_at_fpr_{k}"] = tp / m.size
        row[f"tpr_at_fpr_{k}_lo"], row[f"tpr_at_fpr_{k}_hi"] = clopper_pearson(tp, m.size)
        row[f"fpr_realized_{k}"] = fp / n.size
        row[f"fpr_realized_{k}_lo"], row[f"fpr_realized_{k}_hi"] = clopper_pearson(fp, n.size)
    else:  # 1/f reference non-members needed: not estimable
        for col in ("threshold_fpr", "tpr_at_fpr", "fpr_realized"):
            row[f"{col}_{k}"] = nan
        for col in ("tpr_at_fpr", "fpr_realized"):
            row[f"{col}_{k}_lo"] = row[f"{col}_{k}_hi"] = nan
    if roc_estimable(f, n.size):
        tp = _roc_true_positives(m, n, f)
        row[f"tpr_roc_{k}"] = tp / m.size
        row[f"tpr_roc_{k}_lo"], row[f"tpr_roc_{k}_hi"] = clopper_pearson(tp, m.size)
    else:
        row[f"tpr_roc_{k}"] = row[f"tpr_roc_{k}_lo"] = row[f"tpr_roc_{k}_hi"] = nan


def _add_decision_rule(row: dict, variant: str, ev_m, ev_n, m: np.ndarray, n: np.ndarray) -> None:
    """The variant's own decision rule on the eval set, where it has one: ``accuracy*`` and ``bb_*``."""
    n_eval = m.size + n.size
    dec_m = ev_m["decision"].to_numpy(float)
    dec_n = ev_n["decision"].to_numpy(float)
    has = np.r_[~np.isnan(dec_m), ~np.isnan(dec_n)]
    if has.any():
        if not has.all():
            raise ValueError(f"variant {variant!r}: decision is given for some eval rows but not for all")
        k_tp, k_fp = int(dec_m.sum()), int(dec_n.sum())
        right = k_tp + (n.size - k_fp)
        row["accuracy"] = right / n_eval
        row["accuracy_lo"], row["accuracy_hi"] = clopper_pearson(right, n_eval)
        row["bb_tpr"] = k_tp / m.size
        row["bb_tpr_lo"], row["bb_tpr_hi"] = clopper_pearson(k_tp, m.size)
        row["bb_fpr"] = k_fp / n.size
        row["bb_fpr_lo"], row["bb_fpr_hi"] = clopper_pearson(k_fp, n.size)


def evaluate(
    scores_df: pd.DataFrame,
    fprs: Sequence[float] = DEFAULT_FPRS,
    n_boot: int = 1000,
    costs: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """One row of :func:`evaluate_variant` per variant, sorted by variant.

    Columns are :func:`metric_columns` (``bb_*`` are NaN for variants without hard decisions),
    followed by the per-variant ``costs`` columns (e.g. ``queries_per_candidate``), in the order they
    first appear; variants without a cost entry get NaN there.
    """
    df = check_scores_frame(scores_df)
    if df.empty:
        raise ValueError("scores frame is empty")
    variants = sorted(df["variant"].unique())
    rows = [evaluate_variant(df[df["variant"] == v], fprs=fprs, n_boot=n_boot) for v in variants]
    cols = metric_columns(fprs)
    out = pd.DataFrame(rows).reindex(columns=cols)
    if costs:
        unknown = sorted(set(costs) - set(variants))
        if unknown:
            raise ValueError(f"costs given for variants without scores: {unknown}")
        cost_cols: list[str] = []
        for v in variants:
            for c in costs.get(v, {}):
                if c not in cost_cols:
                    cost_cols.append(c)
        clash = [c for c in cost_cols if c in cols]
        if clash:
            raise ValueError(f"cost columns clash with metric columns: {clash}")
        for c in cost_cols:
            out[c] = [costs.get(v, {}).get(c, np.nan) for v in variants]
    return out


# --------------------------------------------------------------------------------------------
# TPR conditional on retrieval
# --------------------------------------------------------------------------------------------
RETRIEVED_COLUMNS = [
    "tpr_retrieved_fpr",
    "tpr_retrieved",
    "tpr_retrieved_lo",
    "tpr_retrieved_hi",
    "n_retrieved_members",
]


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes out of ``n`` (NaN, NaN when n = 0).  Used by the
    audit's detection rates; the rates of :func:`evaluate` use :func:`clopper_pearson`."""
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * float(np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / den
    return max(0.0, centre - half), min(1.0, centre + half)


def lowest_resolvable_fpr(fprs: Iterable[float], n_ref_nonmembers) -> float | None:
    """The lowest non-zero level of ``fprs`` that ``n_ref_nonmembers`` resolve (:func:`fpr_estimable`;
    every level when the size is unknown, NaN), else 0 when it is configured, else None: the level of
    the summary table's TPR."""
    levels = sorted(float(f) for f in fprs)
    unknown = n_ref_nonmembers is None or n_ref_nonmembers != n_ref_nonmembers
    ok = [f for f in levels if f > 0 and (unknown or fpr_estimable(f, int(n_ref_nonmembers)))]
    if ok:
        return ok[0]
    return 0.0 if 0.0 in levels else None


def conditional_tpr(member_scores: Sequence[float], condition: Sequence[bool], threshold: float) -> dict:
    """TPR at ``threshold`` (a member is positive when its score >= threshold, as for ``tpr_at_fpr``)
    over the members for which ``condition`` holds, with its n and 95% Clopper-Pearson interval
    (:func:`clopper_pearson`, as every rate of :func:`evaluate`): ``{"n", "k", "tpr", "lo", "hi"}``
    (tpr, lo, hi NaN when n = 0)."""
    s = np.asarray(member_scores, dtype=float)
    c = np.asarray(condition, dtype=bool)
    if s.shape != c.shape:
        raise ValueError(f"conditional_tpr: {s.size} scores but {c.size} condition flags")
    n = int(c.sum())
    k = int((s[c] >= threshold).sum())
    lo, hi = clopper_pearson(k, n)
    return {"n": n, "k": k, "tpr": k / n if n else float("nan"), "lo": lo, "hi": hi}


def retrieved_tpr(
    scores_df: pd.DataFrame,
    metrics_df: pd.DataFrame,
    retrieved: Mapping[str, Mapping[str, bool] | None],
    fprs: Sequence[float] = DEFAULT_FPRS,
) -> pd.DataFrame:
    """The ``RETRIEVED_COLUMNS`` of every row of ``metrics_df`` (:func:`evaluate`'s output), in its order.

    ``retrieved[variant]`` maps each candidate's ``doc_id`` to whether its own document was retrieved
    for at least one of the variant's queries; None (or a missing variant) when the target does not
    say what it retrieved: every column NaN.  For a variant with flags, the threshold is the
    reference-set threshold of :func:`lowest_resolvable_fpr` (``threshold_fpr_<k>`` of the row,
    never refitted here) and the TPR is taken over the *evaluation* members whose flag is True
    (:func:`conditional_tpr`); members without a flag count as not retrieved.  Where no configured level
    is resolvable (no 0 level and too few reference non-members) only ``n_retrieved_members`` is set."""
    df = check_scores_frame(scores_df)
    rows = []
    for _, r in metrics_df.iterrows():
        v = str(r["variant"])
        flags = retrieved.get(v)
        row = dict.fromkeys(RETRIEVED_COLUMNS, float("nan"))
        level = lowest_resolvable_fpr(fprs, r.get("n_ref_nonmembers"))
        ev = df[(df["variant"] == v) & (df["role"] == "eval") & (df["label"] == 1)]
        if flags is not None and len(ev):
            hit = [bool(flags.get(str(d), False)) for d in ev["doc_id"]]
            row["n_retrieved_members"] = int(sum(hit))
            t = r.get(f"threshold_fpr_{fpr_key(level)}") if level is not None else None
            if t is not None and t == t:  # else no level is resolvable: n only (the table prints n/e)
                c = conditional_tpr(ev["score"], hit, float(t))
                row.update(tpr_retrieved_fpr=level, tpr_retrieved=c["tpr"], tpr_retrieved_lo=c["lo"])
                row["tpr_retrieved_hi"] = c["hi"]
        rows.append(row)
    return pd.DataFrame(rows, columns=RETRIEVED_COLUMNS, index=metrics_df.index)
