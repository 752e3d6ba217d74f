"""Rule generate: the target RAG system (with its defenses) answers one shard of queries."""

import pandas as pd

from ragmi.config import is_remote
from ragmi.io import atomic_write_parquet
from ragmi.target.factory import rag_system
from ragmi.target.remote import remote_target
from ragmi.workflow import RESPONSE_FILE_COLUMNS, run_step, target_spec


def main(smk, log):
    shard = pd.read_parquet(smk.input.shard)
    spec = target_spec(smk)
    log(f"target {spec.name}: {len(shard)} queries (shard {smk.wildcards.shard})")
    if is_remote(spec.target):  # a service over HTTP: no database, no index here
        system = remote_target(spec, log)
    else:
        system = rag_system(spec, pd.read_parquet(smk.input.members), log)
    with system as rag:
        answers = rag.answer(
            shard["user_prompt"].tolist(),
            shard["max_tokens"].tolist(),
            shard["top_logprobs"].tolist(),
            shard["query_id"].astype(str).tolist(),
        )
        for d in rag.defenses:
            log(f"defense {d.name} ({d.kind}): {d.record().get('stats', {})}")
        framework = getattr(rag, "framework", None)  # a remote target has none of its own
        if framework is not None and framework.name != "standard":
            log(f"framework {framework.name}: {getattr(framework, 'stats', {})}")
    out = pd.DataFrame(answers).assign(query_id=shard["query_id"].to_numpy())[RESPONSE_FILE_COLUMNS]
    atomic_write_parquet(out, smk.output.responses)
    log(f"wrote {len(out)} responses ({int(out['cached'].sum())} from cache)")


run_step(snakemake, main)  # noqa: F821
