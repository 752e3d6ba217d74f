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
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        mem_mb=4000,
    log:
        "logs/index/{dataset}/{titles}/{retriever}.log",
    benchmark:
        "results/benchmarks/index/{dataset}/{titles}/{retriever}.tsv"
    conda:
        "../envs/retrieval.yaml"
    script:
        "../workflow_scripts/index.py"


use rule index as index_null with:
    input:
        members="results/split/{dataset}/null_members.parquet",
        reuse="results/index/{dataset}/{titles}/{retriever}",
    output:
        index=directory("results/index_null/{dataset}/{titles}/{retriever}"),
    log:
        "logs/index/{dataset}/{titles}/{retriever}.null.log",
    benchmark:
        "results/benchmarks/index/{dataset}/{titles}/{retriever}.null.tsv"


# Also starts the shared vLLM server of the model (when generation.start_server_early, on a local run) and
# waits until it is ready. It then declares no threads: the corpus, split and index jobs run beside the
# server's start-up (mostly one core importing vLLM), and the model jobs after it find the server ready.
rule prepare_model:
    output:
        model=directory(f"{MODELS_DIR}/{{model}}"),
    params:
        model=lambda wc: wc.model,
        servers=lambda wc: early_servers(wc.model),
        server_threads=model_job_threads(),
    threads: lambda wc: 0 if early_servers(wc.model) else 1
    resources:
        mem_mb=4000,
    priority: 3
    log:
        "logs/prepare_model/{model}.log",
    benchmark:
        "results/benchmarks/prepare_model/{model}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/prepare_model.py"
