"""Rule generate: the target RAG system answers one shard of queries."""
import pandas as pd

from ragmi.target.factory import rag_system
from ragmi.workflow import atomic_write_parquet, run_step

KEEP = ["query_id", "response_text", "first_token_logprobs", "token_logprobs", "prompt_tokens",
        "completion_tokens", "latency_s", "cached", "retrieved_ids", "retrieval_scores", "retrieval_s"]


def main(smk, log):
    p = smk.params
    shard = pd.read_parquet(smk.input.shard)
    members = pd.read_parquet(smk.input.members)
    model_dir = smk.input.model if "model" in smk.input.keys() else None
    log(f"target {smk.wildcards.target}: {len(shard)} queries (shard {smk.wildcards.shard})")
    with rag_system(dict(p.target), dict(p.retriever), dict(p.generator), smk.input.index, members, model_dir,
                    p.cache_dir, smk.threads, p.server_log, int(p.seed), float(p.temperature), log,
                    retriever_name=p.target["retriever"]) as rag:
        answers = rag.answer(shard["user_prompt"].tolist(), shard["max_tokens"].tolist(),
                             shard["top_logprobs"].tolist())
    out = pd.DataFrame(answers).assign(query_id=shard["query_id"].to_numpy())[KEEP]
    atomic_write_parquet(out, smk.output.responses)
    log(f"wrote {len(out)} responses ({int(out['cached'].sum())} from cache)")


run_step(snakemake, main)  # noqa: F821
