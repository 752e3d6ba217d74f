# Config validation and the small helpers the rules share.
import os
import re
import sys

from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.target.factory import needs_model_dir

try:
    config = validate_config(config)
except ConfigError as e:
    sys.stderr.write(f"\nragmi: {e}\n\n")
    raise SystemExit(1)

SEED = config["seed"]
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
    gen = generator_cfg(wc)
    if needs_model_dir(gen):
        inputs["model"] = f"resources/models/{gen['model']}"
    return inputs


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


def uses_gpu(wc):
    return 1 if generator_cfg(wc)["backend"] in ("vllm", "transformers") else 0


def final_outputs():
    outs = []
    if "rag_mia" in ATTACKS:
        outs += ["results/tables/rag_mia.md", "results/tables/rag_mia.csv"]
        outs += expand(
            "results/figures/rag_mia/{dataset}__{target}_{kind}.png",
            dataset=DATASETS,
            target=TARGETS,
            kind=["roc", "scores"],
        )
    return outs
