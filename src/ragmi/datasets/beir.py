"""BEIR corpora: TREC-COVID, NFCorpus, SCIDOCS (the spec's ``source`` names the corpus).

Hub: ``BeIR/<source>``, config ``corpus``, split ``corpus``, columns ``_id``, ``title``, ``text``
(the fields of BEIR's ``corpus.jsonl``).  ``doc_id`` is BEIR's ``_id``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ragmi.datasets.hf import load_hf_frame

COLUMNS = ("_id", "title", "text")
CORPORA = ("trec-covid", "nfcorpus", "scidocs")


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    raw = load_hf_frame(name, spec, hf_id=f"BeIR/{spec['source']}", config="corpus", split="corpus", columns=COLUMNS)
    return pd.DataFrame({"doc_id": raw["_id"], "text": raw["text"], "title": raw["title"]})
