"""tools/console_filter.py: Snakemake's per-job blocks off the console of `make run`, every other line kept.

The input is what the locked Snakemake really prints: tests/data/snakemake_console/console.txt was captured
from it running the tiny workflow beside it (tests/data/snakemake_console/capture.sh), and the slow test runs
that workflow live through the same pipe as `make run` (Makefile: CONSOLE)."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests/data/snakemake_console"
sys.path.insert(0, str(ROOT / "tools"))

import console_filter  # noqa: E402

CAPTURED = (DATA / "console.txt").read_text()


def _filter(text: str) -> str:
    return "".join(console_filter.filtered(text.splitlines(keepends=True)))


def test_the_capture_is_the_locked_snakemakes_output_without_blank_lines_after_job_blocks():
    # what made the old filter drop everything after the first job block: no blank line ends a block
    lines = CAPTURED.splitlines()
    assert "Snakemake version: 9.27.1" in CAPTURED
    i = lines.index("localrule corpus:")
    assert lines[i + 1].startswith("    ") and not any(x.strip() == "" for x in lines[i : i + 8])


def test_job_blocks_are_dropped_and_progress_warnings_and_errors_kept():
    out = _filter(CAPTURED)
    lines = out.splitlines()
    for block_line in ("localrule corpus:", "localrule generate:", "localrule score:"):
        assert block_line not in lines
    assert "reason: Missing output files" not in out and "Finished jobid" not in out
    assert "    jobid: 3" not in out and "resources: tmpdir" not in out
    # each step's own lines, in order, and Snakemake's progress
    for kept in (
        "corpus: 200 documents",
        "generated 20/60 [generate/synthetic/qwen-rag/rag_mia/00000]",
        "generated 40/60",
        "generated 60/60",
        "ragmi: WARNING: 2 answers were empty",
        "1 of 4 steps (25%) done",
        "2 of 4 steps (50%) done",
    ):
        assert kept in out, kept
    assert out.index("generated 20/60") < out.index("generated 60/60") < out.index("2 of 4 steps")
    # the failure whole: its timestamp, the Error block with its log path, and the end of the run
    err = out[out.index("Error in rule score:") :]
    assert "log: logs/score.log (check log file(s) for error details)" in err
    assert "CalledProcessError" in out and "Exiting because a job execution failed" in out
    assert " 2026]\nError in rule score:\n" in out  # its timestamp line right before it


def test_a_blank_line_still_ends_a_block():
    # Snakemake versions before 9 ended a job block with a blank line: the captured output with one added
    text = CAPTURED.replace("    resources: tmpdir=/tmp\n[05:02:12", "    resources: tmpdir=/tmp\n\n[05:02:12")
    assert text != CAPTURED
    out = _filter(text)
    assert "corpus: 200 documents" in out and "localrule corpus:" not in out


@pytest.mark.slow
def test_make_runs_console_pipe_shows_progress_while_the_job_runs(tmp_path):
    """The tiny workflow run live by the locked Snakemake, piped into the filter as `make run` pipes it: the
    model job's progress lines reach the console while the job runs (seconds before its step is done)."""
    (tmp_path / "Snakefile").write_text((DATA / "Snakefile").read_text())
    cmd = (
        f"{ROOT / '.venv/bin/snakemake'} --cores 1 --snakefile Snakefile 2>&1 "
        f"| {sys.executable} -u {ROOT / 'tools/console_filter.py'}"
    )
    p = subprocess.Popen(["bash", "-c", cmd], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    seen: dict[str, float] = {}
    for line in p.stdout:
        for key in ("generated 20/60", "generated 60/60", "2 of 4 steps", "Error in rule score:"):
            if key in line and key not in seen:
                seen[key] = time.monotonic()
        assert not line.startswith(("localrule ", "rule ")), line
    p.wait(timeout=120)
    assert set(seen) == {"generated 20/60", "generated 60/60", "2 of 4 steps", "Error in rule score:"}
    # the job sleeps 1 s after each of its three lines: the first reaches the console before the job ends
    assert seen["2 of 4 steps"] - seen["generated 20/60"] > 1.5


RUN_LINE = re.compile(r"^ragmi: run [^:]+: ([\d,]+) of ([\d,]+)(?: to ([\d,]+))? answers")


@pytest.mark.slow
def test_make_run_prints_the_runs_progress_while_its_model_job_runs(tmp_path, smollm2_dir):
    """`make run` itself on the tiny configuration (its console path: tools/eta.py's plan, Snakemake, the
    filter with the plan): the run's line (answers done of those planned, the rate, the time left) and the
    model job's own progress lines reach the console while the job still awaits answers, not only at its end."""
    from conftest import _hold_session_servers, session_server_env
    from test_pipeline_e2e import tiny_config

    cfg = tiny_config(Path(smollm2_dir).parent)
    cfg["generators"]["smollm2"]["concurrency"] = 1  # answers one at a time: the job lasts a while
    cfg["generation"]["shard_size"] = 1000
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    target = "results/scores/tiny/t/rag_mia.parquet"
    # the target last: `make run` puts SNAKEMAKE_ARGS after its own --configfile, which would take it for a file
    args = f"--configfile {tmp_path / 'config.yaml'} --directory {tmp_path} {target}"
    env = {**session_server_env(), "RAGMI_PROGRESS_PERIOD_S": "2"}
    env.pop("RAGMI_CONSOLE", None)
    p = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "run", f"SNAKEMAKE_ARGS={args}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines = [line.rstrip("\n") for line in p.stdout]
    rc = p.wait(timeout=900)
    _hold_session_servers()
    text = "\n".join(lines)
    assert rc == 0, text[-4000:]
    job = [i for i, line in enumerate(lines) if re.search(r"generated \d+/32 \[generate/tiny/t/rag_mia/00000\]", line)]
    last = next(i for i in job if "generated 32/32 [" in lines[i])
    # the job's own lines: a quarter of its answers at a time, before its last one
    assert any(i < last for i in job), text[-4000:]
    runs = [(i, RUN_LINE.match(line)) for i, line in enumerate(lines)]
    runs = [(i, int(m.group(1).replace(",", "")), m) for i, m in runs if m]
    during = [(i, done) for i, done, _ in runs if i < last and 0 < done < 32]
    assert during, "no run line while the job ran:\n" + text[-4000:]
    i, _ = during[0]
    assert "answers/s since the first model job" in lines[i] and "left at that rate" in lines[i], lines[i]
    # the plan of tools/eta.py: every request of the configuration (the tiny one asks 32 of RAG-MIA, more
    # for its controls), so the count of those planned is at least the job's
    planned = int(runs[0][2].group(2).replace(",", ""))
    assert planned >= 32, lines[runs[0][0]]
    # no Snakemake job block reached the console
    assert not any(line.startswith(("rule ", "localrule ")) for line in lines)
