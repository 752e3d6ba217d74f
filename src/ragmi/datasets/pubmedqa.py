"""PubMedQA abstracts (expert-labelled subset).

Hub: ``qiaojin/PubMedQA``, config ``pqa_labeled``, split ``train`` (1000 rows), columns ``pubid``
(int), ``question`` and ``context`` -- a struct whose ``contexts`` field is the list of abstract
sections.  ``doc_id = str(pubid)``, ``text = " ".join(context["contexts"])``, ``title = question``.
A local copy must keep ``context`` nested (.parquet, .jsonl or .json; a CSV cannot hold it).

:func:`qa_pairs`: the dataset's own question-answer pairs for the utility measures
(``ragmi.utility``): ``question`` and its expert ``long_answer`` (the conclusion of the abstract, which
the abstract's text itself does not contain), and the ``final_decision`` (yes/no/maybe) beside it.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ragmi.datasets.hf import load_hf_frame
from ragmi.errors import DataError

HF_ID = "qiaojin/PubMedQA"
COLUMNS = ("pubid", "question", "context")
QA_COLUMNS = ("pubid", "question", "long_answer", "final_decision")


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    raw = load_hf_frame(name, spec, hf_id=HF_ID, config="pqa_labeled", split="train", columns=COLUMNS)
    texts = []
    for i, ctx in enumerate(raw["context"]):
        parts = ctx.get("contexts") if isinstance(ctx, dict) else None
        if parts is None or isinstance(parts, str):
            where = f"file {spec['path']}" if spec.get("path") else f"Hub dataset {spec.get('hf_id', HF_ID)}"
            raise DataError(
                f"datasets.{name}: {where} row {i} has no list 'context.contexts' "
                f"(column 'context' must be a struct with a 'contexts' list of strings)."
            )
        texts.append(" ".join(str(p).strip() for p in parts))
    return pd.DataFrame({"doc_id": raw["pubid"].astype(str), "text": texts, "title": raw["question"]})


def qa_pairs(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    """doc_id, question, answer (the long answer) and final_decision of every row."""
    raw = load_hf_frame(name, spec, hf_id=HF_ID, config="pqa_labeled", split="train", columns=QA_COLUMNS)
    return pd.DataFrame(
        {
            "doc_id": raw["pubid"].astype(str),
            "question": raw["question"].astype(str),
            "answer": raw["long_answer"].fillna("").astype(str),
            "final_decision": raw["final_decision"].fillna("").astype(str),
        }
    )
