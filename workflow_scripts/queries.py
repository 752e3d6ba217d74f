"""Checkpoint queries: an attack writes its queries offline (no labels), then they are sharded."""

import os

import pandas as pd

from ragmi.attacks import get_attack
from ragmi.attacks.base import attack_candidates, check_queries
from ragmi.io import atomic_write_parquet
from ragmi.workflow import run_step


def main(smk, log):
    candidates = attack_candidates(pd.read_parquet(smk.input.candidates))  # labels stay hidden
    attack = get_attack(smk.wildcards.attack, smk.params.attack, seed=smk.params.seed, validated=True)
    materials = pd.read_parquet(smk.input.materials) if "materials" in smk.input.keys() else None
    queries = check_queries(attack.build_queries(candidates, materials))
    atomic_write_parquet(queries, smk.output.queries)
    size = int(smk.params.shard_size)
    os.makedirs(smk.output.shards, exist_ok=True)
    n = 0
    for n, start in enumerate(range(0, len(queries), size)):
        atomic_write_parquet(queries.iloc[start : start + size], os.path.join(smk.output.shards, f"{n:05d}.parquet"))
    log(f"{len(queries)} queries for {len(candidates)} candidates in {n + 1} shard(s) of at most {size}")


run_step(snakemake, main)  # noqa: F821
