"""Seeded member / non-member split and the reference / evaluation candidates.

Members form the target's retrieval database; non-members never enter it.  The *candidates* are the
documents under test: from each class a *reference* set (the adversary's calibration data:
thresholds, attack models) and a disjoint *evaluation* set (the reported numbers), both classes the
same size, capped by what exists.  Design source: docs/provenance.md#split.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .datasets import COLUMNS as CORPUS_COLUMNS
from .errors import DataError


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().casefold()


# The fewest reference (and evaluation) documents per class: the schema's minimum of split.n_reference
# and split.n_eval.  A threshold or a bootstrap interval on fewer is meaningless.
MIN_PER_SET = 2


def _shrunk(avail: int, n_ref: int, n_eval: int, floor: tuple[int, str], asked: str) -> tuple[int, int]:
    """Proportional sizes for ``avail`` documents per class under ``split.allow_shrink``: at least
    ``floor[0]`` reference documents (the attacks' ``cv_folds``, named by the config key ``floor[1]``)
    and MIN_PER_SET of each set; a DataError starting with ``asked`` when ``avail`` cannot hold them."""
    least = max(floor[0], MIN_PER_SET)
    if avail < least + MIN_PER_SET:
        why = f" ({floor[1]} is {least})" if least > MIN_PER_SET else ""
        raise DataError(
            f"{asked}; even with split.allow_shrink at least {least + MIN_PER_SET} per class are needed "
            f"({least} reference{why} + {MIN_PER_SET} evaluation)"
        )
    ref = min(max(least, avail * n_ref // (n_ref + n_eval)), avail - MIN_PER_SET)
    return ref, avail - ref


def _draw_candidates(
    members: pd.DataFrame,
    nonmembers: pd.DataFrame,
    n_reference: int,
    n_eval: int,
    rng: np.random.Generator,
    asked: str,
    advice: str,
    allow_shrink: bool,
    floor: tuple[int, str],
) -> tuple[pd.DataFrame, int, int]:
    """``n_reference`` + ``n_eval`` candidates drawn (with ``rng``) from each class, members first,
    and the per-class reference and evaluation sizes.  Too few documents in a class is a DataError
    ``asked`` + ``advice`` unless ``allow_shrink`` (then both sets shrink: :func:`_shrunk`)."""
    avail = min(len(members), len(nonmembers))
    ref, ev = n_reference, n_eval
    if avail < n_reference + n_eval:
        if not allow_shrink:
            raise DataError(f"{asked}; {advice}")
        ref, ev = _shrunk(avail, n_reference, n_eval, floor, asked)
    parts = []
    for label, frame in ((1, members), (0, nonmembers)):
        chosen = frame.iloc[rng.permutation(len(frame))[: ref + ev]].reset_index(drop=True)
        parts.append(chosen.assign(label=label, role=["reference"] * ref + ["eval"] * ev))
    return pd.concat(parts, ignore_index=True)[CORPUS_COLUMNS + ["label", "role"]], ref, ev


def split_corpus(
    corpus: pd.DataFrame,
    member_fraction: float,
    n_reference: int,
    n_eval: int,
    seed: int,
    name: str = "dataset",
    allow_shrink: bool = False,
    floor: tuple[int, str] = (0, ""),
):
    """Return (members, nonmembers, candidates, info).

    ``candidates`` has doc_id, text, title, human_turn, label (1 member / 0 non-member) and role
    ("reference" / "eval"), in a seeded random order (never sorted by label or role).  Too few
    members or non-members for ``n_reference + n_eval`` is a DataError unless ``allow_shrink`` (then
    ``info["capped"]`` is true), never below ``floor[0]`` reference candidates per class (the
    attacks' ``cv_folds``, named by the config key ``floor[1]``: :func:`ragmi.plan.min_reference`).
    """
    lacking = [c for c in CORPUS_COLUMNS if c not in corpus.columns]
    if lacking:
        raise DataError(
            f"dataset {name}: the corpus lacks columns {lacking} (written by an older ragmi?); "
            f"delete results/corpus/{name}.parquet and rerun"
        )
    n = len(corpus)
    if n < 8:
        raise DataError(f"dataset {name}: only {n} documents after cleaning; at least 8 are needed to split")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    n_mem = int(round(member_fraction * n))
    n_mem = min(max(n_mem, 2), n - 2)
    members = corpus.iloc[order[:n_mem]].reset_index(drop=True)
    nonmembers = corpus.iloc[order[n_mem:]].reset_index(drop=True)

    overlap = set(map(_norm, members["text"])) & set(map(_norm, nonmembers["text"]))
    if overlap:
        raise DataError(f"dataset {name}: {len(overlap)} texts are both member and non-member after cleaning")

    counts = (
        f"dataset {name}: split.n_reference + split.n_eval ask for {n_reference} + {n_eval} = "
        f"{n_reference + n_eval} candidates per class, but the {n} documents left after cleaning give "
        f"{len(members)} members and {len(nonmembers)} non-members (split.member_fraction {member_fraction})"
    )
    advice = (
        "lower split.n_reference / split.n_eval, use a larger corpus, or set "
        "split.allow_shrink: true to shrink both sets to what exists"
    )
    candidates, ref, ev = _draw_candidates(
        members, nonmembers, n_reference, n_eval, rng, counts, advice, allow_shrink, floor
    )
    # Seeded shuffle: queries, shards and generation batches follow the candidates' order, which must
    # not sort them by label (members first) or by role.
    candidates = candidates.iloc[rng.permutation(len(candidates))].reset_index(drop=True)
    info = {
        "n_docs": n,
        "n_members": len(members),
        "n_nonmembers": len(nonmembers),
        "n_reference_per_class": ref,
        "n_eval_per_class": ev,
        "requested_reference_per_class": n_reference,
        "requested_eval_per_class": n_eval,
        "capped": (ref, ev) != (n_reference, n_eval),
        "member_nonmember_text_overlap": 0,
        "seed": seed,
    }
    return members, nonmembers, candidates, info


def null_database(
    members: pd.DataFrame, nonmembers: pd.DataFrame, candidates: pd.DataFrame, seed: int, name: str = "dataset"
) -> pd.DataFrame:
    """The negative control's retrieval database: the members with every member *candidate* replaced
    by a non-member that is not a candidate either, so the database has the same size and holds none
    of the reference or evaluation documents.  An attack whose AUC on a target over this database
    stays away from 0.5 learns something other than membership."""
    tested = set(candidates["doc_id"])
    keep = members[~members["doc_id"].isin(tested)]
    spare = nonmembers[~nonmembers["doc_id"].isin(tested)]
    need = len(members) - len(keep)
    if len(spare) < need:
        raise DataError(
            f"dataset {name}: the null-database control needs {need} non-member documents outside the "
            f"candidates to replace the member candidates, only {len(spare)} exist"
        )
    rng = np.random.default_rng([seed, 7])
    fill = spare.iloc[np.sort(rng.permutation(len(spare))[:need])]
    return pd.concat([keep, fill], ignore_index=True)


def split_labelled(
    labelled: pd.DataFrame,
    n_reference: int,
    n_eval: int,
    seed: int,
    name: str = "dataset",
    allow_shrink: bool = False,
    floor: tuple[int, str] = (0, ""),
):
    """The split of a user's labelled candidates (``ragmi.datasets.candidates.read_candidates``):
    return (members, nonmembers, candidates, info) as :func:`split_corpus` does, without drawing
    members from a corpus.  With a ``role`` column the user's roles are kept (each class needs at least
    MIN_PER_SET of each role); without one, ``n_reference`` + ``n_eval`` documents per class are drawn
    (seeded), shrunk as in :func:`split_corpus` under ``allow_shrink``; documents left over are not
    candidates.  Either way each class needs ``floor[0]`` reference documents (the attacks'
    ``cv_folds``)."""
    members = labelled[labelled["label"] == 1][CORPUS_COLUMNS].reset_index(drop=True)
    nonmembers = labelled[labelled["label"] == 0][CORPUS_COLUMNS].reset_index(drop=True)
    rng = np.random.default_rng(seed)
    counts = f"dataset {name}: the candidates file has {len(members)} members and {len(nonmembers)} non-members"
    if "role" in labelled.columns:
        sizes = labelled.groupby(["label", "role"]).size()
        for label in (1, 0):
            for role in ("reference", "eval"):
                have = int(sizes.get((label, role), 0))
                kind = "members" if label else "non-members"
                if have < MIN_PER_SET:
                    raise DataError(
                        f"dataset {name}: the candidates file has {have} {role} {kind}; at least {MIN_PER_SET} are needed"
                    )
                if role == "reference" and have < floor[0]:
                    raise DataError(
                        f"dataset {name}: the candidates file has {have} reference {kind}, but "
                        f"{floor[1]} is {floor[0]}: its out-of-fold reference scores need at "
                        f"least that many (lower it, or give more documents the role 'reference')"
                    )
        candidates = labelled[CORPUS_COLUMNS + ["label", "role"]]
        ref = ev = None
    else:
        ask = (
            f"{counts}; split.n_reference + split.n_eval ask for {n_reference} + {n_eval} = "
            f"{n_reference + n_eval} per class"
        )
        advice = (
            "lower split.n_reference / split.n_eval, add documents, give each a role (role_column), or set "
            "split.allow_shrink: true"
        )
        candidates, ref, ev = _draw_candidates(
            members, nonmembers, n_reference, n_eval, rng, ask, advice, allow_shrink, floor
        )
    candidates = candidates.iloc[rng.permutation(len(candidates))].reset_index(drop=True)
    sizes = candidates.groupby(["label", "role"]).size()
    info = {
        "source": "candidates",
        "n_docs": len(labelled),
        "n_members": len(members),
        "n_nonmembers": len(nonmembers),
        "n_reference_per_class": int(sizes.get((1, "reference"), 0)),
        "n_eval_per_class": int(sizes.get((1, "eval"), 0)),
        "n_reference_nonmembers": int(sizes.get((0, "reference"), 0)),
        "n_eval_nonmembers": int(sizes.get((0, "eval"), 0)),
        "requested_reference_per_class": n_reference,
        "requested_eval_per_class": n_eval,
        "roles_from_file": "role" in labelled.columns,
        "capped": ref is not None and (ref, ev) != (n_reference, n_eval),
        "seed": seed,
    }
    return members, nonmembers, candidates, info
