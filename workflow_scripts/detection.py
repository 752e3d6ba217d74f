"""Rules benign_queries and detection (MEntA Tables 7-8; ragmi.audit.detection).

benign_queries: the dataset's benign query set (seeded, built from the corpus's topics, no document
quoted). detection: one target with a detector answers the benign queries; the verdicts of its
detectors on them and on its attack queries (the ``flagged`` entries of the responses' hook traces)
are written, one row per (attack, query, detector)."""

import pandas as pd

from ragmi.audit.detection import FLAG_COLUMNS, attack_flags, benign_flags, benign_queries
from ragmi.io import atomic_write_parquet
from ragmi.rag.factory import rag_system
from ragmi.workflow import read_responses, run_step, target_spec


def build_benign(smk, log):
    corpus = pd.read_parquet(smk.input.corpus)
    q = benign_queries(corpus, int(smk.params.n), int(smk.params.seed))
    atomic_write_parquet(q, smk.output.queries)
    log(f"{len(q)} benign queries from {len(corpus)} documents (seed {smk.params.seed})")


def run_detection(smk, log):
    members = pd.read_parquet(smk.input.members)
    benign = pd.read_parquet(smk.input.benign)
    spec = target_spec(smk)
    with rag_system(spec, members, log) as rag:
        answers = rag.answer(
            benign["user_prompt"].tolist(),
            benign["max_tokens"].tolist(),
            benign["top_logprobs"].tolist(),
            benign["query_id"].astype(str).tolist(),
        )
    responses = pd.DataFrame(answers).assign(query_id=benign["query_id"].astype(str).to_numpy())
    frames = [benign_flags(responses)]
    # the real split's members label the attack queries' candidates (a null-database control included)
    member_ids = pd.read_parquet(smk.input.split_members, columns=["doc_id"])["doc_id"]
    for attack, qfile in zip(smk.params.attacks, smk.input.queries):
        files = [f for f in smk.input.responses if f"/{attack}/" in f]
        queries = pd.read_parquet(qfile, columns=["query_id", "doc_id"])
        frames.append(attack_flags(attack, queries, read_responses(files), member_ids))
    flags = pd.concat(frames, ignore_index=True)[FLAG_COLUMNS]
    flags.insert(0, "target", smk.wildcards.target)
    flags.insert(0, "dataset", smk.wildcards.dataset)
    for (attack, defense), g in flags.groupby(["attack", "defense"], sort=True):
        log(f"{defense} on {attack}: {int(g['flagged'].sum())} of {len(g)} queries flagged")
    atomic_write_parquet(flags, smk.output.flags)


run_step(snakemake, run_detection if snakemake.rule == "detection" else build_benign)  # noqa: F821
