# The sensitivity Δ of every DP retrieval defense of an attacked target, measured on the target's own
# retriever (ragmi.epsilon_sensitivity): how far the noised scores move when one document is removed
# from the database or one outside document added. Read by table epsilon_audit (ragmi.report.registry).


rule epsilon_sensitivity:
    input:
        index=lambda wc: index_dir(wc.dataset, wc.target),
        queries=lambda wc: [f"results/queries/{wc.dataset}/{a}.parquet" for a in target_attacks(config, wc.target)],
        nonmembers="results/split/{dataset}/nonmembers.parquet",
    output:
        sensitivity="results/epsilon/{dataset}/{target}.parquet",
    params:
        retriever=lambda wc: config["retrievers"][config["targets"][wc.target]["retriever"]],
        k=lambda wc: config["targets"][wc.target]["k"],
        with_titles=lambda wc: config["targets"][wc.target]["with_titles"],
        defenses=lambda wc: {n: config["defenses"][n] for n in config["targets"][wc.target]["defenses"]},
        embedding_cache_dir=config["generation"]["embedding_cache_dir"],
        max_queries=config["audit"]["epsilon_sensitivity_queries"],
        max_added=config["audit"]["epsilon_sensitivity_added"],
    threads: 1
    resources:
        mem_mb=4000,
    log:
        "logs/epsilon/{dataset}/{target}.log",
    benchmark:
        "results/benchmarks/epsilon/{dataset}/{target}.tsv"
    conda:
        "../envs/retrieval.yaml"
    script:
        "../workflow_scripts/epsilon_sensitivity.py"
