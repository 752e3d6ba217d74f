"""Rule utility_score: one target's answers to the benign questions, scored per question
(ragmi.utility.scoring; the evaluator's side: it reads the retrieved ids and the database texts)."""

import pandas as pd

from ragmi.io import atomic_write_text
from ragmi.utility.measures import METRICS
from ragmi.utility.scoring import score_responses
from ragmi.workflow import read_responses, run_step


def main(smk, log):
    questions = pd.read_parquet(smk.input.questions)
    responses = read_responses(smk.input.responses)
    documents = None
    if "members" in smk.input.keys():
        members = pd.read_parquet(smk.input.members, columns=["doc_id", "text"])
        documents = dict(zip(members["doc_id"].astype(str), members["text"]))
    scores = score_responses(questions, responses, documents)
    atomic_write_text(scores.to_csv(index=False, lineterminator="\n"), smk.output.scores)
    means = ", ".join(f"{m} {scores[m].mean():.3f}" for m in METRICS if scores[m].notna().any())
    log(f"{smk.wildcards.target}: {len(scores)} answers scored ({means})")


run_step(snakemake, main)  # noqa: F821
