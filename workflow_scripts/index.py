"""Rules index and index_null: embed / tokenise the members into the retriever's index (titled or untitled
documents); index_null reuses the vectors of the target's index for the documents both hold."""

import pandas as pd

from ragmi.rag.index import RetrieverSpec, build_index
from ragmi.workflow import run_step


def main(smk, log):
    spec = RetrieverSpec.from_validated(dict(smk.params.retriever))
    members = pd.read_parquet(smk.input.members)
    # index_null: the target's index, whose vectors it shares
    reuse = smk.input.reuse if "reuse" in smk.input.keys() else None
    meta = build_index(
        members, spec, smk.output.index, with_titles=bool(smk.params.with_titles), reuse_from=reuse, log=log
    )
    log(f"index built: {meta}")


run_step(snakemake, main)  # noqa: F821
