# Offline query generation (checkpoint: the number of shards is known once queries exist), then the
# target RAG system answers each shard in its own job (one GPU job per shard on a cluster).


rule prepare:
    input:
        unpack(prepare_inputs),
    output:
        materials="results/materials/{dataset}/{attack}.parquet",
    params:
        attack=lambda wc: config["attacks"][wc.attack],
        generator=attacker_cfg(),
        temperature=config["attacker"]["temperature"],
        cache_dir=config["generation"]["cache_dir"],
        server_log=server_log(config["attacker"]["generator"]),
        seed=SEED,
    priority: 2
    threads: config["generation"]["threads"]
    resources:
        gpu=local_backend(attacker_cfg()),
        mem_mb=8000,
        runtime=240,
    log:
        "logs/prepare/{dataset}/{attack}.log",
    benchmark:
        "results/benchmarks/prepare/{dataset}/{attack}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/prepare.py"


checkpoint queries:
    input:
        unpack(queries_inputs),
    output:
        queries="results/queries/{dataset}/{attack}.parquet",
        shards=directory("results/queries/{dataset}/{attack}.shards"),
    params:
        attack=lambda wc: config["attacks"][wc.attack],
        shard_size=config["generation"]["shard_size"],
        seed=SEED,
    priority: 2
    log:
        "logs/queries/{dataset}/{attack}.log",
    benchmark:
        "results/benchmarks/queries/{dataset}/{attack}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/queries.py"


rule generate:
    input:
        unpack(generate_inputs),
    # an attack's queries, or the benign questions of the utility measures (rules/utility.smk)
    wildcard_constraints:
        attack="|".join(map(re.escape, [*ATTACKS, QUERY_SET])),
    output:
        responses="results/responses/{dataset}/{target}/{attack}/{shard}.parquet",
    params:
        spec=target_spec_params,
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        gpu=lambda wc: local_backend(generator_cfg(wc)),
        mem_mb=8000,
        runtime=240,
    log:
        "logs/generate/{dataset}/{target}/{attack}/{shard}.log",
    benchmark:
        "results/benchmarks/generate/{dataset}/{target}/{attack}/{shard}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/generate.py"
