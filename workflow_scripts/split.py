"""Rule split: members / non-members, then the reference and evaluation candidates."""

import pandas as pd

from ragmi.split import split_corpus
from ragmi.workflow import run_step, split_options, write_split


def main(smk, log):
    p = smk.params
    corpus = pd.read_parquet(smk.input.corpus)
    members, nonmembers, candidates, info = split_corpus(
        corpus,
        p.member_fraction,
        p.n_reference,
        p.n_eval,
        int(p.seed),
        **split_options(p),
    )
    log(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members; candidates per class: "
        f"{info['n_reference_per_class']} reference + {info['n_eval_per_class']} evaluation"
    )
    requested = (
        f"requested {p.n_reference} + {p.n_eval}; {info['n_members']} members, {info['n_nonmembers']} non-members"
    )
    write_split(smk, log, p.name, members, nonmembers, candidates, info, requested)


run_step(snakemake, main)  # noqa: F821
