"""Readers the analyses (and the report's frame builders) share: score files with their labels, the
split's candidates, the (dataset, target) pairs of score paths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def read_csvs(paths: Sequence[str]) -> pd.DataFrame:
    """The CSVs of ``paths`` (metrics, hook inventories, leakage runs), one frame, in the order given."""
    return pd.concat([pd.read_csv(f) for f in paths], ignore_index=True)


def read_scores(score_paths: Sequence[str], candidate_paths: Sequence[str]) -> dict:
    """{(dataset, target, attack): scores frame with doc_id, variant, score, label, role} from
    ``results/scores/{dataset}/{target}/{attack}.parquet`` and ``results/split/{dataset}/candidates.parquet``
    (the path's last parts name them).  The skipped-variant rows (score NaN) are dropped; labels and
    roles come from the candidates when the scores frame lacks them."""
    from ..attacks.base import split_skipped

    candidates = {Path(p).parent.name: p for p in candidate_paths}
    cache: dict = {}
    out = {}
    for p in score_paths:
        parts = Path(p).parts
        dataset, target, attack = parts[-3], parts[-2], Path(p).stem
        df, _ = split_skipped(pd.read_parquet(p))
        df = df[df["score"].notna()]
        if not {"label", "role"} <= set(df.columns):
            if dataset not in cache:
                cache[dataset] = pd.read_parquet(candidates[dataset], columns=["doc_id", "label", "role"])
            df = df.drop(columns=[c for c in ("label", "role") if c in df]).merge(
                cache[dataset], on="doc_id", how="inner", validate="many_to_one"
            )
        out[(dataset, target, attack)] = df
    return out


def read_candidates(paths: Sequence[str]) -> dict[str, pd.DataFrame]:
    """{dataset: its candidates' doc_id, label, role and, where the split has it, text}."""
    import pyarrow.parquet as pq

    out = {}
    for p in paths:
        have = set(pq.read_schema(p).names)
        cols = ["doc_id", "label", "role"] + (["text"] if "text" in have else [])
        out[Path(p).parent.name] = pd.read_parquet(p, columns=cols)
    return out


def score_pairs(score_paths: Sequence[str]) -> list[tuple[str, str]]:
    """(dataset, target) of ``results/scores/{dataset}/{target}/{attack}.parquet`` paths, sorted."""
    return sorted({(Path(p).parts[-3], Path(p).parts[-2]) for p in score_paths})


# --------------------------------------------------------------------------------------------
# Readers the frame builders share
# --------------------------------------------------------------------------------------------
def read_json_rows(paths: Sequence[str]) -> pd.DataFrame:
    """One row per JSON object file of ``paths`` (the canary results), in the order given."""
    return pd.DataFrame([json.loads(Path(f).read_text()) for f in paths])
