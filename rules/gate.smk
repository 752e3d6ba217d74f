# The release gate (docs/gate.md): gate.limits checked on the tables, results/gate/{gate.json,junit.xml,
# gate.sarif}. The rule writes the verdict and succeeds on a breach, so the tables are still built;
# `python -m ragmi gate` turns the verdict into the exit code a deploy pipeline reads.


rule gate:
    input:
        tables=gate_tables(),
    output:
        json="results/gate/gate.json",
        junit="results/gate/junit.xml",
        sarif="results/gate/gate.sarif",
    params:
        gate=config["gate"],
        tables_dir="results/tables",
        built=built_tables(config),
    log:
        "logs/gate.log",
    benchmark:
        "results/benchmarks/gate.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/gate.py"
