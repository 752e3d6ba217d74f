# The results page and the run's record (docs/tables.md#the-results-page-and-runjson): results/results.html,
# one self-contained HTML file (registered in the report under "Results", shown inline there), and
# results/run.json, built from every other output of the run (final_outputs(page=False)), so last of all.


def results_page_inputs(wc):
    """The CSVs of the tables the configuration builds, the figures it draws and, with gate.enabled, the
    gate's verdict: every other default output, as the page reads them."""
    outs = final_outputs(page=False)
    files = {
        "tables": [p[: -len(".md")] + ".csv" for p in outs if p.startswith("results/tables/") and p.endswith(".md")],
        "figures": [p for p in outs if p.endswith(".png")],
    }
    if config["gate"]["enabled"]:
        files["gate"] = "results/gate/gate.json"
    return files


rule results_page:
    input:
        unpack(results_page_inputs),
    output:
        html=report("results/results.html", caption="../report/results.rst", category="Results"),
        json="results/run.json",
    params:
        results="results",
        # the whole validated config: its SHA-256 is the page's config digest (ragmi.report.provenance)
        config=config,
    log:
        "logs/results_page.log",
    benchmark:
        "results/benchmarks/results_page.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/results_page.py"


# a second of work on files the run already wrote: inside the Snakemake process on a cluster
workflow.localrules("results_page")
