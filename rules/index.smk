# Retrieval index over the members, and the generator model folder.


rule index:
    input:
        members="results/split/{dataset}/members.parquet",
    output:
        index=directory("results/index/{dataset}/{retriever}"),
    params:
        retriever=lambda wc: config["retrievers"][wc.retriever],
    threads: config["generation"]["threads"]
    resources:
        mem_mb=4000,
    log:
        "logs/index/{dataset}/{retriever}.log",
    benchmark:
        "benchmarks/out/index/{dataset}/{retriever}.tsv"
    conda:
        "../envs/retrieval.yaml"
    script:
        "../workflow_scripts/index.py"


rule prepare_model:
    output:
        model=directory(f"{MODELS_DIR}/{{model}}"),
    params:
        model=lambda wc: wc.model,
    resources:
        mem_mb=4000,
    log:
        "logs/prepare_model/{model}.log",
    benchmark:
        "benchmarks/out/prepare_model/{model}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/prepare_model.py"
