# Scoring (attack side) and metrics (evaluation side).


rule score:
    input:
        queries="results/queries/{dataset}/{attack}.parquet",
        responses=response_shards,
        targets="results/split/{dataset}/targets.parquet",
    output:
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
    params:
        attack=lambda wc: config["attacks"][wc.attack],
        seed=SEED,
    log:
        "logs/score/{dataset}/{target}/{attack}.log",
    benchmark:
        "benchmarks/out/score/{dataset}/{target}/{attack}.tsv"
    script:
        "../workflow_scripts/score.py"


rule metrics:
    input:
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
        queries="results/queries/{dataset}/{attack}.parquet",
        responses=response_shards,
        targets="results/split/{dataset}/targets.parquet",
    output:
        metrics="results/metrics/{dataset}/{target}/{attack}.csv",
    params:
        fprs=config["metrics"]["fprs"],
        n_boot=config["metrics"]["n_boot"],
        seed=SEED,
    log:
        "logs/metrics/{dataset}/{target}/{attack}.log",
    benchmark:
        "benchmarks/out/metrics/{dataset}/{target}/{attack}.tsv"
    script:
        "../workflow_scripts/metrics.py"
