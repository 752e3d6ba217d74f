"""Dataset inference against a RAG system: is this *set* of documents in the retrieval database?

The data owner's question is about a set, not one document.  Following Maini, Jia, Papernot &
Dziedzic (NeurIPS 2024, "LLM Dataset Inference: Did you train on my dataset?"), the per-document
scores of several membership-inference attacks are combined by a linear model learned on held-out documents whose
membership is known, and an exact one-sided rank test (Wilcoxon-Mann-Whitney) asks whether the suspect
documents' combined scores exceed those of documents known to be outside the database.  One document rarely gives
strong evidence; tens of them together can.

Pipeline of the pure functions below (the rule that wires them in reads the score files and the
candidates' split):

1. :func:`feature_matrix`: one row per document, one column per attack variant (the variant's
   score); a missing score is imputed with the *reference* median of its column, and a column that
   is constant on the reference documents (it cannot be standardised) is dropped.
2. :func:`fit_combiner` / :class:`Combiner`: standardise with the reference mean and standard
   deviation, then an L2-regularised logistic regression (scikit-learn, lbfgs, fixed
   ``random_state``: deterministic) fitted on the **reference** candidates only, whose labels the
   adversary knows.  Its combined score (the log-odds, higher = more member-like) is computed for
   other documents only: :meth:`Combiner.score` raises when asked to score a document it was fitted
   on (an in-sample combiner makes the test reject on non-members, see :func:`calibrate`).
3. :func:`exact_one_sided`: the exact one-sided Mann-Whitney / permutation test with its floor
   (:func:`rank_floor`, the smallest p the set sizes allow); degenerate inputs give a NaN p-value with
   a reason, never a made-up 0 or 1.  :func:`welch_checked`: Welch's t-test as a secondary number,
   only where its assumptions were checked.
4. :func:`smallest_significant_size`: how many suspect documents the test needs.
5. :func:`default_sets` / :func:`user_sets`: the experiments (which documents are suspect, which
   known outside) and :func:`dataset_inference_rows`: one row per experiment.
6. :func:`calibrate`: the false-positive rate of the test on non-members disjoint from the tested
   sets (:func:`out_of_fold_scores` of the reference non-members), from independent disjoint splits,
   with its Clopper-Pearson interval (:func:`ragmi.metrics.clopper_pearson`).
7. :func:`shift_sets` and :func:`difference_scores`: suspect sets of non-members that differ from the
   outside set (length, topic), and the fix, each document's score on the target minus on its
   null-database control (Duan et al. 2024, "Do membership inference attacks work on large language
   models?"; Maini et al. 2024).

:func:`dataset_inference` runs 1-5 on score frames and a candidates frame.

Where the scores come from (the project's protocol): the reference candidates' scores of fitted
variants are out-of-fold, and the evaluation candidates' scores come from models fitted on the
reference set only, so the combiner (fitted on reference) never sees an evaluation document.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from .metrics import clopper_pearson

ALPHA = 0.01  # the verdict's significance level
DEFAULT_F_VALUES: tuple[float, ...] = (1.0, 0.5, 0.25)
IN_DATABASE = "in the database"
NO_EVIDENCE = "no evidence"
UNINFORMATIVE = "uninformative"
ROW_COLUMNS = [
    "suspect_set",
    "f",
    "f_target",
    "n_suspect",
    "n_suspect_members",
    "n_outside",
    "mean_suspect",
    "mean_outside",
    "u",
    "p_value",
    "p_floor",
    "test",
    "verdict",
    "reason",
    "p_welch",
    "welch_reason",
    "min_suspect_size",
    "variants",
    "alpha",
]
# Reasons of a NaN p-value (:func:`welch_one_sided`)
TOO_FEW_SUSPECT = "fewer than 2 suspect documents"
TOO_FEW_OUTSIDE = "fewer than 2 known-outside documents"
ZERO_VARIANCE = "zero variance on both sides"


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------
def feature_matrix(score_frames: pd.DataFrame | Iterable[pd.DataFrame], reference_ids: Iterable) -> pd.DataFrame:
    """The per-document feature matrix of the combiner: index ``doc_id`` (str, sorted), one column
    per attack ``variant`` (sorted), the variant's ``score`` (higher = more member-like).

    ``score_frames`` is one long score frame or several (one per attack), each with the columns
    ``doc_id``, ``variant``, ``score`` (others are ignored); a (doc_id, variant) pair given twice
    raises ``ValueError``, as do infinite scores.  ``reference_ids`` are the reference candidates:
    the statistics that fill and filter the columns are taken on them only, never on the documents
    the test will be run on.

    * A missing score (NaN, or a document the variant did not score) is replaced by the median of
      the column over the reference documents.
    * A column is dropped when its reference documents have no score at all, or when (after the
      imputation) all its reference scores are equal: it cannot be standardised and carries no
      information the combiner could learn.  ``result.attrs["dropped"]`` maps each dropped variant
      to its reason.

    Documents outside ``reference_ids`` keep their rows (they are what the combiner scores).  At
    least one reference document must appear in the frames.
    """
    frames = [score_frames] if isinstance(score_frames, pd.DataFrame) else list(score_frames)
    if not frames:
        raise ValueError("feature_matrix needs at least one score frame")
    parts = []
    for f in frames:
        missing = [c for c in ("doc_id", "variant", "score") if c not in f.columns]
        if missing:
            raise ValueError(f"score frame lacks columns {missing}")
        parts.append(f[["doc_id", "variant", "score"]])
    long = pd.concat(parts, ignore_index=True)
    long = long.assign(
        doc_id=long["doc_id"].astype(str),
        variant=long["variant"].astype(str),
        score=pd.to_numeric(long["score"], errors="coerce").astype(float),
    )
    if np.isinf(long["score"].to_numpy()).any():
        raise ValueError("infinite scores; a missing score is NaN, every other score must be finite")
    dup = long.duplicated(["doc_id", "variant"], keep=False)
    if dup.any():
        first = long.loc[dup].iloc[0]
        raise ValueError(f"document {first['doc_id']!r} has more than one score in variant {first['variant']!r}")
    wide = long.pivot(index="doc_id", columns="variant", values="score").sort_index().sort_index(axis=1)
    wide.columns.name = None
    ref = sorted(set(map(str, reference_ids)) & set(wide.index))
    if not ref:
        raise ValueError("none of the reference documents has a score: nothing to fit the combiner on")
    dropped: dict[str, str] = {}
    for col in list(wide.columns):
        med = wide.loc[ref, col].median()  # NaN-skipping
        if not np.isfinite(med):
            dropped[col] = "no reference scores"
            continue
        wide[col] = wide[col].fillna(med)
        r = wide.loc[ref, col].to_numpy(float)
        if np.all(r == r[0]):
            dropped[col] = "constant on the reference documents"
    out = wide.drop(columns=list(dropped))
    out.attrs["dropped"] = dropped
    return out


# --------------------------------------------------------------------------------------------
# The combiner
# --------------------------------------------------------------------------------------------
_CONTROLLER: list = []


def _single_thread():
    """A context limiting the BLAS / OpenMP thread pools to one thread (threadpoolctl, a dependency
    of scikit-learn; its controller, which scans the loaded libraries, is built once)."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1)


@dataclass(frozen=True, eq=False)  # numpy fields: compare by identity
class Combiner:
    """A fitted linear combination of attack scores (:func:`fit_combiner`).

    ``score(x) = intercept + sum_j coef_j (x_j - mean_j) / sd_j``: the log-odds of membership of
    the logistic regression, in the units of its standardised inputs.  ``fit_ids`` are the documents
    it was fitted on; :meth:`score` refuses them."""

    columns: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    coef: np.ndarray
    intercept: float
    fit_ids: frozenset
    C: float
    random_state: int

    def score(self, features: pd.DataFrame) -> pd.Series:
        """The combined score of each row of ``features`` (index doc_id; the combiner's columns, in
        any order, extra columns ignored).  Raises ``ValueError`` when a row is a document the
        combiner was fitted on, when a column is missing, or when a value is not finite."""
        ids = features.index.astype(str)
        overlap = sorted(set(ids) & self.fit_ids)
        if overlap:
            raise ValueError(
                f"the combiner was fitted on {len(overlap)} of the documents it is asked to score "
                f"(e.g. {overlap[0]!r}); combined scores must come from a combiner fitted on other documents"
            )
        missing = [c for c in self.columns if c not in features.columns]
        if missing:
            raise ValueError(f"features lack the combiner's columns {missing}")
        x = features.loc[:, list(self.columns)].to_numpy(float)
        if not np.all(np.isfinite(x)):
            raise ValueError("features contain NaN or infinite values (feature_matrix imputes missing scores)")
        z = (x - self.mean) / self.sd
        return pd.Series(z @ self.coef + self.intercept, index=pd.Index(ids, name="doc_id"), name="combined")


def fit_combiner(
    features: pd.DataFrame, labels: Mapping | pd.Series, C: float = 1.0, random_state: int = 0
) -> Combiner:
    """Fit the combiner on the documents of ``labels`` (doc_id -> 1 member / 0 non-member; the
    reference candidates, whose membership the adversary knows) with their rows of ``features``
    (:func:`feature_matrix`).

    Standardisation: the mean and the standard deviation (ddof 0) of each column over these
    documents.  Model: ``sklearn.linear_model.LogisticRegression`` with an L2 penalty of inverse
    strength ``C`` on the standardised inputs, solver lbfgs (deterministic; ``random_state`` is fixed
    and recorded all the same).  Raises ``ValueError`` when a labelled document has no row, when
    only one class is present, when labels are not 0/1, or when a column is constant over the
    documents (it cannot be standardised; :func:`feature_matrix` drops such columns)."""
    lab = pd.Series(labels, dtype=object) if not isinstance(labels, pd.Series) else labels.copy()
    lab.index = lab.index.astype(str)
    y = pd.to_numeric(lab, errors="coerce")
    if y.isna().any() or not y.isin([0, 1]).all():
        raise ValueError("labels must be 1 (member) or 0 (non-member)")
    y = y.astype(int).sort_index()
    feats = features.copy()
    feats.index = feats.index.astype(str)
    missing = sorted(set(y.index) - set(feats.index))
    if missing:
        raise ValueError(f"{len(missing)} labelled documents have no features (e.g. {missing[0]!r})")
    if y.nunique() < 2:
        raise ValueError("the combiner needs both members and non-members to fit")
    if feats.shape[1] == 0:
        raise ValueError("no feature columns to combine")
    x = feats.loc[y.index].to_numpy(float)
    if not np.all(np.isfinite(x)):
        raise ValueError("features contain NaN or infinite values (feature_matrix imputes missing scores)")
    mean, sd = x.mean(axis=0), x.std(axis=0)
    const = [str(c) for c, s in zip(feats.columns, sd) if not s > 0]
    if const:
        raise ValueError(f"columns {const} are constant on the fitting documents; drop them (feature_matrix does)")
    from sklearn.linear_model import LogisticRegression  # here, not at import (about 1 s)

    model = LogisticRegression(C=float(C), solver="lbfgs", max_iter=1000, random_state=int(random_state))
    with _single_thread():  # a few hundred rows: threads only add overhead (10x on a busy machine)
        model.fit((x - mean) / sd, y.to_numpy())
    return Combiner(
        columns=tuple(str(c) for c in feats.columns),
        mean=mean,
        sd=sd,
        coef=model.coef_[0].astype(float),
        intercept=float(model.intercept_[0]),
        fit_ids=frozenset(y.index),
        C=float(C),
        random_state=int(random_state),
    )


# --------------------------------------------------------------------------------------------
# The test: an exact one-sided rank test, and Welch's only where its assumptions were checked
# --------------------------------------------------------------------------------------------
class ExactResult(NamedTuple):
    """The exact test's ``u`` (Mann-Whitney U of the suspect side: pairs where the suspect score is
    larger, ties counting one half), its one-sided ``p``, ``floor`` (the smallest p the two set sizes
    allow), ``test`` (which test) and, when ``p`` is NaN, ``reason`` ("" otherwise)."""

    u: float
    p: float
    floor: float
    test: str
    reason: str


MW_EXACT = "exact Mann-Whitney (one-sided)"
PERM_ALL = "exact permutation of mid-ranks (ties; all {c} splits)"
PERM_MC = "Monte Carlo permutation of mid-ranks (ties; B = {b})"
ALL_EQUAL = "every score is equal: no order to test"
ENUMERATE_MAX = 20_000  # with ties, enumerate every split up to this many; else Monte Carlo
RESAMPLES = 9_999  # Monte Carlo permutations B: p = (1 + #{stat >= observed}) / (B + 1), floor 1 / (B + 1)
# Welch's t-test is printed (p_welch) only where its assumptions were checked
WELCH_MIN_N = 10
WELCH_SHAPIRO_LEVEL = 0.05


def _scores(values, what: str) -> np.ndarray:
    x = np.asarray(values, dtype=float).reshape(-1)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} scores contain NaN or infinite values")
    return x


def rank_floor(n_suspect: int, n_outside: int) -> float:
    """1 / C(n_suspect + n_outside, n_outside): the smallest one-sided p-value a rank or permutation test
    of these set sizes can give (the suspect set ranks above every outside document in one of the
    C(n_s + n_o, n_o) equally likely arrangements)."""
    return 1.0 / math.comb(int(n_suspect) + int(n_outside), int(n_outside))


def _u(s: np.ndarray, o: np.ndarray) -> np.ndarray:
    """Mann-Whitney U of the suspect side, row by row (the last axis): #{s_i > o_j} + #{s_i = o_j} / 2."""
    d = s[..., :, None] - o[..., None, :]
    return (d > 0).sum(axis=(-1, -2)) + 0.5 * (d == 0).sum(axis=(-1, -2))


def exact_one_sided(
    suspect: Sequence[float], outside: Sequence[float], resamples: int = RESAMPLES, seed: int = 0
) -> ExactResult:
    """The exact one-sided test that the suspect documents' scores tend to exceed the known-outside
    documents' (Wilcoxon-Mann-Whitney; valid whenever the two sets' scores are exchangeable under the
    null, with no distributional assumption).

    * No ties: ``scipy.stats.mannwhitneyu(method="exact", alternative="greater")``, the exact null
      distribution of U; its floor is :func:`rank_floor`.
    * Ties: the permutation distribution of U (mid-ranks) over every split of the pooled scores into
      sets of these sizes when there are at most :data:`ENUMERATE_MAX` of them (exact; floor
      :func:`rank_floor`), else ``resamples`` seeded random splits (``numpy.random.default_rng(seed)``),
      p = (1 + #{U* >= U}) / (resamples + 1), whose floor is the larger of :func:`rank_floor` and
      1 / (resamples + 1).

    ``p`` is NaN with a reason when a side has fewer than 2 documents (:data:`TOO_FEW_SUSPECT`,
    :data:`TOO_FEW_OUTSIDE`) or every score is equal (:data:`ALL_EQUAL`).  Raises ``ValueError`` on NaN
    or infinite scores."""
    s, o = _scores(suspect, "suspect"), _scores(outside, "outside")
    nan = float("nan")
    reasons = [r for r, bad in ((TOO_FEW_SUSPECT, s.size < 2), (TOO_FEW_OUTSIDE, o.size < 2)) if bad]
    if reasons:
        return ExactResult(nan, nan, nan, MW_EXACT, "; ".join(reasons))
    floor = rank_floor(s.size, o.size)
    u = float(_u(s, o))
    pooled = np.concatenate([s, o])
    if np.all(pooled == pooled[0]):
        return ExactResult(u, nan, floor, MW_EXACT, ALL_EQUAL)
    if np.unique(pooled).size == pooled.size:
        from scipy import stats

        p = float(stats.mannwhitneyu(s, o, alternative="greater", method="exact").pvalue)
        return ExactResult(u, max(p, floor), floor, MW_EXACT, "")
    n, m = pooled.size, s.size
    c = math.comb(n, m)
    if c <= ENUMERATE_MAX:
        idx = np.array(list(itertools.combinations(range(n), m)))
        test = PERM_ALL.format(c=c)
    else:
        rng = np.random.default_rng(int(seed))
        idx = rng.permuted(np.tile(np.arange(n), (int(resamples), 1)), axis=1)[:, :m]
        test = PERM_MC.format(b=int(resamples))
    # U of every split, from the mid-rank sum: U = R_s - m (m + 1) / 2
    from scipy.stats import rankdata

    ranks = rankdata(pooled)
    stat = ranks[idx].sum(axis=1) - m * (m + 1) / 2
    ge = int(np.sum(stat >= u - 1e-9))
    if c <= ENUMERATE_MAX:
        return ExactResult(u, max(ge / c, floor), floor, test, "")
    floor = max(floor, 1.0 / (int(resamples) + 1))
    return ExactResult(u, max((1 + ge) / (int(resamples) + 1), floor), floor, test, "")


def _exact_rows(s: np.ndarray, idx: np.ndarray, o: np.ndarray) -> np.ndarray:
    """The one-sided p of :func:`exact_one_sided` for each subsample ``s[idx[i]]`` against ``o``
    (vectorised through scipy when no score of ``s`` and ``o`` repeats, else row by row)."""
    pooled = np.concatenate([s, o])
    if np.unique(pooled).size == pooled.size and idx.shape[-1] >= 2 and o.size >= 2:
        from scipy import stats

        p = stats.mannwhitneyu(
            s[idx], np.broadcast_to(o, (idx.shape[0], o.size)), alternative="greater", method="exact", axis=1
        ).pvalue
        return np.maximum(np.asarray(p, float), rank_floor(idx.shape[-1], o.size))
    return np.array([exact_one_sided(s[row], o).p for row in idx])


class WelchResult(NamedTuple):
    """``t``, ``p`` and, when ``p`` is NaN, why (``reason``; "" otherwise)."""

    t: float
    p: float
    reason: str


def _welch_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Welch's one-sided test of each row of ``a`` against each row of ``b`` (scipy): (t, p); NaN
    where both rows have zero variance (scipy's nan, or an infinite t from a zero standard error)."""
    from scipy import stats

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # precision-loss notes on (near-)constant rows
        res = stats.ttest_ind(a, b, axis=-1, equal_var=False, alternative="greater")
    t, p = np.asarray(res.statistic, float), np.asarray(res.pvalue, float)
    both_constant = (np.ptp(a, axis=-1) == 0) & (np.ptp(b, axis=-1) == 0)
    return np.where(both_constant, np.nan, t), np.where(both_constant, np.nan, p)


def welch_one_sided(suspect: Sequence[float], outside: Sequence[float]) -> WelchResult:
    """One-sided Welch t-test that the suspect documents' scores have a larger mean than the
    known-outside documents' (``scipy.stats.ttest_ind(equal_var=False, alternative="greater")``).
    Its p rests on a normal tail: the table prints it only through :func:`welch_checked`.

    Degenerate inputs give ``p`` NaN (and ``t`` NaN) with the reason, never a fake 0 or 1: fewer
    than 2 scores on a side (:data:`TOO_FEW_SUSPECT`, :data:`TOO_FEW_OUTSIDE`: no variance
    estimate), or zero variance on both sides (:data:`ZERO_VARIANCE`: the standard error is 0).  Zero
    variance on one side only is a valid test (the other side's variance is the standard error).
    Raises ``ValueError`` on NaN or infinite scores."""
    s, o = _scores(suspect, "suspect"), _scores(outside, "outside")
    nan = float("nan")
    reasons = [r for r, bad in ((TOO_FEW_SUSPECT, s.size < 2), (TOO_FEW_OUTSIDE, o.size < 2)) if bad]
    if reasons:
        return WelchResult(nan, nan, "; ".join(reasons))
    t, p = _welch_rows(s, o)
    if not np.isfinite(t):
        return WelchResult(nan, nan, ZERO_VARIANCE)
    return WelchResult(float(t), float(p), "")


def welch_checked(suspect: Sequence[float], outside: Sequence[float]) -> WelchResult:
    """:func:`welch_one_sided` where its assumptions were checked, else NaN with the reason: each side
    has at least :data:`WELCH_MIN_N` documents and Shapiro-Wilk (``scipy.stats.shapiro``) does not reject
    normality at :data:`WELCH_SHAPIRO_LEVEL` on either side.  Even then it is a secondary column: the
    verdict is the exact test's."""
    s, o = _scores(suspect, "suspect"), _scores(outside, "outside")
    nan = float("nan")
    small = [w for w, x in (("suspect", s), ("outside", o)) if x.size < WELCH_MIN_N]
    if small:
        return WelchResult(nan, nan, f"Welch not checked: fewer than {WELCH_MIN_N} {' and '.join(small)} documents")
    from scipy import stats

    for what, x in (("suspect", s), ("outside", o)):
        if np.ptp(x) == 0:
            return WelchResult(nan, nan, f"Welch not checked: the {what} scores are constant")
        sw = float(stats.shapiro(x).pvalue)
        if sw < WELCH_SHAPIRO_LEVEL:
            return WelchResult(
                nan, nan, f"Welch not valid: Shapiro-Wilk rejects normality of the {what} scores (p = {sw:.2g})"
            )
    return welch_one_sided(s, o)


def smallest_significant_size(
    suspect: Sequence[float],
    outside: Sequence[float],
    alpha: float = ALPHA,
    draws: int = 200,
    seed: int = 0,
) -> int | None:
    """The smallest number of suspect documents with which the test (:func:`exact_one_sided` against
    the whole known-outside set) is significant, in the sense of this rule:

    1. The whole suspect set (n documents) is tested first; when its p-value is not below ``alpha``
       (or is NaN) the answer is None: even all the documents do not suffice.
    2. Otherwise, for m = 2, 3, ..., n in turn, the suspect set is subsampled without replacement
       to m documents and each subsample tested; the answer is the first m at which at least half of
       the subsamples give p < ``alpha`` (a NaN p counts as not significant; a size whose floor
       :func:`rank_floor` is not below ``alpha`` cannot qualify and is skipped).  m = n always
       qualifies (its only subsample is the whole set).  Subsamples: every subset of size m when
       there are at most ``draws`` of them (the fraction is then exact), else ``draws`` uniformly
       random subsets, drawn by the generator ``numpy.random.default_rng([seed, m])`` (each size's
       draws depend on ``seed`` and m only).

    "At least half" makes m the size at which a data owner holding m random documents of the set
    gets significance at least as often as not.  The fraction need not grow with m on a finite set,
    hence "the first m".  None also when the suspect or the outside set has fewer than 2
    documents."""
    s, o = _scores(suspect, "suspect"), _scores(outside, "outside")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    whole = exact_one_sided(s, o)
    if not whole.p < alpha:
        return None
    n = s.size
    for m in range(2, n + 1):
        if not rank_floor(m, o.size) < alpha:
            continue
        if math.comb(n, m) <= draws:
            idx = np.array(list(itertools.combinations(range(n), m)))
        else:
            rng = np.random.default_rng([int(seed), m])
            idx = rng.permuted(np.tile(np.arange(n), (draws, 1)), axis=1)[:, :m]
        p = _exact_rows(s, idx, o)
        if np.mean(p < alpha) >= 0.5:  # NaN < alpha is False
            return m
    return n  # not reached: m = n is the whole set, significant above


def verdict(p: float, alpha: float = ALPHA) -> str:
    """:data:`IN_DATABASE` when ``p < alpha``, :data:`UNINFORMATIVE` when ``p`` is NaN, else
    :data:`NO_EVIDENCE`."""
    if p != p:
        return UNINFORMATIVE
    return IN_DATABASE if p < alpha else NO_EVIDENCE


# --------------------------------------------------------------------------------------------
# The experiments
# --------------------------------------------------------------------------------------------
def _check_candidates(candidates: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("doc_id", "label", "role") if c not in candidates.columns]
    if missing:
        raise ValueError(f"candidates frame lacks columns {missing}")
    c = candidates.assign(doc_id=candidates["doc_id"].astype(str), role=candidates["role"].astype(str))
    if c["doc_id"].duplicated().any():
        raise ValueError("a document appears more than once in the candidates frame")
    labels = pd.to_numeric(c["label"], errors="coerce")
    if labels.isna().any() or not labels.isin([0, 1]).all():
        raise ValueError("candidates' label must be 1 (member) or 0 (non-member)")
    return c.assign(label=labels.astype(int)).sort_values("doc_id", kind="stable")


def mixture_members(f: float, n_nonmembers: int, n_members: int) -> int:
    """How many members a mixture with member fraction ``f`` (0 < f < 1) draws next to its
    ``n_nonmembers`` suspect non-members: ``round(f * n_nonmembers / (1 - f))`` (so that
    k / (k + n_nonmembers) is as close to ``f`` as whole documents allow; Python's round, half to
    even), at least 1 and at most the ``n_members`` available."""
    if not 0 < f < 1:
        raise ValueError(f"a mixture's member fraction lies in (0, 1), got {f}")
    k = round(f * n_nonmembers / (1 - f))
    return int(min(max(k, 1), n_members))


def default_sets(
    candidates: pd.DataFrame,
    combined: pd.Series,
    f_values: Sequence[float] = DEFAULT_F_VALUES,
    seed: int = 0,
) -> list[dict]:
    """The default experiments, all on the **evaluation** candidates (``role == "eval"``) of
    ``candidates`` (doc_id, label, role); every one of them must have a ``combined`` score
    (Series indexed by doc_id), else ``ValueError``.

    * Known outside: a fixed half of the N0 evaluation non-members, ``N0 // 2`` of them, drawn by
      ``numpy.random.default_rng(seed)`` (a permutation of the non-members sorted by doc_id; its
      first ``N0 // 2``).  The other ``n0 = N0 - N0 // 2`` are the *suspect non-members*.
    * ``"members"`` (f = 1, when 1.0 is in ``f_values``): all N1 evaluation members.  Expected
      verdict: in the database.
    * ``"non-members"`` (f = 0, always): the n0 suspect non-members.  Expected: no evidence.
    * ``"mixture f=<f>"`` for each ``0 < f < 1`` of ``f_values``: the n0 suspect non-members plus
      k members, ``k = mixture_members(f, n0, N1)`` = ``round(f * n0 / (1 - f))`` clipped to
      [1, N1], drawn without replacement by ``numpy.random.default_rng([seed, round(f * 1e6)])``
      from the members sorted by doc_id.  At 20 + 20 evaluation candidates (n0 = 10): f = 0.5 gives
      10 members + 10 non-members, f = 0.25 gives 3 + 10 (realised f = 3/13 = 0.23).  The realised
      fraction k / (k + n0) is the set's ``f``; the requested one its ``f_target``.

    Each set is a dict: ``name``, ``f`` (realised), ``f_target``, ``suspect_ids``, ``outside_ids``,
    ``n_suspect_members``.  Values of ``f_values`` outside [0, 1] raise; 0 adds nothing (the
    non-member set is always there)."""
    c = _check_candidates(candidates)
    ev = c[c["role"] == "eval"]
    have = set(combined.index.astype(str))
    lacking = sorted(set(ev["doc_id"]) - have)
    if lacking:
        raise ValueError(f"{len(lacking)} evaluation candidates have no combined score (e.g. {lacking[0]!r})")
    members = ev.loc[ev["label"] == 1, "doc_id"].tolist()
    nonmembers = ev.loc[ev["label"] == 0, "doc_id"].tolist()
    perm = np.random.default_rng(int(seed)).permutation(len(nonmembers))
    half = len(nonmembers) // 2
    outside = sorted(nonmembers[i] for i in perm[:half])
    suspect_non = sorted(nonmembers[i] for i in perm[half:])
    fs = list(dict.fromkeys(float(f) for f in f_values))  # in order, each once
    bad = [f for f in fs if not 0.0 <= f <= 1.0]
    if bad:
        raise ValueError(f"f values lie in [0, 1], got {bad}")
    sets = []
    for f in fs:
        if f == 1.0:
            sets.append(_set("members", 1.0, 1.0, sorted(members), outside, len(members)))
    sets.append(_set("non-members", 0.0, 0.0, suspect_non, outside, 0))
    for f in fs:
        if 0.0 < f < 1.0 and members:
            k = mixture_members(f, len(suspect_non), len(members))
            rng = np.random.default_rng([int(seed), round(f * 1e6)])
            drawn = [members[i] for i in rng.choice(len(members), size=k, replace=False)]
            ids = sorted(drawn) + suspect_non
            sets.append(_set(f"mixture f={f:g}", k / len(ids), f, sorted(ids), outside, k))
    return sets


def _set(name, f, f_target, suspect_ids, outside_ids, n_members) -> dict:
    return {
        "name": name,
        "f": f,
        "f_target": f_target,
        "suspect_ids": list(suspect_ids),
        "outside_ids": list(outside_ids),
        "n_suspect_members": n_members,
    }


def user_sets(suspect_ids: Iterable, outside_ids: Iterable, name: str = "user") -> list[dict]:
    """The experiment of a user who gives a ``suspect`` and a ``known_outside`` candidate list: one
    set, its membership fraction unknown (``f`` NaN, ``n_suspect_members`` None).  Raises
    ``ValueError`` when a list is empty, repeats a document, or shares a document with the other."""
    s, o = [str(x) for x in suspect_ids], [str(x) for x in outside_ids]
    for what, ids in (("suspect", s), ("known_outside", o)):
        if not ids:
            raise ValueError(f"the {what} list is empty")
        if len(set(ids)) != len(ids):
            raise ValueError(f"the {what} list repeats a document")
    both = sorted(set(s) & set(o))
    if both:
        raise ValueError(f"{len(both)} documents are both suspect and known outside (e.g. {both[0]!r})")
    return [_set(name, float("nan"), float("nan"), sorted(s), sorted(o), None)]


def dataset_inference_rows(
    sets: Sequence[Mapping],
    combined: pd.Series,
    variants: Sequence[str],
    alpha: float = ALPHA,
    draws: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per set of :func:`default_sets` / :func:`user_sets`, columns :data:`ROW_COLUMNS`:

    ``suspect_set`` (name), ``f`` (realised member fraction; NaN for a user's set), ``f_target``,
    ``n_suspect``, ``n_suspect_members`` (NA for a user's set), ``n_outside``, ``mean_suspect`` /
    ``mean_outside`` (mean combined score), ``u``, ``p_value``, ``p_floor`` and ``test``
    (:func:`exact_one_sided`), ``verdict`` (:func:`verdict` at ``alpha``: "in the database" when
    p < alpha, "no evidence" otherwise, "uninformative" when p is NaN or when the sets' sizes cannot
    reach alpha: p_floor >= alpha), ``reason`` (why, else ""), ``p_welch`` and ``welch_reason``
    (:func:`welch_checked`: NaN with the reason where Welch's assumptions were not checked or fail),
    ``min_suspect_size`` (:func:`smallest_significant_size` with ``draws`` and ``seed``; NA when
    none), ``variants`` (the combiner's columns, comma-joined) and ``alpha``.  Every suspect and
    outside document must have a ``combined`` score (else ``ValueError``)."""
    comb = combined.copy()
    comb.index = comb.index.astype(str)
    rows = []
    for st in sets:
        ids = {k: [str(x) for x in st[k]] for k in ("suspect_ids", "outside_ids")}
        lacking = sorted(set(ids["suspect_ids"] + ids["outside_ids"]) - set(comb.index))
        if lacking:
            raise ValueError(
                f"set {st['name']!r}: {len(lacking)} documents have no combined score (e.g. {lacking[0]!r})"
            )
        s = comb.loc[ids["suspect_ids"]].to_numpy(float)
        o = comb.loc[ids["outside_ids"]].to_numpy(float)
        x = exact_one_sided(s, o, seed=seed)
        w = welch_checked(s, o) if not x.reason else WelchResult(float("nan"), float("nan"), x.reason)
        reason = x.reason
        if not reason and not x.floor < alpha:
            reason = f"the sets' sizes cannot reach p < {alpha:g} (smallest p {x.floor:.2g})"
        rows.append(
            {
                "suspect_set": st["name"],
                "f": float(st.get("f", float("nan"))),
                "f_target": float(st.get("f_target", float("nan"))),
                "n_suspect": int(s.size),
                "n_suspect_members": st.get("n_suspect_members"),
                "n_outside": int(o.size),
                "mean_suspect": float(s.mean()) if s.size else float("nan"),
                "mean_outside": float(o.mean()) if o.size else float("nan"),
                "u": x.u,
                "p_value": x.p,
                "p_floor": x.floor,
                "test": x.test,
                "verdict": UNINFORMATIVE if reason else verdict(x.p, alpha),
                "reason": reason,
                "p_welch": w.p,
                "welch_reason": w.reason,
                "min_suspect_size": smallest_significant_size(s, o, alpha=alpha, draws=draws, seed=seed)
                if s.size and o.size
                else None,
                "variants": ",".join(map(str, variants)),
                "alpha": float(alpha),
            }
        )
    out = pd.DataFrame(rows, columns=ROW_COLUMNS)
    for col in ("n_suspect_members", "min_suspect_size"):
        out[col] = pd.array([None if v is None or v != v else int(v) for v in out[col]], dtype="Int64")
    return out


def dataset_inference(
    score_frames: pd.DataFrame | Iterable[pd.DataFrame],
    candidates: pd.DataFrame,
    f_values: Sequence[float] = DEFAULT_F_VALUES,
    alpha: float = ALPHA,
    draws: int = 200,
    seed: int = 0,
    C: float = 1.0,
    suspect_ids: Iterable | None = None,
    outside_ids: Iterable | None = None,
) -> pd.DataFrame:
    """Steps 1-5 of the module docstring: :func:`feature_matrix` (reference = the candidates with
    ``role == "reference"``), :func:`fit_combiner` on the reference candidates' labels, combined
    scores of every other scored document, then :func:`dataset_inference_rows` over
    :func:`default_sets` or, when ``suspect_ids`` and ``outside_ids`` are given, :func:`user_sets`
    (a reference candidate among them raises: the combiner was fitted on it).  A reference
    candidate that no frame scores is left out of the fit; an evaluation candidate without scores
    raises (:func:`default_sets`).  The frame's ``attrs["dropped"]`` lists the variants
    :func:`feature_matrix` dropped."""
    c = _check_candidates(candidates)
    ref = c[c["role"] == "reference"]
    feats = feature_matrix(score_frames, ref["doc_id"])
    labels = ref.set_index("doc_id")["label"]
    labels = labels[labels.index.isin(feats.index)]
    comb = fit_combiner(feats, labels, C=C, random_state=seed)
    if (suspect_ids is None) != (outside_ids is None):
        raise ValueError("give both suspect_ids and outside_ids, or neither")
    if suspect_ids is not None:
        sets = user_sets(suspect_ids, outside_ids)
        wanted = sets[0]["suspect_ids"] + sets[0]["outside_ids"]
        lacking = sorted(set(wanted) - set(feats.index))
        if lacking:
            raise ValueError(f"{len(lacking)} documents have no scores (e.g. {lacking[0]!r})")
        combined = comb.score(feats.loc[wanted])
    else:
        ev_ids = c.loc[c["role"] == "eval", "doc_id"]
        combined = comb.score(feats.loc[feats.index.isin(ev_ids)])
        sets = default_sets(c, combined, f_values=f_values, seed=seed)
    out = dataset_inference_rows(sets, combined, comb.columns, alpha=alpha, draws=draws, seed=seed)
    out.attrs["dropped"] = dict(feats.attrs.get("dropped", {}))
    return out


# --------------------------------------------------------------------------------------------
# Calibration of the test, on documents disjoint from the tested sets
# --------------------------------------------------------------------------------------------
def out_of_fold_scores(
    features: pd.DataFrame, labels: Mapping | pd.Series, folds: int = 5, seed: int = 0, C: float = 1.0
) -> pd.Series:
    """Cross-fitted combined scores of the labelled documents (the reference candidates): the documents
    are dealt into ``folds`` folds, stratified by label (each class permuted by
    ``numpy.random.default_rng([seed, label])`` and dealt in turn), and each fold is scored by a
    combiner (:func:`fit_combiner`) fitted on the other folds only, so that no document is scored by a
    combiner fitted on it.  A column constant on a fold's fitting documents is left out of that fold's
    combiner; a fold whose fitting documents hold one class, or no varying column, leaves its documents
    out (they are absent from the result).  Returns a Series indexed by doc_id (sorted)."""
    lab = pd.Series(labels).copy()
    lab.index = lab.index.astype(str)
    lab = pd.to_numeric(lab).astype(int).sort_index()
    fold = pd.Series(0, index=lab.index)
    for cls in (0, 1):
        ids = lab.index[lab == cls]
        perm = np.random.default_rng([int(seed), cls]).permutation(len(ids))
        fold.loc[ids[perm]] = np.arange(len(ids)) % int(folds)
    out = []
    for k in range(int(folds)):
        test_ids, fit_ids = fold.index[fold == k], fold.index[fold != k]
        if not len(test_ids) or lab.loc[fit_ids].nunique() < 2:
            continue
        x = features.loc[fit_ids]
        cols = [c for c in features.columns if np.ptp(x[c].to_numpy(float)) > 0]
        if not cols:
            continue
        comb = fit_combiner(features.loc[:, cols], lab.loc[fit_ids], C=C, random_state=seed)
        out.append(comb.score(features.loc[test_ids, cols]))
    if not out:
        return pd.Series(dtype=float, name="combined", index=pd.Index([], name="doc_id"))
    return pd.concat(out).sort_index()


def min_balanced_size(alpha: float = ALPHA) -> int:
    """The smallest m such that a test of m suspect against m outside documents can reject at ``alpha``
    (:func:`rank_floor` (m, m) < alpha): 5 at 0.01 (1 / 252), 4 at 0.05 (1 / 70)."""
    m = 2
    while not rank_floor(m, m) < alpha:
        m += 1
    return m


def calibrate(
    nonmember_scores,
    alpha: float = ALPHA,
    split_size: int | None = None,
    seed: int = 0,
    exclude_ids: Iterable = (),
    score_split: Callable | None = None,
) -> dict:
    """The false-positive rate of the test on non-members, from INDEPENDENT tests: the pool is permuted
    once (``numpy.random.default_rng(seed)``) and cut into disjoint blocks of 2 ``split_size``
    documents (default :func:`min_balanced_size` (alpha), the smallest balanced sets that can reject at
    alpha); each block is one test of its first ``split_size`` documents (suspect) against the others
    (outside) with :func:`exact_one_sided`, a rejection being p < ``alpha``.  No document is in two
    tests, so the tests are independent given the pool's scores and the Clopper-Pearson interval on the
    count (:func:`ragmi.metrics.clopper_pearson`) is exact in n = the number of blocks.

    ``nonmember_scores``: a Series of combined scores indexed by doc_id (e.g. the reference non-members'
    out-of-fold scores, :func:`out_of_fold_scores`), or any rows (e.g. a feature matrix) when
    ``score_split(suspect_rows, outside_rows) -> (suspect_scores, outside_scores)`` turns each block into
    scores.  ``exclude_ids``: the documents of the tested sets; the pool must share none of them (else
    ``ValueError``: a calibration on the tested documents checks nothing).

    Returns ``n_pool``, ``split_size``, ``n_splits`` (independent tests), ``rejections``, ``rate``,
    ``rate_lo`` / ``rate_hi`` (95% Clopper-Pearson; NaN without a test), ``alpha``, ``calibrated``
    (alpha inside the interval; None without a test), ``resolves`` (whether the interval's upper end
    is below 2 alpha, i.e. the pool could tell a test at alpha from one at twice alpha; rarely true:
    it takes about 180 tests at a 0 count) and ``ids`` (the pool's doc_ids, for the disjointness check).

    What it checks: the exact test is valid by construction when the two sets' scores are exchangeable;
    random blocks of one pool are exchangeable by construction too, so this calibration catches a broken
    pipeline (a combiner scoring its own fitting documents, scores that leak the split), not a suspect
    set that differs in distribution from the outside set (:func:`shift_sets` does)."""
    pool = nonmember_scores
    if score_split is None:
        if not isinstance(pool, pd.Series):
            pool = pd.Series(_scores(pool, "non-member"), index=[f"#{i}" for i in range(len(pool))])
        _scores(pool.to_numpy(), "non-member")
    ids = [str(i) for i in pool.index]
    shared = sorted(set(ids) & {str(x) for x in exclude_ids})
    if shared:
        raise ValueError(
            f"the calibration pool shares {len(shared)} documents with the tested sets (e.g. {shared[0]!r}); "
            "calibrate on documents disjoint from them"
        )
    m = int(split_size) if split_size is not None else min_balanced_size(alpha)
    n = len(pool)
    k = n // (2 * m)
    perm = np.random.default_rng(int(seed)).permutation(n)
    rejections = 0
    for b in range(k):
        block = perm[2 * b * m : 2 * (b + 1) * m]
        s_rows, o_rows = pool.iloc[np.sort(block[:m])], pool.iloc[np.sort(block[m:])]
        s, o = score_split(s_rows, o_rows) if score_split is not None else (s_rows.to_numpy(), o_rows.to_numpy())
        rejections += bool(exact_one_sided(s, o).p < alpha)
    nan = float("nan")
    lo, hi = clopper_pearson(rejections, k) if k else (nan, nan)
    return {
        "n_pool": int(n),
        "split_size": m,
        "n_splits": int(k),
        "rejections": int(rejections),
        "rate": rejections / k if k else nan,
        "rate_lo": lo,
        "rate_hi": hi,
        "alpha": float(alpha),
        "calibrated": bool(lo <= alpha <= hi) if k else None,
        "resolves": bool(hi < 2 * alpha) if k else False,
        "ids": ids,
    }


# --------------------------------------------------------------------------------------------
# Distribution shift: suspect sets of non-members that differ from the outside set
# --------------------------------------------------------------------------------------------
def shift_sets(nonmembers: pd.DataFrame, n_topics: int = 2, seed: int = 0) -> list[dict]:
    """Suspect sets of NON-members that differ from their known-outside set by something other than
    membership, from ``nonmembers`` (doc_id, text; the evaluation non-members).  Each is a set of
    :func:`_set` with a ``shift`` key; every rejection of one is a false positive.

    * ``length: longest third``: the ceil(n / 3) longest texts (characters; ties by doc_id) against the
      rest.
    * ``topic: cluster j of K``: k-means (``sklearn.cluster.KMeans(n_clusters=n_topics,
      random_state=seed, n_init=10)``) on the TF-IDF vectors (``TfidfVectorizer(sublinear_tf=True)``) of
      the texts; each cluster against the other clusters' documents (both directions of a split are
      tested: the test is one-sided).

    A set with fewer than 2 documents on a side is left out; a frame without text gives no set."""
    if "text" not in nonmembers.columns or len(nonmembers) < 4:
        return []
    nm = nonmembers.assign(doc_id=nonmembers["doc_id"].astype(str), text=nonmembers["text"].fillna("").astype(str))
    nm = nm.sort_values("doc_id", kind="stable").reset_index(drop=True)
    out = []
    order = nm.assign(n=nm["text"].str.len()).sort_values(["n", "doc_id"], ascending=[False, True], kind="stable")
    k = math.ceil(len(nm) / 3)
    longest = sorted(order["doc_id"].iloc[:k])
    rest = sorted(order["doc_id"].iloc[k:])
    if len(longest) >= 2 and len(rest) >= 2:
        out.append({**_set("length: longest third", 0.0, 0.0, longest, rest, 0), "shift": "length"})
    if n_topics >= 2 and nm["text"].str.strip().astype(bool).sum() >= 2 * n_topics:
        from sklearn.cluster import KMeans
        from sklearn.feature_extraction.text import TfidfVectorizer

        try:
            x = TfidfVectorizer(sublinear_tf=True).fit_transform(nm["text"])
        except ValueError:  # no word in any text
            return out
        with _single_thread():
            lab = KMeans(n_clusters=int(n_topics), random_state=int(seed), n_init=10).fit_predict(x)
        for j in range(int(n_topics)):
            inside = sorted(nm.loc[lab == j, "doc_id"])
            other = sorted(nm.loc[lab != j, "doc_id"])
            if len(inside) >= 2 and len(other) >= 2:
                name = f"topic: cluster {j + 1} of {int(n_topics)}"
                out.append({**_set(name, 0.0, 0.0, inside, other, 0), "shift": "topic"})
    return out


def difference_scores(target: pd.Series, control: pd.Series) -> pd.Series:
    """The difference-in-differences score of each document: its combined score on the target minus its
    combined score on the target's null-database control (the same evaluation candidate answered by a
    database holding none of the candidates; both scored by the one combiner fitted on the target's
    reference candidates).  What the document itself brings to the score (its topic, its length, how
    easy it is to answer without retrieval) is in both terms and cancels; what the database adds is
    left.  Only documents scored on both sides are returned (index doc_id)."""
    t, c = target.copy(), control.copy()
    t.index, c.index = t.index.astype(str), c.index.astype(str)
    both = t.index.intersection(c.index)
    return (t.loc[both] - c.loc[both]).rename("combined").sort_index()


def fit_on_reference(
    score_frames: pd.DataFrame | Iterable[pd.DataFrame],
    candidates: pd.DataFrame,
    others: Mapping[str, Sequence[pd.DataFrame]] | None = None,
    C: float = 1.0,
    seed: int = 0,
) -> tuple[Combiner, pd.DataFrame, dict[str, pd.Series]]:
    """The combiner fitted on the reference candidates of ``candidates`` (:func:`feature_matrix`,
    :func:`fit_combiner`), the feature matrix, and the combined scores of the documents of ``others``
    ({name: score frames}: the same attack variants on other answers, e.g. the target's null-database
    control, or the target on another dataset), scored by that one combiner: {name: Series indexed by
    the documents' own doc_id}.  ``others``' documents enter the feature matrix under the doc_id
    ``"<name>::<doc_id>"`` (so they never collide with the target's, and a missing score takes the
    target's reference median); a variant the combiner uses that ``others[name]`` lacks is imputed the
    same way."""
    frames = [score_frames] if isinstance(score_frames, pd.DataFrame) else list(score_frames)
    c = _check_candidates(candidates)
    ref = c[c["role"] == "reference"]
    extra = []
    for name, fs in (others or {}).items():
        extra += [f.assign(doc_id=f"{name}::" + f["doc_id"].astype(str)) for f in fs]
    feats = feature_matrix(frames + extra, ref["doc_id"])
    labels = ref.set_index("doc_id")["label"]
    comb = fit_combiner(feats, labels[labels.index.isin(feats.index)], C=C, random_state=seed)
    scored = {}
    for name in others or {}:
        rows = feats.loc[feats.index.str.startswith(f"{name}::")]
        s = comb.score(rows)
        s.index = pd.Index([i[len(name) + 2 :] for i in s.index], name="doc_id")
        scored[name] = s
    mine = feats.loc[~feats.index.str.contains("::", regex=False)]
    mine.attrs["dropped"] = feats.attrs.get("dropped", {})
    return comb, mine, scored
