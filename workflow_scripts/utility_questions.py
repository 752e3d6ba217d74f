"""Checkpoint utility_questions: the benign question set of one dataset (ragmi.utility.questions),
frozen as parquet, and the same questions as the query file and shards of rule generate."""

import os

import pandas as pd

from ragmi.io import atomic_write_parquet
from ragmi.utility import questions as uq
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    u = dict(p.utility)
    members = pd.read_parquet(smk.input.members)
    pool = uq.question_pool(members, pd.read_parquet(smk.input.candidates, columns=["doc_id"]), int(u["seed"]))
    n = int(u["n_questions"])
    if p.qa_pairs:
        from ragmi.datasets import load_qa_pairs

        questions = uq.dataset_questions(load_qa_pairs(p.name, dict(p.dataset), int(u["seed"])), pool, n)
        log(f"{len(questions)} of the dataset's own question-answer pairs, about member documents")
    else:
        from ragmi.attacker_tools import attacker_tools

        titles = members["title"].fillna("") if "title" in members else [""] * len(members)
        documents = dict(zip(members["doc_id"].astype(str), zip(titles, members["text"])))
        model_dir = smk.input.model if "model" in smk.input.keys() else None
        with attacker_tools(
            dict(p.generator), model_dir, p.cache_dir, smk.threads, p.server_log, int(u["seed"]), log
        ) as tools:
            questions = uq.llm_questions(tools, documents, pool, n, u, float(p.temperature), log)
        reasons = questions.loc[~questions["valid"], "reject_reason"].value_counts().to_dict()
        log(
            f"{int(questions['valid'].sum())} question-answer pairs kept of {len(questions)} written; rejected: {reasons}"
        )
    if int(questions["valid"].sum()) < n:
        log(f"WARNING: {int(questions['valid'].sum())} questions instead of utility.n_questions = {n}")
    atomic_write_parquet(questions, smk.output.questions)
    queries = uq.utility_queries(questions, int(u["max_tokens"]))
    atomic_write_parquet(queries, smk.output.queries)
    size = int(p.shard_size)
    os.makedirs(smk.output.shards, exist_ok=True)
    for i, start in enumerate(range(0, len(queries), size)):
        atomic_write_parquet(queries.iloc[start : start + size], os.path.join(smk.output.shards, f"{i:05d}.parquet"))


run_step(snakemake, main)  # noqa: F821
