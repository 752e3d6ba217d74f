# The active-path audit of the defended targets (Mind the Hook): hook inventory, generated-text
# leakage of the attacks that extract documents, and the out-of-vocabulary e-mail canaries. The tables are in
# ragmi.report.registry; the file lists come from ragmi.audit.plan.


def responses_of(dataset, target, attack):
    ck = checkpoints.queries.get(dataset=dataset, attack=attack)
    shards = glob_wildcards(os.path.join(ck.output.shards, "{shard}.parquet")).shard
    return [f"results/responses/{dataset}/{target}/{attack}/{s}.parquet" for s in sorted(shards)]


def inventory_inputs(wc):
    files = target_files(wc)
    files["responses"] = [f for a in target_attacks(config, wc.target) for f in responses_of(wc.dataset, wc.target, a)]
    # CA-DP's T (queries per candidate) for the probes
    files["queries"] = [f"results/queries/{wc.dataset}/{a}.parquet" for a in target_attacks(config, wc.target)]
    return files


rule hook_inventory:
    input:
        unpack(inventory_inputs),
    output:
        hooks="results/audit/{dataset}/{target}/hooks.csv",
        defenses="results/audit/{dataset}/{target}/defenses.json",
    params:
        spec=target_spec_params,
        fail_on_inactive=config["audit"]["fail_on_inactive_hook"],
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        gpu=lambda wc: local_backend(generator_cfg(wc)),
        mem_mb=8000,
    log:
        "logs/audit/hooks/{dataset}/{target}.log",
    benchmark:
        "results/benchmarks/audit/hooks/{dataset}/{target}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/hook_inventory.py"


rule leakage:
    input:
        queries="results/queries/{dataset}/{attack}.parquet",
        responses=lambda wc: responses_of(wc.dataset, wc.target, wc.attack),
        members="results/split/{dataset}/members.parquet",
    output:
        leakage="results/audit/{dataset}/{target}/leakage/{attack}.csv",
    log:
        "logs/audit/leakage/{dataset}/{target}/{attack}.log",
    benchmark:
        "results/benchmarks/audit/leakage/{dataset}/{target}/{attack}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/leakage.py"


def canary_inputs(wc):
    if store_target_of(config, wc.target):  # the service answers while its store holds the canaries
        files = store_canary_files(wc.target)  # rules/stores.smk: the same files as the insert's
        files["corpus"] = files.pop("canary_corpus")
        files.update(store_insert_files(wc))
        return files
    files = {"corpus": f"results/corpus/{canary_dataset(config)}.parquet", **model_files(wc.target)}
    # a target that sends another's requests (an output-only defense) asks its canaries after it, from the cache
    same = same_requests_as(config, wc.target)
    if same and same in canary_targets(config) and int(wc.seed) in canary_seeds(config, same):
        files["same_requests"] = f"results/audit/canaries/{same}/{wc.seed}.json"
    return files


rule canaries:
    input:
        unpack(canary_inputs),
    output:
        result="results/audit/canaries/{target}/{seed}.json",
    params:
        spec=target_spec_params,
        max_tokens=config["audit"]["canary_max_tokens"],
        workdir="results/audit/canaries/.work",
    wildcard_constraints:
        seed=r"\d+",
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        gpu=lambda wc: local_backend(generator_cfg(wc)),
        mem_mb=8000,
    log:
        "logs/audit/canaries/{target}/{seed}.log",
    benchmark:
        "results/benchmarks/audit/canaries/{target}/{seed}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/canaries.py"


# Detection metrics of the query-level detectors (MEntA Tables 7-8): every local target with Mirabel or
# the LLM detector that runs attacks answers the dataset's benign queries, and the detectors' verdicts
# on them and on its attack queries are collected (ragmi.audit.detection; files: detection_files).
localrules:
    benign_queries,


rule benign_queries:
    input:
        corpus="results/corpus/{dataset}.parquet",
    output:
        queries="results/audit/{dataset}/benign_queries.parquet",
    params:
        n=config["audit"]["detection_benign_queries"],
        seed=SEED,
    log:
        "logs/audit/benign_queries/{dataset}.log",
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/detection.py"


def detection_inputs(wc):
    files = target_files(wc)
    attacks = target_attacks(config, wc.target)
    files["benign"] = f"results/audit/{wc.dataset}/benign_queries.parquet"
    files["split_members"] = f"results/split/{wc.dataset}/members.parquet"
    files["queries"] = [f"results/queries/{wc.dataset}/{a}.parquet" for a in attacks]
    files["responses"] = [f for a in attacks for f in responses_of(wc.dataset, wc.target, a)]
    return files


rule detection:
    input:
        unpack(detection_inputs),
    output:
        flags="results/audit/{dataset}/{target}/detection.parquet",
    params:
        spec=target_spec_params,
        attacks=lambda wc: target_attacks(config, wc.target),
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        gpu=lambda wc: local_backend(generator_cfg(wc)),
        mem_mb=8000,
    log:
        "logs/audit/detection/{dataset}/{target}.log",
    benchmark:
        "results/benchmarks/audit/detection/{dataset}/{target}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/detection.py"
