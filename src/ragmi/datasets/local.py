"""The user's own corpus file, and the file reading shared by every loader.

Spec keys (``datasets.<name>``)::

    source: local
    path: /data/my_corpus.parquet   # .parquet, .jsonl, .json or .csv (chosen by extension)
    text_column: body               # required
    id_column: uid                  # optional; default ids are doc-000000, doc-000001, ...
    title_column: subject           # optional; default title is ""

Formats: ``.jsonl`` is one JSON object per line; ``.json`` is either a JSON array of objects or
JSON lines (the Hugging Face Hub uses both); ``.csv`` has a header row.  JSON and CSV cells are read
as written (ids such as ``"007"`` stay strings, nested objects stay ``dict``/``list``); Parquet keeps
its own types, a struct column comes back as ``dict``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ragmi.errors import ConfigError, DataError

FORMATS = (".parquet", ".jsonl", ".json", ".csv")


def read_table(path: str | Path, name: str) -> pd.DataFrame:
    """Read a .parquet/.jsonl/.json/.csv file; any problem is a :class:`DataError` naming the file.

    A folder is accepted only as a partitioned ``.parquet`` dataset; an empty file, or one without a
    single record, is an error of its own (not a missing column)."""
    p = Path(path).expanduser()
    ext = p.suffix.lower()
    if p.is_dir() and ext != ".parquet":
        raise DataError(f"datasets.{name}: {p} is a folder; name the corpus file itself ({', '.join(FORMATS)}).")
    if ext not in FORMATS:
        raise DataError(
            f"datasets.{name}: file {p} has unsupported extension '{ext or '(none)'}' "
            f"(expected one of {', '.join(FORMATS)})."
        )
    if not p.exists():
        raise DataError(f"datasets.{name}: file {p} does not exist.")
    if p.is_file() and (p.stat().st_size == 0 or (ext != ".parquet" and not p.read_bytes().strip())):
        raise DataError(f"datasets.{name}: file {p} is empty.")
    try:
        if ext == ".parquet":
            df = pd.read_parquet(p)
        elif ext == ".csv":
            df = pd.read_csv(p, dtype=str, keep_default_na=False)
        else:
            raw = p.read_text(encoding="utf-8")
            if ext == ".json" and raw.lstrip().startswith("["):
                records = json.loads(raw)
            else:
                records = [json.loads(line) for line in raw.splitlines() if line.strip()]
            if not all(isinstance(r, dict) for r in records):
                raise ValueError("every record must be a JSON object")
            df = pd.DataFrame.from_records(records)
    except (OSError, ValueError, UnicodeDecodeError, ImportError) as exc:
        raise DataError(f"datasets.{name}: file {p} could not be read as {ext[1:]} ({exc}).") from exc
    if len(df) == 0:
        cols = f" (columns: {', '.join(map(str, df.columns))})" if len(df.columns) else ""
        raise DataError(f"datasets.{name}: file {p} holds no records{cols}.")
    return df


def require_columns(df: pd.DataFrame, columns: Iterable[str], name: str, where: str) -> None:
    """Raise :class:`DataError` if ``df`` (read from ``where``, e.g. ``file /x.parquet``) lacks a column."""
    for col in columns:
        if col not in df.columns:
            found = ", ".join(map(str, df.columns)) or "no columns"
            raise DataError(f"datasets.{name}: {where} has no column '{col}' (found: {found}).")


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    """Load a local corpus file into ``doc_id, text, title`` (not yet normalised)."""
    for key in ("path", "text_column"):
        if not spec.get(key):
            raise ConfigError(f"datasets.{name}.{key} is required for source 'local'.")
    path = spec["path"]
    df = read_table(path, name)
    text_col, id_col, title_col = spec["text_column"], spec.get("id_column"), spec.get("title_column")
    require_columns(df, [c for c in (text_col, id_col, title_col) if c], name, f"file {path}")
    return pd.DataFrame(
        {
            "doc_id": df[id_col] if id_col else [f"doc-{i:06d}" for i in range(len(df))],
            "text": df[text_col],
            "title": df[title_col] if title_col else "",
        }
    )
