# Adaptive campaigns that copy a knowledge base (docs/campaigns.md): one job per (dataset, target, attack,
# seed) runs the attack's query loop against the target, checkpointed after every round; then the
# evaluator's coverage curves of each campaign (the coverage table and figure: rules/tables.smk).
CAMPAIGN_ATTACKS = sorted(config["campaigns"]["attacks"])


def campaign_inputs(wc):
    # a service over a vector store answers once ragmi's members are in it (rules/stores.smk)
    files = {**target_files(wc), **store_insert_files(wc)}
    # a target that sends another's requests (an output-only defense) runs its campaign after that one's,
    # so that every request they share is answered from the response cache
    same = same_requests_as(config, wc.target)
    if same in config["campaigns"]["targets"]:
        files["same_requests"] = f"results/campaigns/{wc.dataset}/{same}/{wc.adaptive}/seed{wc.seed}.parquet"
    if adaptive_class(wc.adaptive).uses_llm:
        files.update({f"attacker_{k}": v for k, v in model_input(attacker_cfg()).items()})
    return files


def retriever_embedder(wc):
    r = config["retrievers"].get(target_cfg(wc).get("retriever"))
    return (r or {}).get("embedder", "")


def knowledge_base(wc):
    """The documents coverage is a share of: the target's indexed members (ragmi's RAG), else the
    dataset's members (those ragmi put in a service's store, or a candidates file's labelled members)."""
    return target_files(wc).get("members", f"results/split/{wc.dataset}/members.parquet")


def retrieval_known(wc):
    """Whether the answers name what was retrieved: ragmi's RAG, or a service that reports its sources."""
    kind = target_kind(target_cfg(wc))
    return kind.reads_split(target_cfg(wc)) or kind.reports_sources(target_cfg(wc))


rule campaign:
    input:
        unpack(campaign_inputs),
    wildcard_constraints:
        adaptive="|".join(map(re.escape, CAMPAIGN_ATTACKS)) or "^$",
        seed=r"\d+",
    output:
        rows="results/campaigns/{dataset}/{target}/{adaptive}/seed{seed}.parquet",
    params:
        spec=target_spec_params,
        attack=lambda wc: config["campaigns"]["attacks"][wc.adaptive],
        campaign=lambda wc: {k: config["campaigns"][k] for k in ("budget", "batch", "max_tokens")},
        retriever_embedder=retriever_embedder,
        attacker=lambda wc: attacker_cfg(),
        attacker_log=server_log(config["attacker"]["generator"]),
        cache_dir=config["generation"]["cache_dir"],
    priority: 1
    threads: config["generation"]["threads"]
    resources:
        gpu=lambda wc: local_backend(generator_cfg(wc)),
        mem_mb=8000,
        runtime=240,
    log:
        "logs/campaigns/{dataset}/{target}/{adaptive}/seed{seed}.log",
    benchmark:
        "results/benchmarks/campaigns/{dataset}/{target}/{adaptive}/seed{seed}.tsv"
    conda:
        "../envs/generation-gpu.yaml"
    script:
        "../workflow_scripts/campaign.py"


def coverage_inputs(wc):
    """The campaign, the knowledge base, the non-members (chance), and where a store's game plants the
    audit's canaries with the members, what rebuilds them (rules/stores.smk)."""
    return {
        "rows": f"results/campaigns/{wc.dataset}/{wc.target}/{wc.adaptive}/seed{wc.seed}.parquet",
        "members": knowledge_base(wc),
        "nonmembers": f"results/split/{wc.dataset}/nonmembers.parquet",
        **store_canary_files(wc.target),
    }


rule campaign_coverage:
    input:
        unpack(coverage_inputs),
    wildcard_constraints:
        adaptive="|".join(map(re.escape, CAMPAIGN_ATTACKS)) or "^$",
        seed=r"\d+",
    output:
        curves="results/coverage/{dataset}/{target}/{adaptive}/seed{seed}.parquet",
    params:
        thresholds=lambda wc: {k: config["campaigns"][k] for k in ("semantic_threshold", "rouge_threshold", "embedder")},
        attack=lambda wc: config["campaigns"]["attacks"][wc.adaptive],
        retriever_embedder=retriever_embedder,
        k=lambda wc: target_cfg(wc).get("k") or 0,
        retrieval_known=retrieval_known,
        canary_seed=lambda wc: store_canary_seed(config, wc.target),
        canary_max_tokens=config["audit"]["canary_max_tokens"],
    log:
        "logs/coverage/{dataset}/{target}/{adaptive}/seed{seed}.log",
    benchmark:
        "results/benchmarks/coverage/{dataset}/{target}/{adaptive}/seed{seed}.tsv"
    conda:
        "../envs/light.yaml"
    script:
        "../workflow_scripts/campaign_coverage.py"
