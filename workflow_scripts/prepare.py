"""Rule prepare: offline query generation by the attacker (attacker LLM, proxy models), frozen as parquet."""

import pandas as pd

from ragmi.attacker_tools import attacker_tools
from ragmi.attacks import get_attack
from ragmi.attacks.base import attack_candidates
from ragmi.io import atomic_write_parquet
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    candidates = attack_candidates(pd.read_parquet(smk.input.candidates))  # labels stay hidden
    attack = get_attack(smk.wildcards.attack, p.attack, seed=p.seed, validated=True)
    model_dir = smk.input.model if "model" in smk.input.keys() else None
    with attacker_tools(
        dict(p.generator), model_dir, p.cache_dir, smk.threads, p.server_log, int(p.seed), log
    ) as tools:
        materials = attack.prepare(candidates, tools)
    atomic_write_parquet(materials, smk.output.materials)
    log(f"{len(materials)} material rows for {len(candidates)} candidates ({tools.llm_calls} attacker-LLM calls)")


run_step(snakemake, main)  # noqa: F821
