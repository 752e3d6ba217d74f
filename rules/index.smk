# Retrieval index over the members (documents with their titles, or the texts alone: the target's
# with_titles, see index_dir in common.smk), and the generator model folder.


rule index:
    input:
        members="results/split/{dataset}/members.parquet",
    output:
        index=directory("results/index/{dataset}/{titles}/{retriever}"),
    params:
        retriever=lambda wc: config["retrievers"][wc.retriever],
        with_titles=lambda wc: wc.titles == "titled",
    threads: config["generation"]["threads"]
    resources:
        mem_mb=4000,
    log:
        "logs/index/{dataset}/{titles}/{retriever}.log",
    benchmark:
        "benchmarks/out/index/{dataset}/{titles}/{retriever}.tsv"
    conda:
        "../envs/retrieval.yaml"
    script:
        "../workflow_scripts/index.py"


use rule index as index_null with:
    input:
        members="results/split/{dataset}/null_members.parquet",
    output:
        index=directory("results/index_null/{dataset}/{titles}/{retriever}"),
    log:
        "logs/index/{dataset}/{titles}/{retriever}.null.log",
    benchmark:
        "benchmarks/out/index/{dataset}/{titles}/{retriever}.null.tsv"


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
