# Tables and figures, registered in the Snakemake report.


rule rag_mia_table:
    input:
        metrics=expand(
            "results/metrics/{dataset}/{target}/rag_mia.csv", dataset=DATASETS, target=TARGETS
        ),
    output:
        csv=report(
            "results/tables/rag_mia.csv", caption="../report/rag_mia_table.rst", category="Tables"
        ),
        md=report(
            "results/tables/rag_mia.md", caption="../report/rag_mia_table.rst", category="Tables"
        ),
    log:
        "logs/tables/rag_mia.log",
    benchmark:
        "benchmarks/out/tables/rag_mia.tsv"
    script:
        "../workflow_scripts/table.py"


rule attack_figures:
    input:
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
        targets="results/split/{dataset}/targets.parquet",
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
        "benchmarks/out/figures/{attack}/{dataset}__{target}.tsv"
    script:
        "../workflow_scripts/figures.py"
