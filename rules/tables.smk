# Tables and figures, registered in the Snakemake report. The tables, their inputs and the figures drawn
# from them are declared in ragmi.report.registry (TABLES); these rules only wire them up.


# A table that computes (Table.analysis: tests, trials, resampling) runs its analysis here first
# (ragmi.analysis); rule table and its figure rules then read only this parquet.
rule analysis:
    input:
        unpack(lambda wc: analysis_input_files(wc.table, config)),
    output:
        parquet="results/analysis/{table}.parquet",
    params:
        table=lambda wc: wc.table,
        config=lambda wc: table_config(wc.table, config),
    wildcard_constraints:
        table="|".join(map(re.escape, analyses())),
    log:
        "logs/analysis/{table}.log",
    benchmark:
        "results/benchmarks/analysis/{table}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/analysis.py"


rule table:
    input:
        unpack(lambda wc: input_files(wc.table, config)),
    output:
        csv=report("results/tables/{table}.csv", caption="../report/tables.rst", category="Tables"),
        md=report("results/tables/{table}.md", caption="../report/tables.rst", category="Tables"),
    params:
        table=lambda wc: wc.table,
        # only the keys the table reads (TABLES[...].config_keys): another key's change reruns no table
        config=lambda wc: table_config(wc.table, config),
    log:
        "logs/tables/{table}.log",
    benchmark:
        "results/benchmarks/tables/{table}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/table.py"


# One rule per figure a table declares (a rule's outputs cannot vary with a wildcard).
for _table in TABLES.values():
    for _figure in _table.figures:

        rule:
            name:
                f"figure_{_figure.name}"
            input:
                unpack(lambda wc, name=_table.name: input_files(name, config)),
            output:
                png=report(_figure.path, caption=f"../{_figure.caption}", category="Figures"),
            params:
                table=_table.name,
                figure=_figure.name,
                config=lambda wc, name=_table.name: table_config(name, config),
            log:
                f"logs/figures/{_figure.name}.log",
            benchmark:
                f"results/benchmarks/figures/{_figure.name}.tsv"
            conda:
                "../envs/light.yaml"
            script:
                "../workflow_scripts/table.py"


rule attack_figures:
    input:
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
        candidates="results/split/{dataset}/candidates.parquet",
    output:
        roc=report(
            "results/figures/{attack}/{dataset}__{target}_roc.png",
            caption="../report/roc.rst",
            category="Figures",
            subcategory="{attack}",
        ),
        scores=report(
            "results/figures/{attack}/{dataset}__{target}_scores.png",
            caption="../report/scores.rst",
            category="Figures",
            subcategory="{attack}",
        ),
    log:
        "logs/figures/{attack}/{dataset}__{target}.log",
    benchmark:
        "results/benchmarks/figures/{attack}/{dataset}__{target}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/figures.py"


rule roc_all_attacks:
    input:
        scores=lambda wc: [f"results/scores/{wc.dataset}/{wc.target}/{a}.parquet" for a in target_attacks(config, wc.target)],
        candidates="results/split/{dataset}/candidates.parquet",
    output:
        roc=report(
            "results/figures/roc/{dataset}__{target}.png",
            caption="../report/roc.rst",
            category="Figures",
            subcategory="all attacks",
        ),
    log:
        "logs/figures/roc/{dataset}__{target}.log",
    benchmark:
        "results/benchmarks/figures/roc/{dataset}__{target}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/roc_all.py"
