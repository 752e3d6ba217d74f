# Scoring (attack side) and metrics (evaluation side).


rule score:
    input:
        unpack(score_inputs),
    output:
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
    params:
        attack=lambda wc: config["attacks"][wc.attack],
        seed=SEED,
        logprobs=target_returns_logprobs,
    # one thread: scoring is mostly pandas and small models, so two score/metrics jobs share the cores
    threads: 1
    log:
        "logs/score/{dataset}/{target}/{attack}.log",
    benchmark:
        "results/benchmarks/score/{dataset}/{target}/{attack}.tsv"
    conda:
        "../envs/retrieval.yaml"
    script:
        "../workflow_scripts/score.py"


rule metrics:
    input:
        unpack(score_inputs),
        scores="results/scores/{dataset}/{target}/{attack}.parquet",
    output:
        metrics="results/metrics/{dataset}/{target}/{attack}.csv",
        retrieval="results/metrics/{dataset}/{target}/{attack}.retrieval.parquet",
    params:
        fprs=config["metrics"]["fprs"],
        dataset_source=lambda wc: config["datasets"][wc.dataset]["source"],
        generator_model=target_model,
        n_boot=config["metrics"]["n_boot"],
    log:
        "logs/metrics/{dataset}/{target}/{attack}.log",
    benchmark:
        "results/benchmarks/metrics/{dataset}/{target}/{attack}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/metrics.py"
