# Config validation and the small helpers the rules share.
import os
import re

import yaml
import sys

from ragmi.attacks import needs_prepare
from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.target.factory import needs_model_dir

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

SEED = config["seed"]
PUBLISHED = os.path.join(workflow.basedir, "config", "published.yaml")
DATASETS = sorted(config["datasets"])
TARGETS = sorted(config["targets"])
ATTACKS = sorted(config["attacks"])


wildcard_constraints:
    dataset="|".join(map(re.escape, DATASETS)),
    target="|".join(map(re.escape, TARGETS)),
    attack="|".join(map(re.escape, ATTACKS)),
    retriever="[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"\d+",


def target_cfg(wc):
    return config["targets"][wc.target]


def generator_cfg(wc):
    return config["generators"][target_cfg(wc)["generator"]]


def retriever_name(wc):
    return target_cfg(wc)["retriever"]


def generate_inputs(wc):
    inputs = {
        "shard": f"results/queries/{wc.dataset}/{wc.attack}.shards/{wc.shard}.parquet",
        "members": f"results/split/{wc.dataset}/members.parquet",
        "index": f"results/index/{wc.dataset}/{retriever_name(wc)}",
    }
    return {**inputs, **model_input(generator_cfg(wc))}


def attacker_cfg():
    return config["generators"][config["attacker"]["generator"]]


MODELS_DIR = config["generation"]["models_dir"]


def model_input(gen):
    return {"model": f"{MODELS_DIR}/{gen['model']}"} if needs_model_dir(gen) else {}


def prepare_inputs(wc):
    return {"targets": f"results/split/{wc.dataset}/targets.parquet", **model_input(attacker_cfg())}


def materials_input(wc):
    if needs_prepare(wc.attack):
        return {"materials": f"results/materials/{wc.dataset}/{wc.attack}.parquet"}
    return {}


def queries_inputs(wc):
    return {"targets": f"results/split/{wc.dataset}/targets.parquet", **materials_input(wc)}


def score_inputs(wc):
    return {
        "queries": f"results/queries/{wc.dataset}/{wc.attack}.parquet",
        "responses": response_shards(wc),
        "targets": f"results/split/{wc.dataset}/targets.parquet",
        **materials_input(wc),
    }


def server_log(gen_name):
    return f"logs/servers/{gen_name}.log"


def response_shards(wc):
    ck = checkpoints.queries.get(dataset=wc.dataset, attack=wc.attack)
    shards = glob_wildcards(os.path.join(ck.output.shards, "{shard}.parquet")).shard
    return expand(
        "results/responses/{dataset}/{target}/{attack}/{shard}.parquet",
        dataset=wc.dataset,
        target=wc.target,
        attack=wc.attack,
        shard=sorted(shards),
    )


def local_backend(gen):
    return 1 if gen["backend"] in ("vllm", "transformers") else 0


def final_outputs():
    outs = ["results/tables/attack_comparison.md"]
    if "rag_mia" in ATTACKS:
        outs.append("results/tables/rag_mia.md")
    if "dcmi" in ATTACKS:
        outs.append("results/tables/dcmi_ablation.md")
    if "ia" in ATTACKS or "menta" in ATTACKS:
        outs.append("results/tables/query_budget.md")
    outs += expand("results/figures/roc/{dataset}__{target}.png", dataset=DATASETS, target=TARGETS)
    outs += expand(
        "results/figures/{attack}/{dataset}__{target}_{kind}.png",
        attack=ATTACKS,
        dataset=DATASETS,
        target=TARGETS,
        kind=["roc", "scores"],
    )
    return outs
