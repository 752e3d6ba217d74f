"""The dataset-inference analysis: is a *set* of documents in the target's retrieval database?  One row
per (dataset, target, evidence, shift, design, suspect set), with the test's own calibration and Holm's
adjustment (table ``dataset_inference``: :mod:`ragmi.report.inference_registry` declares it,
:func:`ragmi.report.inference_tables.dataset_inference_markdown` prints it).

The statistics are :mod:`ragmi.dataset_inference`; this module reads the score files and the split, and
shapes the rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from .. import dataset_inference as di
from ..attacks.base import is_main_variant
from ..errors import ConfigError
from ..multiplicity import holm
from .readers import read_candidates, read_scores, score_pairs

NULL_DB = "--null-db"  # the suffix of a target's null-database control (ragmi.plan.CONTROLS)
RAW, DIFFERENCE = "raw", "null-db difference"  # the designs: combined score, or target minus null-db control
NO_SHIFT = "none"
# The one row of a target whose attacks' scores are all constant on the reference candidates
NOTHING_TO_COMBINE = {
    "shift": NO_SHIFT,
    "design": RAW,
    "suspect_set": "members",
    "verdict": di.UNINFORMATIVE,
    "reason": "every attack's scores are constant on the reference candidates: nothing to combine",
    "calibration_pool": 0,
    "calibration_splits": 0,
}

# What the combined score is built from (dataset_inference.evidence): every attack's headline variants, or
# only those that read the answers' text (what a black-box service gives a data owner)
EVIDENCE = {"all": "all attacks", "text": "answer text only"}

DI_COLUMNS = [
    "dataset",
    "target",
    "evidence",
    "shift",
    "design",
    *di.ROW_COLUMNS,
    "p_holm",
    "verdict_holm",
    "calibration_rate",
    "calibration_lo",
    "calibration_hi",
    "calibration_rejections",
    "calibration_splits",
    "calibration_split_size",
    "calibration_pool",
    "calibrated",
    "calibration_resolves",
]


def read_ids(path: str | Path) -> list[str]:
    """The doc_ids of a data owner's file: CSV or parquet with a ``doc_id`` column, or text with one id per
    line (blank lines skipped)."""
    p = Path(path)
    if p.suffix == ".parquet":
        df = pd.read_parquet(p)
    elif p.suffix in (".csv", ".tsv"):
        df = pd.read_csv(p, sep="\t" if p.suffix == ".tsv" else ",", dtype=str)
    else:
        return [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    if "doc_id" not in df.columns:
        raise ConfigError(f"file {p} has no doc_id column (columns: {', '.join(map(str, df.columns))})")
    return [str(x) for x in df["doc_id"]]


def _group_scores(scores: Mapping, dataset: str, target: str, evidence: str = "all") -> list[pd.DataFrame]:
    """The target's score frames restricted to the headline variants (an ablation sweep's variants, named
    with ``=``, are the same attack again) and, for ``evidence`` ``text``, to those that read only the
    answers' text."""
    from ..attacks import attack_channels

    out = []
    for (d, t, attack), df in sorted(scores.items()):
        if (d, t) != (dataset, target):
            continue
        keep = [
            v
            for v in df["variant"].unique()
            if is_main_variant(v) and (evidence == "all" or attack_channels(attack, v) == ("text",))
        ]
        if keep:
            out.append(df[df["variant"].isin(keep)])
    return out


def _check_user(user, cand: pd.DataFrame, dataset: str) -> None:
    ev = set(cand.loc[cand["role"] == "eval", "doc_id"])
    for what, ids in zip(("suspect", "known_outside"), user):
        outside = [i for i in ids if i not in ev]
        if outside:
            raise ConfigError(
                f"config key dataset_inference.{what}: {len(outside)} of its doc_ids are not evaluation "
                f"candidates of dataset {dataset!r} (e.g. {outside[0]!r}); only those were queried and "
                "scored by models fitted elsewhere"
            )


def _dataset_shift_sets(cand: pd.DataFrame, other: str, other_cand: pd.DataFrame, dataset: str) -> list[dict]:
    """Suspect = the other dataset's evaluation non-members (doc_ids ``"data:<other>::<id>"``), outside =
    this dataset's evaluation non-members: a set from another source, none of it in this database."""
    non = sorted(cand.loc[(cand["role"] == "eval") & (cand["label"] == 0), "doc_id"].astype(str))
    oc = other_cand
    theirs = sorted(f"data:{other}::{i}" for i in oc.loc[(oc["role"] == "eval") & (oc["label"] == 0), "doc_id"])
    if len(non) < 2 or len(theirs) < 2:
        return []
    st = di.user_sets(theirs, non, name=f"dataset: {other} vs {dataset}")[0]
    return [{**st, "f": 0.0, "f_target": 0.0, "n_suspect_members": 0, "shift": "dataset"}]


def _target_rows(
    scores: Mapping,
    candidates: Mapping[str, pd.DataFrame],
    runs: Sequence[tuple[str, str]],
    dataset: str,
    target: str,
    evidence: str,
    params: Mapping,
    seed: int,
    user,
) -> list[dict]:
    """The rows of one (dataset, target, evidence): the default and user sets and the shift sets, raw and,
    where the target has a null-database control with scores, as differences against it; the calibration
    columns on every row."""
    frames = _group_scores(scores, dataset, target, evidence)
    cand = candidates[dataset].assign(doc_id=lambda c: c["doc_id"].astype(str))
    ref_ids = cand.loc[cand["role"] == "reference", "doc_id"]
    head = {"dataset": dataset, "target": target, "evidence": EVIDENCE[evidence]}
    if di.feature_matrix(frames, ref_ids).shape[1] == 0:  # every score constant on the reference set
        return [{**head, **NOTHING_TO_COMBINE}]
    alpha = float(params["alpha"])
    others = {}
    null = _group_scores(scores, dataset, target + NULL_DB, evidence)
    if null:
        others["null"] = null
    other_datasets = sorted({d for d, t in runs if t == target and d != dataset and d in candidates})
    for d2 in other_datasets:
        f2 = _group_scores(scores, d2, target, evidence)
        if f2:
            others[f"data:{d2}"] = f2
    comb, feats, scored = di.fit_on_reference(frames, cand, others, seed=seed)
    ev = cand[cand["role"] == "eval"]
    combined = comb.score(feats.loc[feats.index.isin(ev["doc_id"])])
    sets = [
        {**s, "shift": NO_SHIFT} for s in di.default_sets(cand, combined, f_values=tuple(params["f_values"]), seed=seed)
    ]
    if user is not None:
        _check_user(user, cand, dataset)
        sets.append({**di.user_sets(user[0], user[1])[0], "shift": NO_SHIFT})
    shifted = di.shift_sets(ev[ev["label"] == 0], n_topics=int(params["shift_topics"]), seed=seed)
    raw_scores = combined
    for d2 in other_datasets:
        if f"data:{d2}" in scored:
            s2 = scored[f"data:{d2}"]
            raw_scores = pd.concat([raw_scores, s2.set_axis([f"data:{d2}::{i}" for i in s2.index])])
            shifted += _dataset_shift_sets(cand, d2, candidates[d2], dataset)
    designs = _designs(raw_scores, combined, scored, sets, shifted)
    tested = {i for s in sets + shifted for k in ("suspect_ids", "outside_ids") for i in s[k]}
    cal = calibration(feats, cand, alpha, int(params["calibration_folds"]), seed, tested)
    kw = dict(alpha=alpha, draws=int(params["draws"]), seed=int(seed))
    return _design_rows(designs, head, comb.columns, cal, kw)


def _designs(raw_scores, combined, scored: Mapping, sets: list, shifted: list) -> list[tuple]:
    """(design, scores, its sets) for the raw design and, where the target's null-database control has
    scores, the difference design; (design, None, why) when the control lacks an evaluation candidate."""
    designs = [(RAW, raw_scores, sets + shifted)]
    if "null" in scored:
        diff = di.difference_scores(combined, scored["null"])
        lacking = sorted(set(combined.index) - set(diff.index))
        if lacking:
            designs.append(
                (
                    DIFFERENCE,
                    None,
                    f"the null-db control has no score for {len(lacking)} evaluation candidates (e.g. {lacking[0]!r})",
                )
            )
        else:
            designs.append((DIFFERENCE, diff, sets + [s for s in shifted if s["shift"] != "dataset"]))
    return designs


def _design_rows(designs: list[tuple], head: dict, columns, cal: dict, kw: dict) -> list[dict]:
    """The rows of every design's sets (one uninformative row for a design without scores), the calibration
    columns on each."""
    rows = []
    for design, sc, design_sets in designs:
        if sc is None:
            rows.append(
                {
                    **head,
                    "shift": NO_SHIFT,
                    "design": design,
                    "suspect_set": "members",
                    "verdict": di.UNINFORMATIVE,
                    "reason": design_sets,
                    **cal,
                }
            )
            continue
        part = di.dataset_inference_rows(design_sets, sc, columns, **kw)
        for st, r in zip(design_sets, part.to_dict("records"), strict=True):
            rows.append({**head, "shift": st["shift"], "design": design, **r, **cal})
    return rows


def dataset_inference_frame(
    scores: Mapping,
    candidates: Mapping[str, pd.DataFrame],
    runs: Sequence[tuple[str, str]],
    params: Mapping,
    seed: int,
    user: tuple[list[str], list[str]] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, target, evidence, shift, design, suspect set).

    Per (dataset, target, evidence): the combiner fitted on the reference candidates
    (:func:`ragmi.dataset_inference.fit_on_reference`), the default suspect sets, the data owner's
    (``user``: suspect and known-outside doc_ids among the evaluation candidates) when given, and the
    distribution-shift sets (``shift`` ≠ "none": suspect sets of non-members that differ from the outside
    set by length, topic or source, :func:`ragmi.dataset_inference.shift_sets`; every rejection there is
    a false positive).  ``design`` "raw" tests the combined scores; "null-db difference", where the target's
    null-database control (``<target>--null-db``) has scores, tests each document's combined score on the
    target minus on the control.  The calibration columns repeat, per target: the exact test's
    false-positive rate at α over independent, disjoint splits of the reference non-members' out-of-fold
    combined scores (:func:`calibration`).  ``p_holm``: Holm's adjustment over every finite ``p_value`` of
    the frame (one family), ``verdict_holm`` its verdict at α."""
    rows = []
    for (dataset, target), evidence in itertools.product(runs, params["evidence"]):
        frames = _group_scores(scores, dataset, target, evidence)
        if not frames:
            continue
        if evidence != "all" and "all" in params["evidence"]:
            if {v for f in frames for v in f["variant"].unique()} == {
                v for f in _group_scores(scores, dataset, target) for v in f["variant"].unique()
            }:
                continue  # the same variants as the "all" rows (a target without log-probabilities)
        rows += _target_rows(scores, candidates, runs, dataset, target, evidence, params, seed, user)
    out = pd.DataFrame(rows, columns=DI_COLUMNS)
    return with_holm(out, float(params["alpha"]))


def with_holm(df: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``p_holm`` (:func:`ragmi.multiplicity.holm` over every finite ``p_value`` of ``df``: one family) and
    ``verdict_holm`` (its verdict at ``alpha``; "uninformative" where the row's verdict is)."""
    out = df.copy()
    out["p_holm"] = holm(pd.to_numeric(out["p_value"], errors="coerce").to_numpy(float)) if len(out) else []
    out["verdict_holm"] = [
        di.UNINFORMATIVE if v == di.UNINFORMATIVE else di.verdict(p, alpha)
        for v, p in zip(out["verdict"], out["p_holm"], strict=True)
    ]
    return out


def calibration(feats: pd.DataFrame, cand: pd.DataFrame, alpha: float, folds: int, seed: int, tested) -> dict:
    """The exact test's false-positive rate at ``alpha`` on documents disjoint from every tested set: the
    reference non-members, their combined scores cross-fitted over ``folds`` folds of the reference
    candidates (:func:`ragmi.dataset_inference.out_of_fold_scores`: no document scored by a combiner fitted
    on it), cut into independent disjoint splits (:func:`ragmi.dataset_inference.calibrate`)."""
    ref = cand[cand["role"] == "reference"]
    labels = ref.set_index("doc_id")["label"]
    labels = labels[labels.index.isin(feats.index)]
    oof = di.out_of_fold_scores(feats.loc[labels.index], labels, folds=folds, seed=seed)
    pool = oof[oof.index.isin(labels.index[labels == 0])]
    c = di.calibrate(pool, alpha=alpha, seed=seed, exclude_ids=tested)
    return {
        "calibration_rate": c["rate"],
        "calibration_lo": c["rate_lo"],
        "calibration_hi": c["rate_hi"],
        "calibration_rejections": c["rejections"],
        "calibration_splits": c["n_splits"],
        "calibration_split_size": c["split_size"],
        "calibration_pool": c["n_pool"],
        "calibrated": c["calibrated"],
        "calibration_resolves": c["resolves"],
        "calibration_ids": c["ids"],  # the pool's doc_ids (not a column: for the disjointness check)
    }


def run(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``dataset_inference``: ``files`` ``scores``,
    ``candidates`` and, when the data owner names them, ``user_sets``; ``config`` its keys ``seed`` and
    ``dataset_inference``."""
    user = None
    if "user_sets" in files:
        user = tuple(read_ids(p) for p in files["user_sets"])
    # The rule is handed only the declared keys (seed, dataset_inference), not the targets: the chosen
    # targets are those of the inputs (ragmi.report.inference_registry), less a null-database control read
    # only for its base's difference design when dataset_inference.targets names the targets (no rows of
    # its own)
    named = config["dataset_inference"].get("targets")
    pairs = [(d, t) for d, t in score_pairs(files["scores"]) if named is None or t in named]
    return dataset_inference_frame(
        read_scores(files["scores"], files["candidates"]),
        read_candidates(files["candidates"]),
        pairs,
        config["dataset_inference"],
        int(config["seed"]),
        user=user,
    )
