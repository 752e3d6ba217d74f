"""Rule table: one table of ragmi.report.registry as CSV + Markdown; rules figure_<name>: a figure the
table declares, drawn from the same frame."""

from ragmi.report.registry import TABLES, draw_figure, write_table
from ragmi.workflow import run_step


def main(smk, log):
    table = TABLES[smk.params.table]
    files = {k: [v] if isinstance(v, str) else list(v) for k, v in smk.input.items()}
    if "figure" in smk.params.keys():
        df = draw_figure(table, smk.params.figure, files, smk.params.config, smk.output.png)
        log(f"{table.name}: figure {smk.params.figure} from {len(df)} rows")
    else:
        df = write_table(table, files, smk.params.config, smk.output.csv, smk.output.md)
        log(f"{table.name}: {len(df)} rows")


run_step(snakemake, main)  # noqa: F821
