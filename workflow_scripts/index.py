"""Rule index: embed / tokenise the members into the retriever's index (titled or untitled documents)."""

import pandas as pd

from ragmi.target.index import RetrieverSpec, build_index
from ragmi.workflow import run_step


def main(smk, log):
    spec = RetrieverSpec.from_config(smk.wildcards.retriever, dict(smk.params.retriever))
    members = pd.read_parquet(smk.input.members)
    meta = build_index(members, spec, smk.output.index, with_titles=bool(smk.params.with_titles), log=log)
    log(f"index built: {meta}")


run_step(snakemake, main)  # noqa: F821
