"""Rule analysis: the computation of a table that declares one (ragmi.analysis), as parquet; rule table
and the figure rules format it."""

from ragmi.report.registry import TABLES, run_analysis
from ragmi.workflow import run_step


def main(smk, log):
    table = TABLES[smk.params.table]
    files = {k: [v] if isinstance(v, str) else list(v) for k, v in smk.input.items()}
    df = run_analysis(table, files, smk.params.config, smk.output.parquet)
    log(f"{table.name}: {len(df)} rows computed")


run_step(snakemake, main)  # noqa: F821
