"""Corpora: every source becomes a frame with exactly ``doc_id``, ``text``, ``title``, ``human_turn``
(all ``str``).

``text`` is the document as the retrieval database holds it; ``human_turn`` is the human (patient)
part of a dialogue document, kept apart so that an attack can quote the part its paper used as the
sample (RAG-MIA §4: "In the HealthCareMagic dataset, the human part of the dialogue is used as the
sample"); it is "" for corpora that are not dialogues.

Public API::

    load_corpus(name, spec, seed) -> (df, stats)   # spec = config["datasets"][name]
    normalize(df, name="corpus") -> (df, stats)

``spec["source"]`` picks the loader in :data:`REGISTRY`; every loader is ``load(name, spec, seed)``
and documents its other spec keys (the Hub keys ``hf_id/config/split/revision/path/max_docs`` are in
``hf``).  Where the corpora come from: docs/provenance.md#datasets.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import pandas as pd

from ragmi.datasets import beir, candidates, enron, healthcaremagic, keb, local, pubmedqa, synthetic
from ragmi.errors import ConfigError, DataError

COLUMNS = ["doc_id", "text", "title", "human_turn"]

# load(name, spec, seed) -> the raw frame of dataset ``name``; ``seed`` matters to seeded sources only.
Loader = Callable[[str, Mapping, int], pd.DataFrame]

REGISTRY: dict[str, Loader] = {
    "synthetic": synthetic.load,
    "healthcaremagic": healthcaremagic.load,
    **{corpus: beir.load for corpus in beir.CORPORA},
    "enron": enron.load,
    "pubmedqa": pubmedqa.load,
    "keb": keb.load,
    "local": local.load,
    "candidates": candidates.load,
}
SOURCES = tuple(REGISTRY)

# Sources with question-answer pairs of their own (the utility question set, ragmi.utility.questions):
# qa_pairs(name, spec, seed) -> frame with doc_id, question, answer.
QA_SOURCES: dict[str, Loader] = {"pubmedqa": pubmedqa.qa_pairs}


def load_qa_pairs(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    """The question-answer pairs of dataset ``name`` (its source must be in :data:`QA_SOURCES`)."""
    return QA_SOURCES[spec["source"]](name, with_schema_defaults(spec), seed)


def normalize(df: pd.DataFrame, name: str = "corpus") -> tuple[pd.DataFrame, dict]:
    """Clean a loader's frame into the canonical corpus.

    Keeps ``doc_id, text, title, human_turn`` (missing values and missing columns become ""), casts
    them to ``str`` and strips them;
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


def with_schema_defaults(spec: Mapping) -> dict:
    """``spec`` with the defaults that ``config/schema.yaml`` gives its source (``allOf`` rules of a
    ``datasets`` entry) filled in where absent; nothing is validated here (the loaders check their
    keys and name them in their errors)."""
    from ragmi.schema import load_schema

    entry = load_schema()["properties"]["datasets"]["additionalProperties"]
    out = dict(spec)
    for rule in entry.get("allOf", []):
        cond = rule["if"]["properties"]["source"]
        allowed = [cond["const"]] if "const" in cond else list(cond["enum"])
        if out.get("source") in allowed:
            for key, sub in rule["then"]["properties"].items():
                out.setdefault(key, copy.deepcopy(sub["default"]))
    return out


def load_corpus(name: str, spec: Mapping, seed: int) -> tuple[pd.DataFrame, dict]:
    """Load dataset ``name`` described by ``spec`` (``config['datasets'][name]``) and normalise it.

    ``seed`` only matters for seeded sources (``synthetic``).  The schema's defaults of the source are
    filled in (:func:`with_schema_defaults`), so a spec that did not go through the config validation
    loads the same.  Raises :class:`ConfigError` for a bad spec and :class:`DataError` for
    missing/unreadable data, each with one sentence naming the key or file.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"datasets.{name} must be a mapping with at least a 'source' key.")
    df, stats = normalize(_load_raw(name, with_schema_defaults(spec), seed), name)
    if stats["n_docs"] == 0:
        raise DataError(
            f"datasets.{name}: no documents left after cleaning: all {stats['n_raw']} texts are empty or "
            f"duplicates ({stats['n_empty_dropped']} empty, {stats['n_duplicates_dropped']} duplicates)."
        )
    return df, stats
