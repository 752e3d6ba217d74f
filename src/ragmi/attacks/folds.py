"""Cross-fitting: one procedure scores the reference and the evaluation candidates.

An attack with a fitted part (a classifier, a threshold, a grid-searched hyper-parameter) learns it
from the labelled reference candidates.  Scored by a part fitted on themselves, the reference
candidates would look better than the evaluation candidates (the choice is made on the rows it then
scores); scored by the mean of several fitted parts, the evaluation candidates would lie on a
narrower scale than the reference candidates scored by one.  Either way a threshold placed on the
reference scores (ragmi.metrics) would not keep its false-positive rate on the evaluation set.

So every row gets exactly one fold (:func:`assign_folds`) and is scored by the part fitted on the
reference rows of the *other* folds (Chernozhukov et al., "Double/debiased machine learning for
treatment and structural parameters", The Econometrics Journal 2018):

* a reference row's fold: the reference rows of each class, ordered by a hash of (seed, name,
  doc_id), are dealt to the K folds in turn (stratified, as sklearn's StratifiedKFold: fold sizes and
  each class's share differ by at most one, so every fold's part is fitted on balanced classes), and
  a reference row is always scored by a part fitted without it;
* an evaluation row's fold: the same hash modulo K, a function of the doc_id alone (not of the row
  order or of the other rows), so each fold with probability 1/K, balanced in expectation.  A
  negative control that scores the same evaluation documents on other answers, and a defended
  target, put every document in the same fold as the base target does: paired comparisons stay
  paired.

An evaluation row scored by fold k's part is then exchangeable with a reference row of fold k (no
part has seen either), so on a blind target the realised FPR of a threshold placed on the reference
scores is its nominal rate (tests/test_crossfit.py; benchmarks/crossfit.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import numpy as np

SELECTION_IN_FOLD = "in-fold"  # the `selection` column of a variant whose fitted part is cross-fitted


def doc_hash(doc_ids: Iterable, seed: int, name: str) -> np.ndarray:
    """A 64-bit hash of (seed, name, doc_id) per document (uint64), independent of the row order."""
    out = []
    prefix = f"{int(seed)}\x1f{name}\x1f".encode()
    for d in doc_ids:
        h = hashlib.blake2b(prefix + str(d).encode(), digest_size=8).digest()
        out.append(int.from_bytes(h, "little"))
    return np.array(out, dtype=np.uint64)


def eval_folds(doc_ids: Iterable, folds: int, seed: int, name: str) -> np.ndarray:
    """The fold of each evaluation document: its hash modulo ``folds`` (a function of the doc_id)."""
    h = doc_hash(doc_ids, seed, name)
    return (h % np.uint64(int(folds))).astype(int)


def reference_folds(doc_ids, labels, folds: int, seed: int, name: str) -> np.ndarray:
    """The fold of each reference document, stratified by class: the members in the order of their
    hashes dealt to the folds in turn, then the non-members likewise, continuing the deal where the
    members left it, so every fold holds ``n // K`` or ``n // K + 1`` of the n reference documents and
    as even a share of each class (as ``sklearn.model_selection.StratifiedKFold`` does).  With at least
    K documents of each class (:func:`assign_folds` checks) every fold's complement holds both classes.
    Balanced classes matter on small reference sets: a fold part fitted on 3 members and 5 non-members
    can be unable to split at all (a gradient-boosted tree's minimum child weight), and a constant part
    per fold ranks the rows by their fold alone.  A document's own label decides only which of the
    class's deals it takes part in, never which rows its part is fitted on.  Depends on the set of
    reference documents, not on their order."""
    doc_ids = list(doc_ids)
    labels = np.asarray(labels, dtype=int)
    k = int(folds)
    h = doc_hash(doc_ids, seed, name)
    out = np.zeros(len(doc_ids), dtype=int)
    dealt = 0
    for cls in (1, 0):
        rows = [i for i in range(len(doc_ids)) if labels[i] == cls]
        # ties in the hash (never in practice) broken by the doc_id's text, not by the row order
        rows.sort(key=lambda i: (int(h[i]), str(doc_ids[i])))
        out[rows] = (dealt + np.arange(len(rows))) % k
        dealt += len(rows)
    return out


def assign_folds(doc_ids, reference_labels: Mapping, folds: int, seed: int, name: str, what: str):
    """(fold of every row, is_ref, y_ref) for rows ``doc_ids``: reference rows by
    :func:`reference_folds`, the others by :func:`eval_folds`.  ``what`` names the fitted part in the
    error raised when a class has fewer than ``folds`` reference documents."""
    doc_ids = list(doc_ids)
    folds = int(folds)
    is_ref = np.array([d in reference_labels for d in doc_ids], dtype=bool)
    ref_ids = [d for d, r in zip(doc_ids, is_ref) if r]
    y_ref = np.array([int(reference_labels[d]) for d in ref_ids], dtype=int)
    if len(set(y_ref.tolist())) < 2 or min(np.bincount(y_ref, minlength=2)) < folds:
        raise ValueError(f"{what} needs at least {folds} reference members and non-members (cv_folds)")
    fold = np.zeros(len(doc_ids), dtype=int)
    fold[is_ref] = reference_folds(ref_ids, y_ref, folds, seed, name)
    fold[~is_ref] = eval_folds([d for d, r in zip(doc_ids, is_ref) if not r], folds, seed, name)
    return fold, is_ref, y_ref


def fold_rows(doc_ids, fold: np.ndarray, is_ref: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, scored rows) of fold ``k`` as row indices: the reference rows of the other
    folds and every row of fold k, each in the order of their doc_ids (as text), so that a fit that
    samples its rows (a bootstrap) does not depend on the order of the frame."""
    order = np.array(sorted(range(len(fold)), key=lambda i: str(doc_ids[i])), dtype=int)
    train = order[is_ref[order] & (fold[order] != k)]
    return train, np.flatnonzero(fold == k)


def constant_where_features_are(feats: np.ndarray, scores: np.ndarray, fold: np.ndarray, folds: int) -> np.ndarray:
    """Constant features give constant scores: when every row has the same features there is nothing
    to rank, and the K fold parts' K values (one per fold, each given to all its rows) would rank the
    rows by their fold alone; then every row, reference or evaluation, gets the mean of the K values.
    Otherwise ``scores`` unchanged."""
    x = np.asarray(feats, dtype=float).reshape(len(scores), -1)
    if len(x) == 0 or not (x == x[0]).all():
        return scores
    values = [scores[fold == k][0] for k in range(int(folds)) if (fold == k).any()]
    return np.full(len(scores), float(np.mean(values)))
