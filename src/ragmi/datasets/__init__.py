"""Corpora: every source becomes a frame with exactly ``doc_id``, ``text``, ``title`` (all ``str``).

Public API::

    load_corpus(name, spec, seed) -> (df, stats)   # spec = config["datasets"][name]
    normalize(df, name="corpus") -> (df, stats)

``spec["source"]`` picks the loader (:data:`SOURCES`); the other spec keys are documented in each
loader module (``synthetic``, ``healthcaremagic``, ``beir``, ``enron``, ``pubmedqa``, ``local``; the
Hub keys ``hf_id/config/split/revision/path/max_docs`` in ``hf``).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ragmi.errors import ConfigError, DataError

COLUMNS = ["doc_id", "text", "title"]
SOURCES = ("synthetic", "healthcaremagic", "trec-covid", "nfcorpus", "scidocs", "enron", "pubmedqa", "local")


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
    if source == "synthetic":
        from ragmi.datasets import synthetic

        return synthetic.load(name, spec, seed)
    if source == "healthcaremagic":
        from ragmi.datasets import healthcaremagic

        return healthcaremagic.load(name, spec)
    if source in ("trec-covid", "nfcorpus", "scidocs"):
        from ragmi.datasets import beir

        return beir.load(name, spec, source)
    if source == "enron":
        from ragmi.datasets import enron

        return enron.load(name, spec)
    if source == "pubmedqa":
        from ragmi.datasets import pubmedqa

        return pubmedqa.load(name, spec)
    if source == "local":
        from ragmi.datasets import local

        return local.load(name, spec)
    raise ConfigError(
        f"datasets.{name}.source is {source!r}, which is not one of: {', '.join(SOURCES)}."
    )


def load_corpus(name: str, spec: Mapping, seed: int) -> tuple[pd.DataFrame, dict]:
    """Load dataset ``name`` described by ``spec`` (``config['datasets'][name]``) and normalise it.

    ``seed`` only matters for seeded sources (``synthetic``).  Raises :class:`ConfigError` for a bad
    spec and :class:`DataError` for missing/unreadable data, each with one sentence naming the key
    or file.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"datasets.{name} must be a mapping with at least a 'source' key.")
    return normalize(_load_raw(name, spec, seed), name)
