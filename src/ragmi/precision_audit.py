"""Precision as an audited variable: two runs of one configuration that differ only in the generator's
dtype (say float32 and bfloat16, ``benchmarks/precision.py`` runs both), compared cell by cell.

Per summary cell (dataset, target, attack, variant) present in both runs:

* the paired ΔAUC = AUC(run b) - AUC(run a) over the same evaluation candidates (paired by ``doc_id``;
  :func:`ragmi.metrics.paired_auc_difference`: MOVER interval with DeLong's correlation, 95%), so the
  interval says how far precision moved the scores of *these* candidates;
* each run's verdict as its summary printed it (``summary.csv``'s ``verdict``), and whether it moved;
* ``reading``, one of
    - ``same verdict``;
    - ``moved, within the paired interval``: the verdict moved but the paired interval holds 0, so
      precision did not move the scores more than the candidates' sampling allows; the cell sat at a
      verdict's boundary (its AUC interval touched 0.5 or a control's did), and either precision can
      give either verdict;
    - ``moved, outside the paired interval``: precision moved the scores beyond that; look for ties in
      P(Yes), Yes/No flips near 0.5 or a cell whose answers are almost all one word;
    - ``no scores``: a cell whose verdict is not read from a per-candidate score (e.g. a not computed row).

:func:`compare_cell` is the arithmetic on one pair of score sets (what the tests feed known pairs);
:func:`compare_runs` reads two results trees.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .metric_rows import auc_verdict
from .metrics import auc_ci, paired_auc_difference, roc_auc

KEYS = ["dataset", "target", "attack", "variant"]
SAME = "same verdict"
WITHIN = "moved, within the paired interval"
OUTSIDE = "moved, outside the paired interval"
NO_SCORES = "no scores"
COLUMNS = [
    *KEYS,
    "n_members",
    "n_nonmembers",
    "auc_a",
    "auc_b",
    "delta_auc",
    "delta_lo",
    "delta_hi",
    "verdict_a",
    "verdict_b",
    "verdict_moved",
    "reading",
]


def auc_interval_verdict(labels: Sequence[int], scores: Sequence[float]) -> str:
    """The AUC part of the summary's verdict on one score set: ``ragmi.metric_rows.auc_verdict`` on
    :func:`ragmi.metrics.auc_ci` (``leaks``, ``inverted`` or ``no evidence at this n``)."""
    y = np.asarray(labels, dtype=int)
    lo, hi = auc_ci(roc_auc(y, scores), int((y == 1).sum()), int((y == 0).sum()))
    return auc_verdict(float(lo), float(hi))


def reading(verdict_a: str, verdict_b: str, delta_lo: float, delta_hi: float) -> str:
    """The cell's reading (module docstring) from the two verdicts and the paired interval."""
    if verdict_a == verdict_b:
        return SAME
    if not (np.isfinite(delta_lo) and np.isfinite(delta_hi)):
        return NO_SCORES
    return WITHIN if delta_lo <= 0.0 <= delta_hi else OUTSIDE


def compare_cell(
    labels: Sequence[int],
    scores_a: Sequence[float],
    scores_b: Sequence[float],
    verdict_a: str | None = None,
    verdict_b: str | None = None,
) -> dict:
    """One cell: AUCs, the paired ΔAUC (b - a) with its interval, both verdicts (given, or the AUC
    interval's verdict of each score set when not given) and the reading."""
    y = np.asarray(labels, dtype=int)
    a = np.asarray(scores_a, dtype=float)
    b = np.asarray(scores_b, dtype=float)
    delta, lo, hi = paired_auc_difference(y, b, a)
    va = verdict_a if verdict_a is not None else auc_interval_verdict(y, a)
    vb = verdict_b if verdict_b is not None else auc_interval_verdict(y, b)
    return {
        "n_members": int((y == 1).sum()),
        "n_nonmembers": int((y == 0).sum()),
        "auc_a": roc_auc(y, a),
        "auc_b": roc_auc(y, b),
        "delta_auc": delta,
        "delta_lo": lo,
        "delta_hi": hi,
        "verdict_a": va,
        "verdict_b": vb,
        "verdict_moved": va != vb,
        "reading": reading(va, vb, lo, hi),
    }


def _eval_scores(root: Path, dataset: str, target: str, attack: str, variant: str) -> pd.DataFrame | None:
    path = root / "results" / "scores" / dataset / target / f"{attack}.parquet"
    if not path.is_file():
        return None
    df = pd.read_parquet(path, columns=["doc_id", "variant", "score"])
    df = df[df["variant"] == variant]
    cands = pd.read_parquet(
        root / "results" / "split" / dataset / "candidates.parquet", columns=["doc_id", "label", "role"]
    )
    df = df.merge(cands[cands["role"] == "eval"], on="doc_id", how="inner")
    df = df[np.isfinite(df["score"].to_numpy(float))]
    return df if len(df) else None


def compare_runs(dir_a: str | os.PathLike, dir_b: str | os.PathLike) -> pd.DataFrame:
    """Every summary cell of two results trees (each a directory holding ``results/``), compared (module
    docstring); the cells are those of run a's summary found in run b's, in run a's order."""
    ra, rb = Path(dir_a), Path(dir_b)
    sa = pd.read_csv(ra / "results" / "tables" / "summary.csv")
    sb = pd.read_csv(rb / "results" / "tables" / "summary.csv")
    for d in (ra, rb):
        for ds in sorted(set(sa["dataset"])):
            c = d / "results" / "split" / ds / "candidates.parquet"
            if not c.is_file():
                raise FileNotFoundError(f"{c}: the candidates of {ds} (a results tree of a finished run is needed)")
    ca = {ds: pd.read_parquet(ra / "results/split" / ds / "candidates.parquet") for ds in set(sa["dataset"])}
    for ds, c in ca.items():
        other = pd.read_parquet(rb / "results/split" / ds / "candidates.parquet")
        if sorted(zip(c["doc_id"], c["label"], c["role"])) != sorted(
            zip(other["doc_id"], other["label"], other["role"])
        ):
            raise ValueError(f"the two runs split {ds} differently: they are not two runs of one configuration")
    vb = {tuple(r[k] for k in KEYS): r["verdict"] for _, r in sb.iterrows()}
    rows = []
    for _, r in sa.iterrows():
        key = tuple(r[k] for k in KEYS)
        if key not in vb:
            continue
        base = dict(zip(KEYS, key))
        a, b = _eval_scores(ra, *key), _eval_scores(rb, *key)
        if a is None or b is None:
            rows.append(
                {
                    **base,
                    "verdict_a": r["verdict"],
                    "verdict_b": vb[key],
                    "verdict_moved": r["verdict"] != vb[key],
                    "reading": SAME if r["verdict"] == vb[key] else NO_SCORES,
                }
            )
            continue
        m = a.merge(b[["doc_id", "score"]], on="doc_id", suffixes=("_a", "_b"))
        if len(m) != len(a) or len(m) != len(b):
            raise ValueError(f"{'/'.join(map(str, key))}: the two runs scored different evaluation candidates")
        m = m.sort_values("doc_id", kind="stable")
        rows.append({**base, **compare_cell(m["label"], m["score_a"], m["score_b"], r["verdict"], vb[key])})
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def one_sentence(df: pd.DataFrame, label_a: str, label_b: str) -> str:
    """The comparison in one sentence (what the README quotes)."""
    n = len(df)
    same = int((df["reading"] == SAME).sum())
    within = int((df["reading"] == WITHIN).sum())
    outside = int((df["reading"] == OUTSIDE).sum())
    d = df["delta_auc"].abs()
    largest = f"; largest |ΔAUC| {d.max():.2f}" if d.notna().any() else ""
    return (
        f"{label_b} against {label_a}: {same} of {n} verdicts equal, {within} moved within the paired ΔAUC "
        f"interval (borderline cells), {outside} moved outside it{largest}"
    )
