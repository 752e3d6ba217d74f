"""Common machinery of the Hugging Face Hub loaders.

Spec keys shared by every Hub-backed source (``datasets.<name>``)::

    hf_id: lavita/ChatDoctor-HealthCareMagic-100k   # default depends on the source
    config: corpus                                  # Hub config ("subset"); default per source
    split: train                                    # default per source
    revision: main                                  # pin a commit hash for reproducibility
    path: /data/hcm.parquet                         # optional local copy, same columns as the Hub
    max_docs: 5000                                  # optional: keep the first N rows as loaded

When ``path`` is set the Hub is never contacted.  ``datasets`` (the Hugging Face library) is imported
only when the Hub is actually used, so offline runs with local copies do not need it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ragmi.datasets.local import read_table, require_columns
from ragmi.errors import ConfigError, DataError


def _import_load_dataset():
    """Return ``datasets.load_dataset`` (a separate function so tests can simulate an offline Hub)."""
    from datasets import load_dataset

    return load_dataset


def _from_hub(name: str, hf_id: str, config, split: str, revision: str, columns: Sequence[str]):
    try:
        load_dataset = _import_load_dataset()
        ds = load_dataset(hf_id, config, split=split, revision=revision)
        return ds.to_pandas()
    except Exception as exc:  # network, auth, missing repo, missing library: all mean "no Hub data"
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        raise DataError(
            f"datasets.{name}: the Hugging Face Hub could not be reached for '{hf_id}' "
            f"(config {config}, split {split}, revision {revision}; {detail}), so set "
            f"datasets.{name}.path to a local copy (.parquet/.jsonl/.json/.csv) with columns "
            f"{', '.join(columns)}."
        ) from exc


def load_hf_frame(
    name: str,
    spec: Mapping,
    *,
    hf_id: str,
    split: str,
    columns: Sequence[str],
    config: str | None = None,
) -> pd.DataFrame:
    """Load the raw rows of a Hub dataset (or of its local copy ``spec['path']``).

    ``hf_id``, ``config`` and ``split`` are the source's defaults, overridden by the spec.  Checks
    that ``columns`` exist, applies ``max_docs`` (first N rows, deterministic) and returns a frame
    with a fresh 0..N-1 index.
    """
    hf_id = spec.get("hf_id", hf_id)
    config = spec.get("config", config)
    split = spec.get("split", split)
    revision = spec["revision"]
    path = spec.get("path")
    if path:
        df, where = read_table(path, name), f"file {path}"
    else:
        df, where = _from_hub(name, hf_id, config, split, revision, columns), f"Hub dataset {hf_id}"
    require_columns(df, columns, name, where)
    max_docs = spec.get("max_docs")
    if max_docs is not None:
        if isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1:
            raise ConfigError(f"datasets.{name}.max_docs must be a positive integer (got {max_docs!r}).")
        df = df.head(max_docs)
    return df.reset_index(drop=True)
