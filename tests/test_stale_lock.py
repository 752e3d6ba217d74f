"""`make run` after a hard kill: a stale Snakemake lock is cleared (with a message), a live one is kept."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "clear_stale_lock.py"
sys.path.insert(0, str(ROOT / "tools"))
import clear_stale_lock  # noqa: E402

SNAKEFILE = """
rule all:
    input: "done.txt"

rule slow:
    output: "done.txt"
    shell: "if [ -f go ]; then touch {output}; else sleep 120; fi"
"""


def tool(*args, cwd):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=cwd)


def test_command_line_parsing():
    assert clear_stale_lock.snakemake_args(["/v/bin/python", "/v/bin/snakemake", "--cores", "2"]) == ["--cores", "2"]
    assert clear_stale_lock.snakemake_args(["python", "-m", "snakemake", "-d", "w"]) == ["-d", "w"]
    assert clear_stale_lock.snakemake_args(["python", "-c", "pass"]) is None
    assert clear_stale_lock.snakemake_args(["python", "tools/snakemake_helper.py"]) is None
    assert clear_stale_lock.workdir_of(["--cores", "1", "--directory", "sub"], "/a") == Path("/a/sub")
    assert clear_stale_lock.workdir_of(["-d", "/b"], "/a") == Path("/b")
    assert clear_stale_lock.workdir_of(["--cores", "1"], "/a") == Path("/a")


def test_stale_lock_files_are_removed_with_a_message(tmp_path):
    locks = tmp_path / "w" / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    for name in ("0.input.lock", "0.output.lock"):
        (locks / name).write_text(str(tmp_path / "w" / "done.txt") + "\n")
    out = tool("--cores", "1", "--directory", str(tmp_path / "w"), cwd=tmp_path)
    assert out.returncode == 0
    assert "ragmi: removed a stale Snakemake lock (2 files in" in out.stderr
    assert list(locks.iterdir()) == []


def test_no_lock_no_message(tmp_path):
    out = tool(cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""


def snakemake(workdir, *args):
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(workdir / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "1",
        *args,
    ]


def test_killed_run_blocks_the_rerun_until_the_stale_lock_is_cleared(tmp_path):
    """A real Snakemake run, SIGKILLed: its lock stays; the tool keeps it while the run lives, clears
    it once the run is dead, and the same command then runs."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE)
    proc = subprocess.Popen(
        snakemake(work), cwd=tmp_path, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        locks = work / ".snakemake" / "locks"
        deadline = time.time() + 120
        while not (locks.is_dir() and list(locks.glob("*.lock"))):
            assert proc.poll() is None and time.time() < deadline, "snakemake never took its lock"
            time.sleep(0.2)
        # while it runs, the lock is kept
        live = tool("--directory", str(work), cwd=tmp_path)
        assert f"ragmi: Snakemake is running in {work.resolve()} (pid {proc.pid}" in live.stderr
        assert list(locks.glob("*.lock"))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert list(locks.glob("*.lock"))  # a hard kill leaves the lock behind
    (work / "go").touch()
    blocked = subprocess.run(snakemake(work), cwd=tmp_path, capture_output=True, text=True)
    assert blocked.returncode != 0 and "cannot be locked" in blocked.stdout + blocked.stderr
    cleared = tool("--directory", str(work), cwd=tmp_path)
    assert "ragmi: removed a stale Snakemake lock" in cleared.stderr
    rerun = subprocess.run(snakemake(work), cwd=tmp_path, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert (work / "done.txt").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_clears_the_lock_before_snakemake():
    out = subprocess.run(
        ["make", "-n", "run", "SNAKEMAKE_ARGS=--directory /x"], capture_output=True, text=True, cwd=ROOT
    )
    lines = out.stdout.splitlines()
    tool_line = next(i for i, x in enumerate(lines) if "tools/clear_stale_lock.py --directory /x" in x)
    run_line = next(i for i, x in enumerate(lines) if "/snakemake --cores" in x)
    assert tool_line < run_line
