# Tables and figures, registered in the Snakemake report.


def metrics_files(attacks):
    return expand(
        "results/metrics/{dataset}/{target}/{attack}.csv",
        dataset=DATASETS,
        target=TARGETS,
        attack=[a for a in ATTACKS if a in attacks],
    )


rule rag_mia_table:
    input:
        metrics=metrics_files(["rag_mia"]),
        published=PUBLISHED,
    output:
        csv=report("results/tables/rag_mia.csv", caption="../report/tables.rst", category="Tables"),
        md=report("results/tables/rag_mia.md", caption="../report/tables.rst", category="Tables"),
    params:
        kind="rag_mia",
    log:
        "logs/tables/rag_mia.log",
    benchmark:
        "benchmarks/out/tables/rag_mia.tsv"
    script:
        "../workflow_scripts/table.py"


rule attack_comparison_table:
    input:
        metrics=metrics_files(ATTACKS),
        published=PUBLISHED,
    output:
        csv=report("results/tables/attack_comparison.csv", caption="../report/tables.rst", category="Tables"),
        md=report("results/tables/attack_comparison.md", caption="../report/tables.rst", category="Tables"),
    params:
        kind="attack_comparison",
    log:
        "logs/tables/attack_comparison.log",
    benchmark:
        "benchmarks/out/tables/attack_comparison.tsv"
    script:
        "../workflow_scripts/table.py"


rule dcmi_ablation_table:
    input:
        metrics=metrics_files(["dcmi"]),
    output:
        csv=report("results/tables/dcmi_ablation.csv", caption="../report/tables.rst", category="Tables"),
        md=report("results/tables/dcmi_ablation.md", caption="../report/tables.rst", category="Tables"),
    params:
        kind="dcmi_ablation",
    log:
        "logs/tables/dcmi_ablation.log",
    benchmark:
        "benchmarks/out/tables/dcmi_ablation.tsv"
    script:
        "../workflow_scripts/table.py"


rule query_budget_table:
    input:
        metrics=metrics_files(["ia", "menta"]),
    output:
        csv=report("results/tables/query_budget.csv", caption="../report/tables.rst", category="Tables"),
        md=report("results/tables/query_budget.md", caption="../report/tables.rst", category="Tables"),
        png=report("results/figures/query_budget.png", caption="../report/budget.rst", category="Figures"),
    params:
        kind="query_budget",
    log:
        "logs/tables/query_budget.log",
    benchmark:
        "benchmarks/out/tables/query_budget.tsv"
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


rule roc_all_attacks:
    input:
        scores=expand("results/scores/{{dataset}}/{{target}}/{attack}.parquet", attack=ATTACKS),
        targets="results/split/{dataset}/targets.parquet",
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
        "benchmarks/out/figures/roc/{dataset}__{target}.tsv"
    script:
        "../workflow_scripts/roc_all.py"
