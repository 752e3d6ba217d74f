"""Rule generate: the target RAG system (with its defenses) answers one shard of queries.

Besides the responses, the job records what its generation cost (``CachedGenerator.serving_record``:
prompt tokens sent, prompt tokens the server actually computed after its prefix-cache hits,
completion tokens, wall time) in its log and in ``<log>.serving.json`` next to the log; that file is
no rule output and no table reads it.
"""

import json
import time
from pathlib import Path

import pandas as pd

from ragmi.defenses.ca_dp import set_attack_turns
from ragmi.io import atomic_write_parquet, atomic_write_text
from ragmi.plan import is_python, is_remote
from ragmi.rag.factory import rag_system
from ragmi.rag.python_target import python_target
from ragmi.rag.remote import remote_target
from ragmi.stores.base import game_aliases
from ragmi.workflow import RESPONSE_FILE_COLUMNS, eval_queries, run_step, target_spec


def main(smk, log):
    t0 = time.perf_counter()
    shard = pd.read_parquet(smk.input.shard)
    spec = target_spec(smk)
    if "control_candidates" in smk.input.keys():  # a negative control answers the evaluation candidates only
        shard = eval_queries(shard, pd.read_parquet(smk.input.control_candidates))
    log(f"target {spec.name}: {len(shard)} queries (shard {smk.wildcards.shard})")
    if is_remote(spec.target):  # a service over HTTP: no database, no index here
        documents = None
        if "source_members" in smk.input.keys():  # remote.sources_path: its sources matched to these
            documents = pd.concat(
                [
                    pd.read_parquet(smk.input[c], columns=["doc_id", "text", "title"])
                    for c in ("source_members", "source_nonmembers")
                ],
                ignore_index=True,
            )
        aliases = None
        if documents is not None and "store_inserted" in smk.input.keys():
            # the store game's ids of its members name them too (a service reports the store's ids)
            aliases = game_aliases(json.loads(Path(smk.input.store_inserted).read_text())["manifest"])
        system = remote_target(spec, log, documents, aliases)
    elif is_python(spec.target):  # a user's chain called in process: its own database and index
        system = python_target(spec, log)
    else:
        system = rag_system(spec, pd.read_parquet(smk.input.members), log)
    with system as rag:
        # CA-DP's T: the queries this attack spends on one candidate, over all its shards
        if any(d.kind == "ca_dp" for d in getattr(rag, "defenses", ())):
            queries = pd.read_parquet(smk.input.queries, columns=["doc_id"])
            set_attack_turns(rag.defenses, queries, f"attack {smk.wildcards.attack}")
        answers = rag.answer(
            shard["user_prompt"].tolist(),
            shard["max_tokens"].tolist(),
            shard["top_logprobs"].tolist(),
            shard["query_id"].astype(str).tolist(),
        )
        for d in rag.defenses:
            log(f"defense {d.name} ({d.kind}): {d.record().get('stats', {})}")
        framework = getattr(rag, "framework", None)  # a remote or python target has none of its own
        if framework is not None and framework.name != "standard":
            log(f"framework {framework.name}: {getattr(framework, 'stats', {})}")
        record_fn = getattr(rag.generator, "serving_record", None)
        serving = record_fn() if record_fn else {}
    out = pd.DataFrame(answers).assign(query_id=shard["query_id"].to_numpy())[RESPONSE_FILE_COLUMNS]
    atomic_write_parquet(out, smk.output.responses)
    log(f"wrote {len(out)} responses ({int(out['cached'].sum())} from cache)")
    if len(smk.log):
        record = dict(
            serving,
            target=spec.name,
            dataset=smk.wildcards.dataset,
            attack=smk.wildcards.attack,
            shard=smk.wildcards.shard,
            job_wall_s=round(time.perf_counter() - t0, 3),
        )
        path = Path(smk.log[0]).with_suffix(".serving.json")
        atomic_write_text(json.dumps(record, indent=1), path)


run_step(snakemake, main)  # noqa: F821
