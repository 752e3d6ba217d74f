"""Progress lines of a model job: answers received of those sent, answer tokens per second, time left.

A job's lines go to its log and to the console (``ragmi.workflow.StepLog`` writes both).  How often:

* on a terminal (the job's stderr is a TTY: ``make run`` in a shell), at most one line every
  ``min_interval_s`` (5 s), and the last one when every answer is in.  While no answer has come for
  ``heartbeat_s`` (15 s) a waiting line says so: the local vLLM server answers the requests it
  received together, so the first answers of a shard may come only after a minute or two.  Where the
  server's counters can be read (``ragmi.rag.serving_metrics``) the waiting line says what it has done
  meanwhile: prompt tokens read and answer tokens written since the job sent its requests (the
  server's counters count every job it serves, so another job's tokens would be in them);
* anywhere else (a log file, a cluster job), one line per quarter of the answers and the last one,
  and a line whenever ``log_heartbeat_s`` (60 s) passed without one: answers still coming get a
  progress line, none coming a waiting line (with the server's counters where they can be read), so
  a job's log is never silent for more than a minute while it waits for its model.

Every line starts ``"  generated {done}/{total}"`` as the job logs always did, followed by the job
(its log's path under ``logs/``, e.g. ``[generate/synthetic/pad/s2mia/00000]``) when ``log`` is a
``ragmi.workflow.StepLog``: ``make run`` keeps Snakemake's job blocks off the console.  The time left is the
remaining answers at the rate of the last minute's answers (counted from the first answer: the wait
before it is the server reading the prompts, not a rate), so it is only as good as that rate: the
answers of a batch sent at once arrive close together near its end.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

MIN_INTERVAL_S = 5.0  # a terminal gets at most one line per this many seconds (and the last one)
HEARTBEAT_S = 15.0  # ... and a waiting line after this many seconds without one
LOG_HEARTBEAT_S = 60.0  # a log that is no terminal: a line at least this often while answers are awaited
PARTS = 4  # a log that is no terminal gets one line per 1/PARTS of the answers
RATE_WINDOW_S = 60.0  # the time left is reckoned from the answers of the last minute


def is_interactive(stream=None) -> bool:
    """Whether ``stream`` (default: stderr, where a job's log lines are printed) is a terminal, or
    ``make run`` says its console is one (``RAGMI_CONSOLE=tty``: the jobs' lines reach it through the
    pipe of tools/console_filter.py)."""
    if stream is None and os.environ.get("RAGMI_CONSOLE") == "tty":
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def job_label(log) -> str:
    """`` [generate/synthetic/pad/s2mia/00000]`` for a log written to ``logs/generate/.../00000.log``
    (a ``StepLog``'s ``path``), else ``""``; a log's ``progress_label``, when set, instead (a campaign's
    round: each round's answers are counted apart, ragmi.run_progress)."""
    label = getattr(log, "progress_label", None)
    if label:
        return f" [{label}]"
    path = getattr(log, "path", None)
    if not path:
        return ""
    parts = Path(path).with_suffix("").parts
    if "logs" not in parts:
        return ""
    rest = parts[len(parts) - parts[::-1].index("logs") :]
    return f" [{'/'.join(rest)}]" if rest else ""


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


class Progress:
    """Counts the answers of one batch and logs a throttled progress line (module docstring).

    ``add`` after every answer (or every batch of answers); ``heartbeat_due`` / ``heartbeat`` from a
    timer while waiting; ``clock`` is replaceable for tests.  Each method returns the line it logged,
    or None."""

    def __init__(
        self,
        total: int,
        log: Callable[[str], None],
        *,
        what: str = "generated",
        interactive: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float | None = None,
        heartbeat_s: float | None = None,
        log_heartbeat_s: float | None = None,
        parts: int | None = None,
        server_before: Mapping[str, float] | None = None,
    ):
        self.total = int(total)
        self.log = log
        self.what = what
        self.interactive = is_interactive() if interactive is None else bool(interactive)
        self.clock = clock
        self.min_interval_s = float(MIN_INTERVAL_S if min_interval_s is None else min_interval_s)
        self.heartbeat_s = float(HEARTBEAT_S if heartbeat_s is None else heartbeat_s)
        self.log_heartbeat_s = float(LOG_HEARTBEAT_S if log_heartbeat_s is None else log_heartbeat_s)
        self.parts = max(1, int(PARTS if parts is None else parts))
        self.server_before = server_before
        self.label = job_label(log)
        self.t0 = clock()
        self.last_line_t = self.t0
        self.done = 0
        self.answer_tokens = 0
        self.next_part = 1
        self.samples: list[tuple[float, int]] = []  # (time, answers so far) at every add after the first answer
        self.finished = False

    # ------------------------------------------------------------------------------------ counting
    def add(self, n: int = 1, completion_tokens: int = 0) -> str | None:
        """``n`` more answers (with ``completion_tokens`` answer tokens among them)."""
        now = self.clock()
        self.done += int(n)
        self.answer_tokens += int(completion_tokens or 0)
        self.samples.append((now, self.done))
        if self.finished:
            return None
        if self.done >= self.total:
            self.finished = True
            return self._emit(now)
        if self.interactive:
            return self._emit(now) if now - self.last_line_t >= self.min_interval_s else None
        crossed = False
        while self.next_part < self.parts and self.done >= self._threshold(self.next_part):
            self.next_part += 1
            crossed = True
        return self._emit(now) if crossed or now - self.last_line_t >= self.log_heartbeat_s else None

    def _threshold(self, part: int) -> int:
        return math.ceil(self.total * part / self.parts)

    # ------------------------------------------------------------------------------------- waiting
    def heartbeat_due(self) -> bool:
        """Answers still missing, and no line for ``heartbeat_s`` (a terminal) or ``log_heartbeat_s``
        (a log)."""
        every = self.heartbeat_s if self.interactive else self.log_heartbeat_s
        return not self.finished and self.done < self.total and self.clock() - self.last_line_t >= every

    def heartbeat(self, server: Mapping[str, float] | None = None) -> str | None:
        """The waiting line, when due; ``server``: the server's counters now (``serving_metrics.scrape``)."""
        if not self.heartbeat_due():
            return None
        now = self.clock()
        elapsed = now - self.t0
        line = (
            f"  {self.what} {self.done}/{self.total}{self.label} after {duration(elapsed)}, "
            f"{self.total - self.done} awaited"
        )
        before = self.server_before
        if server is not None and before is not None and "prompt_tokens" in server and elapsed > 0:
            read = max(0, int(round(server.get("prompt_tokens", 0.0) - before.get("prompt_tokens", 0.0))))
            written = max(0, int(round(server.get("generation_tokens", 0.0) - before.get("generation_tokens", 0.0))))
            line += (
                f"; the model server has read {read:,} prompt tokens ({read / elapsed:,.0f}/s) and written "
                f"{written:,} answer tokens since they were sent"
            )
        self.last_line_t = now
        self.log(line)
        return line

    # ---------------------------------------------------------------------------------------- lines
    def rate(self, now: float) -> float | None:
        """Answers per second over the last ``RATE_WINDOW_S``, counted from the first answer; None
        before two answers or over less than a second."""
        if len(self.samples) < 2:
            return None
        start = max(self.samples[0][0], now - RATE_WINDOW_S)
        base_t, base_done = self.samples[0]
        for t, d in self.samples:
            if t > start:
                break
            base_t, base_done = t, d
        span = now - base_t
        if span < 1.0 or self.done <= base_done:
            return None
        return (self.done - base_done) / span

    def line(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        elapsed = now - self.t0
        done = min(self.done, self.total)
        out = f"  {self.what} {done}/{self.total}{self.label} " + ("in " if done >= self.total else "after ")
        out += duration(elapsed)
        if self.answer_tokens and elapsed > 0:
            out += f", {self.answer_tokens / elapsed:.1f} answer tokens/s"
        if done < self.total:
            r = self.rate(now)
            if r:
                out += f"; about {duration((self.total - done) / r)} left at the recent rate"
        return out

    def _emit(self, now: float) -> str:
        line = self.line(now)
        self.last_line_t = now
        self.log(line)
        return line
