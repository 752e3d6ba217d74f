"""BEIR corpora: TREC-COVID, NFCorpus, SCIDOCS.

Hub: ``BeIR/<name>`` (``BeIR/trec-covid``, ``BeIR/nfcorpus``, ``BeIR/scidocs``), config ``corpus``,
split ``corpus``, columns ``_id``, ``title``, ``text`` -- the same fields as the ``corpus.jsonl`` of
the BEIR benchmark (Thakur et al., 2021).  ``doc_id`` is BEIR's ``_id``.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ragmi.datasets.hf import load_hf_frame

COLUMNS = ("_id", "title", "text")
CORPORA = ("trec-covid", "nfcorpus", "scidocs")


def load(name: str, spec: Mapping, corpus: str) -> pd.DataFrame:
    """``corpus`` is one of :data:`CORPORA` (the ``source`` of the spec)."""
    raw = load_hf_frame(
        name, spec, hf_id=f"BeIR/{corpus}", config="corpus", split="corpus", columns=COLUMNS
    )
    return pd.DataFrame({"doc_id": raw["_id"], "text": raw["text"], "title": raw["title"]})
