"""Rule gate: gate.limits evaluated on the run's tables (ragmi.gate); a breach is written, not raised."""

from pathlib import Path

from ragmi.gate.evaluation import evaluate
from ragmi.gate.writers import summary_lines, write_outputs
from ragmi.workflow import run_step


def main(smk, log):
    gate = smk.params.gate
    result = evaluate(
        gate["limits"],
        smk.params.tables_dir,
        gate["fail_on_no_evidence"],
        smk.params.built,
        fail_on_undecided=gate["fail_on_undecided"],
    )
    write_outputs(result, Path(smk.output.json).parent)
    for line in summary_lines(result):
        log(line)


run_step(snakemake, main)  # noqa: F821
