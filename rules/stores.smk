# The membership game in a target's own vector store (targets.<t>.store; docs/vector-stores.md):
# store_insert puts the split's members (and, for a canary target of the audit, one seed's canary
# documents) into the collection (manifest first), every generate job of the target, its campaigns and
# its canaries job wait for it, store_cleanup removes exactly what was inserted once every query is
# answered, and every score job of the target waits for that. The Snakefile's onerror handler (and
# `python -m ragmi store-cleanup` after a SIGKILL) removes a game a failed run left behind.
from types import SimpleNamespace as Namespace

from ragmi.audit.plan import canary_dataset, store_canary_seed
from ragmi.plan import campaign_runs, store_target_of

STORES = sorted(config["stores"])


wildcard_constraints:
    store="|".join(map(re.escape, STORES)) or "(?!)",


def store_dir(target):
    return f"results/stores/{store_target_of(config, target)}/{target}"


def store_insert_files(wc):
    """generate's extra input: the insert marker of a target with a store (none otherwise)."""
    if store_target_of(config, wc.target) is None:
        return {}
    return {"store_inserted": f"{store_dir(wc.target)}/inserted.json"}


def store_cleanup_files(wc):
    """score's extra input: the cleanup record of a target with a store (none otherwise)."""
    if store_target_of(config, wc.target) is None:
        return {}
    return {"store_cleanup": f"{store_dir(wc.target)}/cleanup.json"}


def store_canary_files(target):
    """The canary dataset's corpus, and the split's members and candidates the canaries must not be
    built from when it is the target's dataset (ragmi.audit.canary_run.canary_exclude): inputs of
    store_insert and of the target's canaries job; none when the game plants no canaries."""
    if store_canary_seed(config, target) is None:
        return {}
    dataset = config["targets"][target]["datasets"][0]
    files = {"canary_corpus": f"results/corpus/{canary_dataset(config)}.parquet"}
    if canary_dataset(config) == dataset:
        files["canary_exclude"] = [f"results/split/{dataset}/{c}.parquet" for c in ("members", "candidates")]
    return files


def store_insert_inputs(wc):
    dataset = config["targets"][wc.target]["datasets"][0]
    return {"members": f"results/split/{dataset}/members.parquet", **store_canary_files(wc.target)}


def store_cleanup_inputs(wc):
    """The insert marker, every response shard of the target, and its canary results: the store is
    cleaned up once every query of the game is answered."""
    files = {"marker": f"results/stores/{wc.store}/{wc.target}/inserted.json", "responses": store_responses(wc)}
    campaigns = [f"results/campaigns/{d}/{t}/{a}/seed{s}.parquet" for d, t, a, s in campaign_runs(config) if t == wc.target]
    if campaigns:  # the adaptive campaigns on the target (rules/campaigns.smk) answered too
        files["campaigns"] = campaigns
    seed = store_canary_seed(config, wc.target)
    if seed is not None:
        files["canaries"] = f"results/audit/canaries/{wc.target}/{seed}.json"
    return files


def store_responses(wc):
    """Every response shard of the target: the store is cleaned up once all of them exist."""
    dataset = config["targets"][wc.target]["datasets"][0]
    out = []
    for attack in target_attacks(config, wc.target):
        out += response_shards(Namespace(dataset=dataset, target=wc.target, attack=attack))
    return out


rule store_insert:
    input:
        unpack(store_insert_inputs),
    output:
        marker=temp("results/stores/{store}/{target}/inserted.json"),
    params:
        store=lambda wc: wc.store,
        spec=lambda wc: config["stores"][wc.store],
        target=lambda wc: wc.target,
        dataset=lambda wc: config["targets"][wc.target]["datasets"][0],
        manifest="results/stores/{store}/{target}/manifest.json",
        seed=SEED,
        canary_seed=lambda wc: store_canary_seed(config, wc.target),
        canary_max_tokens=config["audit"]["canary_max_tokens"],
    priority: 1
    log:
        "logs/stores/{store}/{target}.insert.log",
    benchmark:
        "results/benchmarks/stores/{store}/{target}.insert.tsv"
    conda:
        "../envs/stores.yaml"
    script:
        "../workflow_scripts/store_insert.py"


rule store_cleanup:
    input:
        unpack(store_cleanup_inputs),
    output:
        record="results/stores/{store}/{target}/cleanup.json",
    params:
        store=lambda wc: wc.store,
        spec=lambda wc: config["stores"][wc.store],
        manifest="results/stores/{store}/{target}/manifest.json",
    priority: 1
    log:
        "logs/stores/{store}/{target}.cleanup.log",
    benchmark:
        "results/benchmarks/stores/{store}/{target}.cleanup.tsv"
    conda:
        "../envs/stores.yaml"
    script:
        "../workflow_scripts/store_cleanup.py"


# On a cluster both run inside the Snakemake process, where the service's store is reachable (the
# submit host); neither needs a GPU. With --sdm conda they use envs/stores.yaml; otherwise the
# environment of Snakemake, which holds the store clients (requirements/stores.txt).
localrules:
    store_insert,
    store_cleanup,
