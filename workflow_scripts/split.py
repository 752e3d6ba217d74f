"""Rule split: members / non-members, then the reference and evaluation candidates."""

import pandas as pd

from ragmi.io import atomic_write_parquet, write_json
from ragmi.split import split_corpus
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    corpus = pd.read_parquet(smk.input.corpus)
    members, nonmembers, candidates, info = split_corpus(
        corpus, p.member_fraction, p.n_reference, p.n_eval, int(p.seed), name=p.name, allow_shrink=p.allow_shrink
    )
    if info["capped"]:
        bar = "!" * 100
        log(bar)
        log(
            f"WARNING: dataset {p.name}: SHRUNK to {info['n_reference_per_class']} reference + "
            f"{info['n_eval_per_class']} evaluation candidates per class (requested {p.n_reference} + {p.n_eval}; "
            f"{info['n_members']} members, {info['n_nonmembers']} non-members), because split.allow_shrink is "
            "true. Every number of this dataset rests on these smaller sets (see split.json)."
        )
        log(bar)
    log(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members; candidates per class: "
        f"{info['n_reference_per_class']} reference + {info['n_eval_per_class']} evaluation"
    )
    atomic_write_parquet(members, smk.output.members)
    atomic_write_parquet(nonmembers, smk.output.nonmembers)
    atomic_write_parquet(candidates, smk.output.candidates)
    write_json(info, smk.output.info)


run_step(snakemake, main)  # noqa: F821
