"""The run's progress on the console of ``make run``: answers done and left, and the time left at the
rate this run has measured so far (the start-of-run estimate of ``tools/eta.py``, updated as the run goes).

``tools/eta.py --plan-file PATH`` writes the run's plan before Snakemake starts (:func:`write_plan`: the
model requests to send, how many of them the response cache may already hold, the estimate's range).
``tools/console_filter.py --plan PATH`` feeds every console line to :class:`RunProgress` and asks it
once a second for a line (:meth:`RunProgress.tick`).  It counts a job's answers from the job's own
progress lines (``"  generated 20/60 [generate/synthetic/qwen-rag/s2mia/00000] ..."``,
:mod:`ragmi.progress`), on the console or, for jobs whose lines do not reach it (a SLURM job writes
only to its log), in its log under ``logs/`` (a log written since the run started).  Snakemake's
``N of M steps`` line gives the steps.

A run line comes at least every ``period_s`` while model answers are awaited (30 s at a terminal,
60 s in a log file), and whenever the console has been silent that long at any other time::

    ragmi: run 12 min 05 s: 412 of 1,264 answers (33%), 0.62 answers/s since the first model job;
           about 23 min left at that rate (estimated at the start: 15 to 60 min); 37 of 98 steps done

The rate is the answers so far over the time since the first model job asked for answers, so the wait
for the server's first answers counts against it (the time left errs long early on).  Answers left
are the plan's requests not yet answered; when the response cache held answers no finished step
accounts for (they may be this run's), the count left is a range.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from .progress import duration

GENERATED = re.compile(r"\bgenerated (\d+)/(\d+) \[([^\]\s]+)\]")
TO_GENERATE = re.compile(r"\b(\d+) requests: (\d+) from cache, (\d+) to generate")
STEPS = re.compile(r"^(\d+) of (\d+) steps \(\d+%\) done")
TERMINAL_PERIOD_S = 30.0
LOG_PERIOD_S = 60.0
LOG_SCAN_S = 10.0  # how often the job logs under logs/ are read
PERIOD_ENV = "RAGMI_PROGRESS_PERIOD_S"  # overrides both periods (a test's short run, an impatient user)


def period_from_env(interactive: bool) -> float:
    """``RAGMI_PROGRESS_PERIOD_S`` when set to a positive number, else 30 s at a terminal, 60 s in a log."""
    try:
        value = float(os.environ.get(PERIOD_ENV, ""))
    except ValueError:
        value = 0.0
    if value > 0:
        return value
    return TERMINAL_PERIOD_S if interactive else LOG_PERIOD_S


def write_plan(
    path: str | os.PathLike,
    *,
    requests: float,
    cached_unaccounted: int,
    low_s: float | None,
    high_s: float | None,
    root: str | os.PathLike,
) -> None:
    """The plan :class:`RunProgress` reads (``tools/eta.py --plan-file``)."""
    doc = {
        "requests": int(round(requests)),
        "cached_unaccounted": int(cached_unaccounted),
        "estimate_low_s": low_s,
        "estimate_high_s": high_s,
        "root": str(root),
        "written": time.time(),
    }
    Path(path).write_text(json.dumps(doc), encoding="utf-8")


def read_plan(path: str | os.PathLike | None) -> dict | None:
    if not path:
        return None
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("requests"), int) else None


def _count(n: float) -> str:
    return f"{n:,.0f}"


class RunProgress:
    """Answers of the run's model jobs, counted from their progress lines (module docstring).

    ``observe(line)`` for every console line; ``tick()`` once a second returns the run line when one is
    due, else None.  ``clock`` (monotonic seconds) and ``wall`` (epoch seconds, to tell this run's logs
    from older ones) are replaceable for tests."""

    def __init__(
        self,
        plan: dict | None,
        *,
        interactive: bool,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        logs_dir: str | os.PathLike | None = None,
        period_s: float | None = None,
    ):
        self.plan = plan
        self.clock = clock
        self.period_s = float(period_s if period_s is not None else period_from_env(interactive))
        self.t0 = clock()
        self.wall0 = wall()
        self.logs_dir = Path(logs_dir) if logs_dir else None
        self.jobs: dict[str, tuple[int, int]] = {}  # job label -> (answers, requests to generate)
        self.model_start: float | None = None  # when the first job asked the model for answers
        self.steps: tuple[int, int] | None = None
        self.last_output = self.t0  # the last line the console got (any line)
        self.last_run_line: float | None = None
        self.last_scan = -1e18

    # ---------------------------------------------------------------------------------- counting
    def observe(self, line: str) -> None:
        """A console line (it reached the console: the console is not silent)."""
        now = self.clock()
        self.last_output = now
        self._parse(line, now)

    def _parse(self, line: str, now: float) -> None:
        m = STEPS.match(line.strip())
        if m:
            self.steps = (int(m.group(1)), int(m.group(2)))
            return
        m = TO_GENERATE.search(line)
        if m and int(m.group(3)) > 0 and self.model_start is None:
            self.model_start = now
        m = GENERATED.search(line)
        if m:
            done, total, label = int(m.group(1)), int(m.group(2)), m.group(3)
            if self.model_start is None:
                self.model_start = now
            old = self.jobs.get(label, (0, total))
            self.jobs[label] = (max(done, old[0]), total)

    def scan_logs(self) -> None:
        """The last progress line of each job log under ``logs/`` written since the run started."""
        if self.logs_dir is None or not self.logs_dir.is_dir():
            return
        for path in self.logs_dir.rglob("*.log"):
            try:
                if path.stat().st_mtime < self.wall0:
                    continue
                with open(path, "rb") as fh:
                    fh.seek(0, os.SEEK_END)
                    size = fh.tell()
                    fh.seek(max(0, size - 16384))
                    tail = fh.read().decode("utf-8", "replace")
            except OSError:
                continue
            for line in tail.splitlines():
                if GENERATED.search(line) or TO_GENERATE.search(line):
                    self._parse(line, self.clock())

    @property
    def done(self) -> int:
        return sum(d for d, _ in self.jobs.values())

    def left(self) -> tuple[int, int] | None:
        """(fewest, most) answers left: the plan's requests not yet answered (the fewest counting the
        cached answers no finished step accounts for as this run's), never fewer than the started jobs
        still await; None without a plan."""
        awaited = sum(max(0, t - d) for d, t in self.jobs.values())
        if self.plan is None:
            return None
        most = max(awaited, self.plan["requests"] - self.done)
        fewest = max(awaited, self.plan["requests"] - self.plan.get("cached_unaccounted", 0) - self.done)
        return min(fewest, most), most

    def awaiting(self) -> bool:
        """Model answers are still expected: a started job awaits some, or the plan has more."""
        if any(d < t for d, t in self.jobs.values()):
            return True
        left = self.left()
        return self.model_start is not None and left is not None and left[0] > 0

    # ------------------------------------------------------------------------------------- lines
    def tick(self) -> str | None:
        now = self.clock()
        if now - self.last_scan >= LOG_SCAN_S:
            self.last_scan = now
            self.scan_logs()
        since_run_line = now - (self.last_run_line if self.last_run_line is not None else self.t0)
        due = (self.awaiting() and since_run_line >= self.period_s) or now - self.last_output >= self.period_s
        if not due:
            return None
        line = self.line(now)
        self.last_run_line = now
        self.last_output = now
        return line

    def line(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        out = f"ragmi: run {duration(now - self.t0)}: "
        done = self.done
        left = self.left()
        rate = None
        if self.model_start is not None and done and now - self.model_start >= 1:
            rate = done / (now - self.model_start)
        if left is not None:
            total_lo, total_hi = done + left[0], done + left[1]
            total = _count(total_hi) if total_lo == total_hi else f"{_count(total_lo)} to {_count(total_hi)}"
            out += f"{_count(done)} of {total} answers"
        else:
            out += f"{_count(done)} answers"
        if self.model_start is None:
            out += ", no model job has started yet"
        elif rate is None:
            out += ", waiting for the first answers: the model server reads a job's prompts together"
        else:
            out += f", {rate:.2f} answers/s since the first model job"
            if left is not None and left[1] > 0:
                lo, hi = left[0] / rate, left[1] / rate
                when = duration(hi) if duration(lo) == duration(hi) else f"{duration(lo)} to {duration(hi)}"
                out += f"; about {when} left at that rate"
            elif left is not None:
                out += "; every planned answer is in"
        if self.plan and self.plan.get("estimate_low_s") is not None and self.plan.get("estimate_high_s") is not None:
            lo, hi = self.plan["estimate_low_s"], self.plan["estimate_high_s"]
            est = duration(lo) if duration(lo) == duration(hi) else f"{duration(lo)} to {duration(hi)}"
            out += f" (the whole run estimated at the start: {est})"
        if self.steps is not None:
            out += f"; {self.steps[0]} of {self.steps[1]} steps done"
        return out
