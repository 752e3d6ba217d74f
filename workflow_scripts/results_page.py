"""Rule results_page: results/results.html (the page a person reads first) and results/run.json (the
run's record: every summary row, the verdicts, the provenance, the gate's verdict), from the tables and
figures the configuration builds (ragmi.report.results_page, ragmi.report.run_summary)."""

from pathlib import Path

from ragmi.report.provenance import provenance
from ragmi.report.results_page import write_page
from ragmi.report.run_summary import run_record, write_run_json
from ragmi.workflow import run_step


def main(smk, log):
    results = smk.params.results
    prov = provenance(smk.params.config, results)
    tables = {Path(p).stem: p for p in smk.input.tables}
    gate = smk.input.gate if "gate" in smk.input.keys() else None
    write_page(
        smk.output.html,
        results_dir=results,
        tables=tables,
        figures=list(smk.input.figures),
        provenance=prov,
        gate_json=gate,
    )
    record = run_record(results, prov, gate_json=gate)
    write_run_json(record, smk.output.json)
    counts = ", ".join(f"{n} {v}" for v, n in record["verdicts"]["counts"].items() if n) or "no summary rows"
    log(f"results page: {len(tables)} tables, {len(smk.input.figures)} figures; summary: {counts}")
    log(f"config sha256:{prov['config_sha256']}")


run_step(snakemake, main)  # noqa: F821
