# Corpus -> member/non-member split.


rule corpus:
    output:
        corpus="results/corpus/{dataset}.parquet",
        stats="results/corpus/{dataset}.stats.json",
    params:
        name=lambda wc: wc.dataset,
        spec=lambda wc: config["datasets"][wc.dataset],
        contexts=lambda wc: dataset_contexts(config, wc.dataset),
        seed=SEED,
    priority: 1
    log:
        "logs/corpus/{dataset}.log",
    benchmark:
        "results/benchmarks/corpus/{dataset}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/corpus.py"


rule split:
    input:
        corpus="results/corpus/{dataset}.parquet",
    output:
        members="results/split/{dataset}/members.parquet",
        nonmembers="results/split/{dataset}/nonmembers.parquet",
        candidates="results/split/{dataset}/candidates.parquet",
        info="results/split/{dataset}/split.json",
    wildcard_constraints:
        dataset=dataset_pattern(candidates=False),
    params:
        name=lambda wc: wc.dataset,
        member_fraction=config["split"]["member_fraction"],
        n_reference=config["split"]["n_reference"],
        n_eval=config["split"]["n_eval"],
        allow_shrink=config["split"]["allow_shrink"],
        min_reference=lambda wc: min_reference(config, wc.dataset),
        seed=SEED,
    priority: 1
    log:
        "logs/split/{dataset}.log",
    benchmark:
        "results/benchmarks/split/{dataset}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/split.py"


# A dataset of source 'candidates' (the user's labelled documents, for a remote target) is split by
# its labels: no corpus is loaded and no member/non-member draw is made.
rule split_candidates:
    input:
        candidates=lambda wc: config["datasets"][wc.dataset]["path"],
    output:
        members="results/split/{dataset}/members.parquet",
        nonmembers="results/split/{dataset}/nonmembers.parquet",
        candidates="results/split/{dataset}/candidates.parquet",
        info="results/split/{dataset}/split.json",
    wildcard_constraints:
        dataset=dataset_pattern(candidates=True),
    params:
        name=lambda wc: wc.dataset,
        spec=lambda wc: config["datasets"][wc.dataset],
        n_reference=config["split"]["n_reference"],
        n_eval=config["split"]["n_eval"],
        allow_shrink=config["split"]["allow_shrink"],
        min_reference=lambda wc: min_reference(config, wc.dataset),
        seed=SEED,
    priority: 1
    log:
        "logs/split/{dataset}.log",
    benchmark:
        "results/benchmarks/split/{dataset}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/split_candidates.py"


rule null_database:
    input:
        members="results/split/{dataset}/members.parquet",
        nonmembers="results/split/{dataset}/nonmembers.parquet",
        candidates="results/split/{dataset}/candidates.parquet",
    output:
        members="results/split/{dataset}/null_members.parquet",
    params:
        name=lambda wc: wc.dataset,
        seed=SEED,
    priority: 1
    log:
        "logs/split/{dataset}.null.log",
    benchmark:
        "results/benchmarks/split/{dataset}.null.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/null_database.py"
