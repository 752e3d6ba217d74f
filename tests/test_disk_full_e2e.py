"""End to end: a generate job whose response cache fills its disk stops with one line naming the file
and the space left, leaves nothing truncated and no temp behind, and the rerun after space is freed
sends only the answers the cache did not keep.

Real Snakemake, real vLLM (its CPU build here) serving SmolLM2; one shard of RAG-MIA queries, all sent at
once (the ``vllm`` backend's default): answers still arriving when the disk fills are dropped without a
second message or a traceback.  The full disk is real where the test may mount: ``generation.cache_dir`` on a 1 MiB tmpfs
whose ballast file leaves 32 KiB, a few answers' worth.  Where mounting is not permitted (CI without
root), or with ``RAGMI_TEST_DISK_FULL=inject``, a ``sitecustomize`` on the jobs' ``PYTHONPATH`` makes the
cache's writes fail half-way with ``OSError(ENOSPC)`` after 4 entries instead; the test's report line
(``-rA``) says which of the two ran.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import _hold_session_servers, session_server_env
from test_pipeline_e2e import SNAKEMAKE, tiny_config

from ragmi.cache import pack_records

pytestmark = pytest.mark.slow

SHARD = "results/responses/tiny/t/rag_mia/00000.parquet"
TARGET = "results/scores/tiny/t/rag_mia.parquet"  # the shard lies in a checkpoint's folder: ask for what reads it
LOG = "logs/generate/tiny/t/rag_mia/00000.log"
FREE = 32 * 1024  # what the ballast leaves of the tmpfs
INJECT_AFTER = 4  # the cache entries written before the injected ENOSPC

SITECUSTOMIZE = """
import os

_dir = os.environ.get("RAGMI_TEST_ENOSPC_DIR")
if _dir:
    import errno

    _after = int(os.environ["RAGMI_TEST_ENOSPC_AFTER"])
    _real = os.write
    _n = [0]

    def write(fd, data):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if path.startswith(_dir) and path.endswith(".pack"):  # a record of the response cache
            _n[0] += 1
            if _n[0] > _after:  # half the record reaches the disk, then it is full
                _real(fd, bytes(data)[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return _real(fd, data)

    os.write = write
"""


@pytest.fixture
def full_disk(tmp_path):
    """(mode, cache folder, environment of the first run): ``tmpfs`` with the ballast in place, or ``inject``."""
    mnt = tmp_path / "small-fs"
    mnt.mkdir()
    reason = "RAGMI_TEST_DISK_FULL=inject"
    if os.environ.get("RAGMI_TEST_DISK_FULL") != "inject":
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True
        )
        if proc.returncode == 0:
            try:
                st = os.statvfs(mnt)
                (mnt / "ballast").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - FREE))
                print("disk full: a real 1 MiB tmpfs")
                yield "tmpfs", mnt / "responses", session_server_env()
            finally:
                if subprocess.run(["umount", str(mnt)]).returncode != 0:  # a file still open there: detach it
                    subprocess.run(["umount", "--lazy", str(mnt)], check=True)
            return
        reason = f"mount not permitted: {proc.stderr.strip()}"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = session_server_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    env.update(RAGMI_TEST_ENOSPC_DIR=str(mnt / "responses"), RAGMI_TEST_ENOSPC_AFTER=str(INJECT_AFTER))
    print(f"disk full: ENOSPC injected after {INJECT_AFTER} cache entries ({reason})")
    yield "inject", mnt / "responses", env


def entries(cache: Path) -> dict[str, tuple]:
    """key -> (pack, offset) of every whole entry of the response cache (its packs' index)."""
    return {r.digest.hex(): (r.pack.name, r.offset) for r in pack_records(cache) if len(r.data) == r.length}


def assert_nothing_truncated(*roots: Path) -> None:
    """Every parquet and JSON file under ``roots`` parses; no temp of the atomic writers is left."""
    for root in roots:
        assert not [p for p in root.rglob(".*.tmp")], f"a temp left under {root}"
        for p in root.rglob("*.parquet"):
            pd.read_parquet(p)
        for p in root.rglob("*.json"):
            json.loads(p.read_text())
        for r in pack_records(root):  # every indexed cache record is whole and under its own key
            assert json.loads(r.data)["key"] == r.digest.hex()


def test_a_full_disk_stops_the_job_with_one_line_and_the_rerun_resumes(tmp_path, smollm2_dir, full_disk):
    mode, cache, env = full_disk
    work = tmp_path / "work"
    work.mkdir()
    cfg = tiny_config(Path(smollm2_dir).parent)
    cfg["attacks"]["rag_mia"]["templates"] = [2]  # one prompt per candidate: 32 queries
    cfg["generation"]["shard_size"] = 1000  # one shard
    cfg["generation"]["cache_dir"] = str(cache)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = SNAKEMAKE + ["--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", "2", TARGET]

    first = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
    _hold_session_servers()
    out = first.stdout + first.stderr
    assert first.returncode != 0, out[-3000:]
    kept = entries(cache)
    total = len(pd.read_parquet(work / "results/queries/tiny/rag_mia.parquet"))
    assert total == 32
    assert 1 <= len(kept) < total, f"{len(kept)} of {total} answers cached before the disk filled"
    if mode == "inject":
        assert len(kept) == INJECT_AFTER
    # one line, naming the file system, the cache entry being written and the space left
    lines = [x for x in out.splitlines() if x.startswith("ragmi: ")]
    assert len(lines) == 1, out[-3000:]
    size = r"\d+(\.\d)? (B|KiB|MiB|GiB|TiB|PiB)"
    where = f"tmpfs mounted at {re.escape(str(cache.parent))}" if mode == "tmpfs" else ".+"
    assert re.fullmatch(
        f"ragmi: no space left on {where} writing {re.escape(str(cache))}/packs/[^ ]+\\.pack: "
        f"{size} free of {size if mode == 'inject' else '1.0 MiB'}; free space and rerun the same command: "
        "finished steps and cached answers are kept",
        lines[0],
    ), lines[0]
    assert "Traceback" not in out
    log = (work / LOG).read_text()
    assert f"the disk filled after {len(kept)} answers generated by this job were cached (0 came from the cache)" in log
    assert not (work / SHARD).exists()
    assert_nothing_truncated(work / "results", work / "logs", cache.parent)

    # space freed (the ballast goes; the injection is not set), the same command again
    (cache.parent / "ballast").unlink(missing_ok=True)
    rerun = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=session_server_env())
    _hold_session_servers()
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    asked = re.findall(r"(\d+) requests: (\d+) from cache, (\d+) to generate", (work / LOG).read_text())
    n = len(kept)
    assert asked[-1] == (str(total), str(n), str(total - n))
    after = entries(cache)
    assert len(after) == total and all(after[k] == m for k, m in kept.items())  # kept answers not rewritten
    shard = pd.read_parquet(work / SHARD)
    assert len(shard) == total and int(shard["cached"].sum()) == n
    assert shard["response_text"].map(len).gt(0).all()
    assert (work / TARGET).exists()
    assert_nothing_truncated(work / "results", work / "logs", cache.parent)
