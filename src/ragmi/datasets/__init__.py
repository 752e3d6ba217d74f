"""Corpora: every source becomes a frame with exactly ``doc_id``, ``text``, ``title`` (all ``str``).

Public API::

    load_corpus(name, spec, seed) -> (df, stats)   # spec = config["datasets"][name]
    normalize(df, name="corpus") -> (df, stats)

``spec["source"]`` picks the loader in :data:`REGISTRY`; every loader is ``load(name, spec, seed)``
and documents its other spec keys (the Hub keys ``hf_id/config/split/revision/path/max_docs`` are in
``hf``).  Where the corpora come from: docs/provenance.md#datasets.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from ragmi.datasets import beir, enron, healthcaremagic, local, pubmedqa, synthetic
from ragmi.errors import ConfigError, DataError

COLUMNS = ["doc_id", "text", "title"]

# load(name, spec, seed) -> the raw frame of dataset ``name``; ``seed`` matters to seeded sources only.
Loader = Callable[[str, Mapping, int], pd.DataFrame]

REGISTRY: dict[str, Loader] = {
    "synthetic": synthetic.load,
    "healthcaremagic": healthcaremagic.load,
    **{corpus: beir.load for corpus in beir.CORPORA},
    "enron": enron.load,
    "pubmedqa": pubmedqa.load,
    "local": local.load,
}
SOURCES = tuple(REGISTRY)


def normalize(df: pd.DataFrame, name: str = "corpus") -> tuple[pd.DataFrame, dict]:
    """Clean a loader's frame into the canonical corpus.

    Keeps ``doc_id, text, title`` (missing values become ""), casts them to ``str`` and strips them;
    drops rows whose text is empty; drops later copies of a text that is identical to an earlier one
    once whitespace runs are collapsed and case is folded (the first occurrence is kept, its text
    unchanged); then requires non-empty, unique ``doc_id`` -- colliding source ids are a
    :class:`DataError` naming the dataset, never silently renamed.

    Returns ``(df, stats)`` with ``stats = {n_raw, n_empty_dropped, n_duplicates_dropped, n_docs}``.
    """
    n_raw = len(df)
    out = pd.DataFrame(
        {c: df[c].fillna("").astype(str).str.strip() if c in df.columns else "" for c in COLUMNS},
        index=df.index,
    )
    nonempty = out[out["text"] != ""]
    key = nonempty["text"].str.split().str.join(" ").str.casefold()
    kept = nonempty[~key.duplicated(keep="first")].reset_index(drop=True)

    if (kept["doc_id"] == "").any():
        raise DataError(f"datasets.{name}: {int((kept['doc_id'] == '').sum())} documents have an empty doc_id.")
    dup = kept["doc_id"][kept["doc_id"].duplicated()]
    if len(dup):
        shown = ", ".join(sorted(set(dup))[:5])
        raise DataError(f"datasets.{name}: doc_id values are not unique ({len(set(dup))} repeated, e.g. {shown}).")

    stats = {
        "n_raw": n_raw,
        "n_empty_dropped": n_raw - len(nonempty),
        "n_duplicates_dropped": len(nonempty) - len(kept),
        "n_docs": len(kept),
    }
    return kept, stats


def _load_raw(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    source = spec.get("source")
    if not isinstance(source, str) or source not in REGISTRY:
        raise ConfigError(f"datasets.{name}.source is {source!r}, which is not one of: {', '.join(SOURCES)}.")
    return REGISTRY[source](name, spec, seed)


def load_corpus(name: str, spec: Mapping, seed: int) -> tuple[pd.DataFrame, dict]:
    """Load dataset ``name`` described by ``spec`` (``config['datasets'][name]``) and normalise it.

    ``seed`` only matters for seeded sources (``synthetic``).  Raises :class:`ConfigError` for a bad
    spec and :class:`DataError` for missing/unreadable data, each with one sentence naming the key
    or file.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"datasets.{name} must be a mapping with at least a 'source' key.")
    df, stats = normalize(_load_raw(name, spec, seed), name)
    if stats["n_docs"] == 0:
        raise DataError(
            f"datasets.{name}: no documents left after cleaning: all {stats['n_raw']} texts are empty or "
            f"duplicates ({stats['n_empty_dropped']} empty, {stats['n_duplicates_dropped']} duplicates)."
        )
    return df, stats
