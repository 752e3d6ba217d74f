"""ragmi.run_progress: the run's line on the console of `make run` (answers done and left, the time left at
the measured rate), fed with what `make run` really printed (tests/data/run_console/default_make_run.txt:
the default's console, captured on a 2-core AMD EPYC), the clock taken from the lines' own timestamps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ragmi.run_progress import RunProgress, read_plan, write_plan

ROOT = Path(__file__).resolve().parents[1]
CAPTURED = (ROOT / "tests/data/run_console/default_make_run.txt").read_text().splitlines(keepends=True)
STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d) ")
# what the capture's own estimate lines say (tools/eta.py): 1,264 requests to send, 428 cached answers
# that no finished step accounts for, 15 to 60 minutes
PLAN = {"requests": 1264, "cached_unaccounted": 428, "estimate_low_s": 900.0, "estimate_high_s": 3600.0}
JOB = "generate/synthetic/qwen-rag--no-retrieval/extraction/00000"


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def feed(run: RunProgress, clock: Clock, lines, until: str | None = None) -> list[str]:
    """Each captured line at its own time (the last timestamp seen), and a tick after it; the run lines."""
    out = []
    for line in lines:
        m = STAMP.match(line)
        if m:
            h, mi, s = map(int, m.groups())
            clock.t = max(clock.t, h * 3600 + mi * 60 + s)
        run.observe(line)
        got = run.tick()
        if got:
            out.append(got)
        if until and until in line:
            break
    return out


def test_the_capture_is_make_runs_console():
    text = "".join(CAPTURED)
    assert "ragmi:   work: 1,264 model requests to send" in text and "428 of them not from a finished step" in text
    assert "Snakemake version: 9.27.1" in text and "rule " not in text  # through the filter, job blocks gone


def test_answers_are_counted_from_the_jobs_progress_lines():
    clock = Clock(8 * 3600 + 44 * 60)
    run = RunProgress(PLAN, interactive=False, clock=clock, wall=time.time)
    feed(run, clock, CAPTURED, until="generated 40/80")
    assert run.jobs == {JOB: (40, 80)} and run.done == 40
    # answers left: the plan's 1,264 less those done, the fewest counting the 428 cached as this run's
    assert run.left() == (1264 - 428 - 40, 1264 - 40)
    feed(run, clock, CAPTURED[[i for i, x in enumerate(CAPTURED) if "generated 40/80" in x][0] + 1 :])
    assert run.jobs == {JOB: (80, 80)} and run.done == 80


def test_a_line_every_minute_in_a_log_while_answers_are_awaited():
    clock = Clock(8 * 3600 + 44 * 60)
    run = RunProgress(PLAN, interactive=False, clock=clock, wall=time.time)
    lines = feed(run, clock, CAPTURED)
    # the job asked for its answers at 08:46:00 and had them all at 08:50:52; the capture ends 08:51:51
    assert len(lines) >= 5, lines
    first = lines[0]
    assert "0 of 836 to 1,264 answers" in first and "waiting for the first answers" in first, first
    assert "(the whole run estimated at the start: 15 min 00 s to 1 h 00 min)" in first
    late = [x for x in lines if re.match(r"ragmi: run [^:]+: 80 of ", x)]
    assert late, lines
    m = re.search(r"80 of 836 to 1,264 answers, ([\d.]+) answers/s since the first model job; about (.+) left", late[0])
    assert m, late[0]
    assert 0.1 < float(m.group(1)) < 0.4  # 80 answers in about 5 min
    assert "steps done" in late[0]


def test_the_period_is_30_s_at_a_terminal_and_60_s_in_a_log():
    for interactive, period in ((True, 30), (False, 60)):
        clock = Clock(0.0)
        run = RunProgress({"requests": 10, "cached_unaccounted": 0}, interactive=interactive, clock=clock)
        clock.t = 1.0
        run.observe("[08:46:00 +   0.1s] 10 requests: 0 from cache, 10 to generate\n")
        clock.t = period - 0.5
        assert run.tick() is None
        clock.t = period + 0.5
        line = run.tick()
        assert line is not None and "0 of 10 answers" in line, line
        clock.t = period + 10
        assert run.tick() is None  # the next one a period later
        clock.t = 2 * period + 1
        assert run.tick() is not None


def test_no_run_line_once_every_answer_is_in_unless_the_console_falls_silent():
    clock = Clock(0.0)
    run = RunProgress({"requests": 4, "cached_unaccounted": 0}, interactive=False, clock=clock)
    run.observe("  generated 4/4 [generate/d/t/a/00000] in 12 s\n")
    clock.t = 61
    run.observe("5 of 9 steps (55%) done\n")
    assert run.tick() is None  # nothing awaited, and a line just came
    clock.t = 125
    line = run.tick()  # a minute of silence
    assert line is not None and "4 of 4 answers" in line and "every planned answer is in" in line
    assert line.endswith("5 of 9 steps done"), line


def test_without_a_plan_the_line_counts_what_the_jobs_said():
    clock = Clock(0.0)
    run = RunProgress(None, interactive=True, clock=clock)
    run.observe("  generated 3/12 [generate/d/t/a/00000] after 10 s\n")
    clock.t = 31
    line = run.tick()
    assert line is not None and line.startswith("ragmi: run 31 s: 3 answers, ") and "left" not in line


def test_job_logs_written_since_the_start_are_read_and_older_ones_not(tmp_path):
    # a SLURM job's lines reach its log only: the job logs under logs/ are read too
    logs = tmp_path / "logs"
    old = logs / "generate/synthetic/other/extraction/00000.log"  # an earlier run's
    old.parent.mkdir(parents=True)
    old.write_text("  generated 50/50 [generate/synthetic/other/extraction/00000] in 1 min\n")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    clock = Clock(0.0)
    run = RunProgress(PLAN, interactive=False, clock=clock, logs_dir=logs)
    job = logs / "generate/synthetic/qwen-rag--no-retrieval/extraction/00000.log"  # this run's
    job.parent.mkdir(parents=True)
    mine = [x for x in CAPTURED if f"[{JOB}]" in x]
    job.write_text("".join(mine[: [i for i, x in enumerate(mine) if "generated 20/80" in x][0] + 1]))
    run.tick()
    assert run.jobs == {JOB: (20, 80)}, run.jobs


def test_plan_round_trip(tmp_path):
    path = tmp_path / "plan.json"
    write_plan(path, requests=1263.6, cached_unaccounted=428, low_s=900.0, high_s=3600.0, root=tmp_path)
    plan = read_plan(path)
    assert plan["requests"] == 1264 and plan["cached_unaccounted"] == 428 and plan["root"] == str(tmp_path)
    assert read_plan(tmp_path / "missing.json") is None


def test_the_filter_prints_the_run_line_while_its_input_is_idle(tmp_path):
    """tools/console_filter.py --plan: a run line comes while nothing arrives on its input (a job waiting
    for its model), not only when the next line does."""
    plan = tmp_path / "plan.json"
    write_plan(plan, requests=80, cached_unaccounted=0, low_s=None, high_s=None, root=tmp_path)
    p = subprocess.Popen(
        [sys.executable, "-u", str(ROOT / "tools/console_filter.py"), "--plan", str(plan)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAGMI_PROGRESS_PERIOD_S": "1"},
    )
    start = [x for x in CAPTURED if "80 requests: 0 from cache, 80 to generate" in x]
    p.stdin.write(start[0])
    p.stdin.flush()
    time.sleep(3.5)
    p.stdin.close()
    out = p.stdout.read()
    p.wait(timeout=30)
    assert start[0] in out
    runs = [x for x in out.splitlines() if x.startswith("ragmi: run ")]
    assert len(runs) >= 2, out
    assert "0 of 80 answers, waiting for the first answers" in runs[0], runs[0]
