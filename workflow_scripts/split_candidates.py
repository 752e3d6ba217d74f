"""Rule split_candidates: the user's labelled candidates (datasets of source 'candidates') become the
split's members, non-members and reference / evaluation candidates; no corpus, no index."""

from ragmi.datasets import with_schema_defaults
from ragmi.datasets.candidates import read_candidates
from ragmi.io import atomic_write_parquet, write_json
from ragmi.split import split_labelled
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    labelled = read_candidates(p.name, with_schema_defaults(dict(p.spec)))
    members, nonmembers, candidates, info = split_labelled(
        labelled, p.n_reference, p.n_eval, int(p.seed), name=p.name, allow_shrink=p.allow_shrink
    )
    if info["capped"]:
        log(
            f"WARNING: dataset {p.name}: SHRUNK to {info['n_reference_per_class']} reference + "
            f"{info['n_eval_per_class']} evaluation candidates per class (split.allow_shrink is true)"
        )
    log(
        f"{info['n_members']} members, {info['n_nonmembers']} non-members from {smk.input.candidates}; candidates: "
        f"{info['n_reference_per_class']}/{info['n_reference_nonmembers']} reference and "
        f"{info['n_eval_per_class']}/{info['n_eval_nonmembers']} evaluation (members/non-members)"
    )
    atomic_write_parquet(members, smk.output.members)
    atomic_write_parquet(nonmembers, smk.output.nonmembers)
    atomic_write_parquet(candidates, smk.output.candidates)
    write_json(info, smk.output.info)


run_step(snakemake, main)  # noqa: F821
