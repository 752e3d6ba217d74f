"""Rule store_insert: the split's members into the target's vector store, the manifest first, and the
audit's canary documents of the target's canary seed into the same manifest
(ragmi.stores.base.insert_members; docs/vector-stores.md)."""

import pandas as pd

from ragmi.audit.canary_run import canary_exclude, store_canary_experiment
from ragmi.embedder import Embedder
from ragmi.io import write_json
from ragmi.stores import open_store
from ragmi.stores.base import insert_members
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    store = open_store(p.store, p.spec)
    name = store.embedder_name()
    log(f"store {store.where()}: embedder {name}")
    embedder = Embedder(name)
    store.check_dimension(int(embedder.encode(["ragmi"]).shape[1]))  # before the manifest and any write
    members = pd.read_parquet(smk.input.members)
    canaries = None
    if p.canary_seed is not None:
        corpus = pd.read_parquet(smk.input.canary_corpus)
        exp = store_canary_experiment(corpus, canary_exclude(smk), p.canary_seed, p.canary_max_tokens)
        canaries = exp.kb[["doc_id", "text", "title"]]
        log(f"canary seed {p.canary_seed}: {len(canaries)} canary documents go in with the members")
    m = insert_members(  # a failed insert removes what it inserted before it raises
        store,
        members,
        p.manifest,
        target=p.target,
        dataset=p.dataset,
        seed=int(p.seed),
        embed=embedder.encode,
        batch_size=p.spec["batch_size"],
        log=log,
        canaries=canaries,
    )
    write_json(
        {
            "manifest": p.manifest,
            "inserted": len(m["planned"]),
            "canaries": len(m["canaries"]),
            "embedder": name,
            "before": m["before"],
        },
        smk.output.marker,
    )


run_step(snakemake, main)  # noqa: F821
