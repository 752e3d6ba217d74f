"""The user's labelled candidate documents: what an audit of a remote RAG service tests.

Spec keys (``datasets.<name>``)::

    source: candidates
    path: /data/audit_candidates.jsonl   # .parquet, .jsonl, .json or .csv
    text_column: text                    # default "text"
    label_column: label                  # default "label": 1/0, true/false, member/non-member
    id_column: id                        # optional; default ids are doc-000000, ...
    title_column: title                  # optional
    role_column: role                    # optional: reference/eval per document

Members are documents the user knows the service's database holds, non-members documents it
knows it does not; both come from the user, never from a split of a corpus, and no index is built
from them (the service retrieves on its own).  :func:`read_candidates` keeps the labels (the split,
``ragmi.split.split_labelled``); :func:`load` is the plain corpus view (no labels) for rules that
read any dataset's corpus.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ragmi.datasets.local import read_table, require_columns
from ragmi.errors import DataError

MEMBER = {"1", "true", "member", "yes", "in"}
NONMEMBER = {"0", "false", "non-member", "nonmember", "non_member", "no", "out"}
ROLES = ("reference", "eval")


def _label(value, name: str, path, row: int, col: str) -> int:
    text = str(value).strip().casefold()
    if text in ("1.0",):
        text = "1"
    if text in ("0.0",):
        text = "0"
    if text in MEMBER:
        return 1
    if text in NONMEMBER:
        return 0
    raise DataError(
        f"datasets.{name}: file {path} row {row}: {col} is {value!r}; expected 1/0, true/false or member/non-member"
    )


def read_candidates(name: str, spec: Mapping) -> pd.DataFrame:
    """``doc_id, text, title, human_turn, label`` (and ``role`` when the spec names a role column), in
    the file's order; a duplicate id or text, an empty text or an unknown label is a DataError naming
    the file and row."""
    path = spec["path"]
    df = read_table(path, name)
    cols = {k: spec.get(f"{k}_column") for k in ("text", "label", "id", "title", "role")}
    require_columns(df, [c for c in cols.values() if c], name, f"file {path}")
    out = pd.DataFrame(
        {
            "doc_id": df[cols["id"]].astype(str).str.strip()
            if cols["id"]
            else [f"doc-{i:06d}" for i in range(len(df))],
            "text": df[cols["text"]].fillna("").astype(str).str.strip(),
            "title": df[cols["title"]].fillna("").astype(str).str.strip() if cols["title"] else "",
            "human_turn": "",
        }
    )
    col = cols["label"]
    out["label"] = [_label(v, name, path, i + 1, col) for i, v in enumerate(df[col])]
    if cols["role"]:
        roles = df[cols["role"]].astype(str).str.strip().str.casefold()
        bad = [(i + 1, r) for i, r in enumerate(roles) if r not in ROLES]
        if bad:
            raise DataError(
                f"datasets.{name}: file {path} row {bad[0][0]}: {cols['role']} is {bad[0][1]!r}; "
                f"expected {' or '.join(ROLES)}"
            )
        out["role"] = roles.to_numpy()
    empty = [i + 1 for i, t in enumerate(out["text"]) if not t]
    if empty:
        raise DataError(f"datasets.{name}: file {path} row {empty[0]}: empty text ({len(empty)} such rows)")
    for what, key in (("doc_id", out["doc_id"]), ("text", out["text"].str.split().str.join(" ").str.casefold())):
        dup = key[key.duplicated()]
        if len(dup):
            row = int(dup.index[0]) + 1
            raise DataError(f"datasets.{name}: file {path} row {row}: repeated {what} ({len(dup)} repeats)")
    return out.reset_index(drop=True)


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    """The candidates as a plain corpus (labels and roles dropped)."""
    return read_candidates(name, spec)[["doc_id", "text", "title", "human_turn"]]
