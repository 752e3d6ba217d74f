"""Rule null_database: the negative control's retrieval database (no candidate document in it)."""

import pandas as pd

from ragmi.io import atomic_write_parquet
from ragmi.split import null_database
from ragmi.workflow import run_step


def main(smk, log):
    frames = {k: pd.read_parquet(getattr(smk.input, k)) for k in ("members", "nonmembers", "candidates")}
    db = null_database(
        frames["members"], frames["nonmembers"], frames["candidates"], int(smk.params.seed), name=smk.params.name
    )
    atomic_write_parquet(db, smk.output.members)
    log(f"null database: {len(db)} documents, none of the {len(frames['candidates'])} candidates")


run_step(snakemake, main)  # noqa: F821
