# Config validation and the small helpers the rules share.
import os
import re
import time

import yaml
import sys

from ragmi.attacks import needs_prepare
from ragmi.attacks.adaptive import adaptive_class
from ragmi.audit.plan import canary_dataset, canary_seeds, canary_targets
from ragmi.config import validate_config
from ragmi.plan import control_base, dataset_contexts, is_plain, min_reference, runs, same_requests_as, target_attacks, target_datasets, target_needs_defender
from ragmi.errors import ConfigError
from ragmi.gate.cli import built_tables
from ragmi.gate.writers import GATE_FILES
from ragmi.report.registry import TABLES, analyses, analysis_input_files, input_files, table_config
from ragmi.report.registry import outputs as table_outputs
from ragmi.rag.factory import needs_model_dir
from ragmi.targets import own_pipeline, target_kind
from ragmi.utility.plan import QUERY_SET

from snakemake.utils import update_config

# The embedded default applies only when no --configfile is given (Snakemake would otherwise merge
# the default's datasets/targets into the user's config). --config KEY=VALUE overrides still apply.
if not workflow.configfiles:
    _overrides = dict(config)
    config.clear()
    config.update(yaml.safe_load(open(os.path.join(workflow.basedir, "config", "config.yaml"))))
    update_config(config, _overrides)

try:
    config = validate_config(config)
except ConfigError as e:
    sys.stderr.write(f"\nragmi: {e}\n\n")
    raise SystemExit(1)

# One id per snakemake invocation, inherited by its jobs: a remote target's request budget
# (targets.<t>.remote.max_requests) is counted per run (ragmi.rag.remote.RequestBudget).
os.environ.setdefault("RAGMI_RUN_ID", f"{int(time.time())}-{os.getpid()}")

SEED = config["seed"]
DATASETS = sorted(config["datasets"])
TARGETS = sorted(config["targets"])
ATTACKS = sorted(config["attacks"])


wildcard_constraints:
    dataset="|".join(map(re.escape, DATASETS)),
    target="|".join(map(re.escape, TARGETS)),
    attack="|".join(map(re.escape, ATTACKS)),
    table="|".join(map(re.escape, TABLES)),
    retriever="[A-Za-z0-9][A-Za-z0-9_.-]*",
    titles="titled|untitled",
    shard=r"\d+",


def dataset_pattern(candidates):
    """The dataset wildcard of the datasets of source 'candidates' (or of the others)."""
    names = [d for d in DATASETS if (config["datasets"][d]["source"] == "candidates") == candidates]
    return "|".join(map(re.escape, names)) or "(?!)"


def target_cfg(wc):
    return config["targets"][wc.target]


def generator_cfg(wc):
    """The target's generator entry (None for a target that generates on its own: ragmi.targets)."""
    return target_kind(target_cfg(wc)).generator(config, target_cfg(wc))


def target_model(wc):
    """The model named in the metrics: the generator's, a remote target's model name (its URL when
    unnamed), a python target's callable (the kind's ``model_name``)."""
    return target_kind(target_cfg(wc)).model_name(config, target_cfg(wc))


def retriever_name(wc):
    return target_cfg(wc)["retriever"]


def model_files(target):
    """The converted models a target needs: its generator's and, for LLM-based defenses, the defender's."""
    if own_pipeline(config["targets"][target]):
        return {}
    files = dict(model_input(config["generators"][config["targets"][target]["generator"]]))
    if target_needs_defender(config, target):
        d = model_input(defender_cfg())
        if d:
            files["defender_model"] = d["model"]
    return files


def index_dir(dataset, target):
    """A target's index: its retriever over its database (the members, or the null control's), with
    titles or without (targets.<t>.with_titles)."""
    t = config["targets"][target]
    root = "index_null" if t["database"] == "null_control" else "index"
    return f"results/{root}/{dataset}/{'titled' if t['with_titles'] else 'untitled'}/{t['retriever']}"


def target_files(wc):
    """The files a target RAG system needs: its database, index and models. A null-database control
    target reads the database without any candidate document (rule null_database)."""
    kind = target_kind(target_cfg(wc))
    if not kind.reads_split(target_cfg(wc)):  # the service or chain holds its own database and index
        if not kind.reports_sources(target_cfg(wc)):
            return {}
        # the labelled documents its reported sources are matched to (remote.sources_match)
        return {f"source_{c}": f"results/split/{wc.dataset}/{c}.parquet" for c in ("members", "nonmembers")}
    null = target_cfg(wc)["database"] == "null_control"
    return {
        "members": f"results/split/{wc.dataset}/{'null_members' if null else 'members'}.parquet",
        "index": index_dir(wc.dataset, wc.target),
        **model_files(wc.target),
    }


def target_spec_params(wc):
    """Everything of a target's TargetSpec but its files and threads (ragmi.workflow.target_spec)."""
    t = target_cfg(wc)
    if own_pipeline(t):
        return {
            "name": wc.target,
            "target": t,
            "retriever": {},
            "generator": {},
            "cache_dir": config["generation"]["cache_dir"],
            "server_log": "",
            "seed": SEED,
            "temperature": config["generation"]["temperature"],
        }
    return {
        "name": wc.target,
        "target": t,
        "retriever": config["retrievers"][t["retriever"]],
        "generator": generator_cfg(wc),
        "cache_dir": config["generation"]["cache_dir"],
        "embedding_cache_dir": config["generation"]["embedding_cache_dir"],
        "server_log": server_log(t["generator"]),
        "seed": SEED,
        "temperature": config["generation"]["temperature"],
        "defenses": [[n, config["defenses"][n]] for n in t["defenses"]],
        "defender": defender_cfg(),
        "defender_server_log": server_log(config["defender"]["generator"]),
    }


def defender_cfg():
    return config["generators"].get(config["defender"]["generator"])


def generate_inputs(wc):
    # the whole query file too: CA-DP's T is the most queries the attack sends about one candidate
    return {
        "shard": f"results/queries/{wc.dataset}/{wc.attack}.shards/{wc.shard}.parquet",
        "queries": f"results/queries/{wc.dataset}/{wc.attack}.parquet",
        **target_files(wc),
        **store_insert_files(wc),  # rules/stores.smk: the members are in the target's store
        # a target that sends another's requests (an output-only defense) answers after it, from the cache
        **(
            {"same_requests": f"results/responses/{wc.dataset}/{same}/{wc.attack}/{wc.shard}.parquet"}
            if (same := same_requests_as(config, wc.target))
            else {}
        ),
        # a negative control answers only the evaluation candidates (ragmi.plan.control_base)
        **(
            {"control_candidates": f"results/split/{wc.dataset}/candidates.parquet"}
            if wc.attack in ATTACKS and control_base(config, wc.target)
            else {}
        ),
    }


def attacker_cfg():
    return config["generators"][config["attacker"]["generator"]]


MODELS_DIR = config["generation"]["models_dir"]


def model_input(gen):
    return {"model": f"{MODELS_DIR}/{gen['model']}"} if needs_model_dir(gen) else {}


def model_job_threads():
    """The threads Snakemake gives a model job here: generation.threads, capped by --max-threads and
    --cores as Snakemake caps a rule's threads (they also pick the local server's cores, so a server
    started early must see the same number to be the one the model jobs reuse)."""
    t = config["generation"]["threads"]
    for cap in (workflow.resource_settings.max_threads, workflow.global_resources.get("_cores")):
        if isinstance(cap, int):
            t = min(t, cap)
    return t


def early_servers(model):
    """[generator name, entry, server log] of every local vLLM generator of this run that serves the
    packaged model ``model``: rule prepare_model starts their shared server (generation.start_server_early).
    Empty on a cluster, where every model job runs a server of its own."""
    if not config["generation"]["start_server_early"] or not workflow.local_exec:
        return []
    used = {config["targets"][t]["generator"] for t in config["targets"] if not own_pipeline(config["targets"][t])}
    used.add(config["attacker"]["generator"])
    return [
        [name, config["generators"][name], server_log(name)]
        for name in sorted(used)
        if config["generators"][name]["backend"] == "vllm" and config["generators"][name]["model"] == model
    ]


def prepare_inputs(wc):
    return {"candidates": f"results/split/{wc.dataset}/candidates.parquet", **model_input(attacker_cfg())}


def materials_input(wc):
    if needs_prepare(wc.attack):
        return {"materials": f"results/materials/{wc.dataset}/{wc.attack}.parquet"}
    return {}


def queries_inputs(wc):
    return {"candidates": f"results/split/{wc.dataset}/candidates.parquet", **materials_input(wc)}


def score_inputs(wc):
    base = control_base(config, wc.target)
    return {
        "queries": f"results/queries/{wc.dataset}/{wc.attack}.parquet",
        "responses": response_shards(wc),
        "candidates": f"results/split/{wc.dataset}/candidates.parquet",
        # a negative control applies its base target's fitted attack (ragmi.plan.control_base)
        **({"fit_responses": response_shards(wc, base)} if base else {}),
        **materials_input(wc),
        **store_cleanup_files(wc),  # rules/stores.smk: the store is as it was before the game
    }


def server_log(gen_name):
    return f"logs/servers/{gen_name}.log"


def response_shards(wc, target=None):
    ck = checkpoints.queries.get(dataset=wc.dataset, attack=wc.attack)
    shards = glob_wildcards(os.path.join(ck.output.shards, "{shard}.parquet")).shard
    return expand(
        "results/responses/{dataset}/{target}/{attack}/{shard}.parquet",
        dataset=wc.dataset,
        target=target or wc.target,
        attack=wc.attack,
        shard=sorted(shards),
    )


def local_backend(gen):
    return 1 if gen is not None and gen["backend"] in ("vllm", "transformers") else 0


def target_returns_logprobs(wc):
    """False for a target whose answers carry no log-probabilities (a remote or python target with
    ``logprobs: false``): the attack skips its gray-box variants with a note (ragmi.attacks.base.Attack's
    ``logprobs``)."""
    return target_kind(target_cfg(wc)).answers_logprobs(target_cfg(wc))


def final_outputs(page=True):
    """Every table, and the figures of the plain targets (defended and control targets are compared in
    the tables; their figures are built on request, e.g. results/figures/roc/<dataset>__<target>.png);
    with ``page``, the results page and run.json built from all of them (rules/results.smk)."""
    outs = table_outputs(config)
    plain = [t for t in TARGETS if is_plain(config["targets"][t]) and target_attacks(config, t)]
    outs += [f"results/figures/roc/{d}__{t}.png" for d in DATASETS for t in plain if d in target_datasets(config, t)]
    outs += [
        f"results/figures/{a}/{d}__{t}_{kind}.png"
        for d, t, a in runs(config)
        if t in plain
        for kind in ("roc", "scores")
    ]
    if config["gate"]["enabled"]:
        outs += [f"results/gate/{name}" for name in GATE_FILES]
    if page and outs:
        outs += ["results/results.html", "results/run.json"]
    return outs


def gate_tables():
    """The CSVs of the tables the gate's limits read that this configuration builds (a limit on a table
    it does not build finds no rows: no evidence, ragmi.gate)."""
    return [f"results/tables/{t}.csv" for t in built_tables(config)]
