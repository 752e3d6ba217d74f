"""Rule split_candidates: the user's labelled candidates (datasets of source 'candidates') become the
split's members, non-members and reference / evaluation candidates; no corpus, no index."""

from ragmi.datasets import with_schema_defaults
from ragmi.datasets.candidates import read_candidates
from ragmi.split import split_labelled
from ragmi.workflow import run_step, split_options, write_split


def main(smk, log):
    p = smk.params
    labelled = read_candidates(p.name, with_schema_defaults(dict(p.spec)))
    members, nonmembers, candidates, info = split_labelled(
        labelled,
        p.n_reference,
        p.n_eval,
        int(p.seed),
        **split_options(p),
    )
    log(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members from {smk.input.candidates}; candidates: "
        f"{info['n_reference_per_class']}/{info['n_reference_nonmembers']} reference and "
        f"{info['n_eval_per_class']}/{info['n_eval_nonmembers']} evaluation (members/non-members)"
    )
    write_split(smk, log, p.name, members, nonmembers, candidates, info, f"requested {p.n_reference} + {p.n_eval}")


run_step(snakemake, main)  # noqa: F821
