"""Per-question scores of one target's answers to the benign questions (the evaluator's side: it reads
the retrieved ids and the database texts, which no attack sees)."""

from __future__ import annotations

import pandas as pd

from .measures import METRICS, abstained, score_answer

COLUMNS = [
    "question_id",
    "doc_id",
    "question",
    "reference",
    "response_text",
    "refused",
    "abstained",
    "n_retrieved",
    "source_retrieved",
    *METRICS,
]


def _ids(value) -> list[str] | None:
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return [str(v) for v in list(value)]


def score_responses(questions: pd.DataFrame, responses: pd.DataFrame, documents: dict | None) -> pd.DataFrame:
    """One row per valid question (:data:`COLUMNS`), sorted by question_id: the answer, whether a
    defense refused it or the model abstained, how many documents were retrieved and whether the
    question's own document was among them, and every measure of :mod:`ragmi.utility.measures`.
    ``documents`` (doc_id -> database text) is None for a remote target, whose retrieved texts are
    unknown: its faithfulness and retrieval columns are NaN."""
    q = questions[questions["valid"]][["question_id", "doc_id", "question", "answer"]]
    df = q.merge(
        responses.rename(columns={"query_id": "question_id"}), on="question_id", how="left", validate="one_to_one"
    )
    missing = df.loc[df["response_text"].isna(), "question_id"]
    if len(missing):
        raise ValueError(f"responses missing for utility questions {missing.head(3).tolist()}")
    rows = []
    for _, r in df.sort_values("question_id").iterrows():
        ids = _ids(r.get("retrieved_ids")) if documents is not None else None
        docs = None if ids is None else [documents[d] for d in ids if d in documents]
        text = str(r["response_text"])
        rows.append(
            {
                "question_id": r["question_id"],
                "doc_id": r["doc_id"],
                "question": r["question"],
                "reference": r["answer"],
                "response_text": text,
                "refused": bool(r.get("refused", False)),
                "abstained": abstained(text),
                "n_retrieved": float("nan") if ids is None else len(ids),
                "source_retrieved": float("nan") if ids is None else float(str(r["doc_id"]) in ids),
                **score_answer(text, [r["answer"]], docs),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
