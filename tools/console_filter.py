"""Keep Snakemake's per-job blocks off the console of `make run`, and everything else on it.

    snakemake ... 2>&1 | python tools/console_filter.py

Snakemake prints, for every job it starts, a block (a timestamp line, then ``rule <name>:`` or
``localrule``/``checkpoint``, then indented ``input:``, ``output:``, ``log:``, ``jobid:``,
``reason:``, ``wildcards:``, ``resources:`` lines) and, for every job that ends, a timestamp and
``Finished jobid: …``.  A block ends at the first line that is not indented: Snakemake 9 (the locked
9.27) writes no blank line after it, older versions did (a blank line ends it too).  The job's own
lines follow at once.  This filter drops the blocks, and passes every other line on at once:
each step's own lines (a model job's answers as they come), Snakemake's ``N of M steps (P%) done``,
warnings, ``Error in rule …`` blocks and the end-of-run summary.  Snakemake's own log under
``.snakemake/log/`` keeps every line (the run is not started with ``--quiet``).

With ``--plan PATH`` (written by ``tools/eta.py --plan-file PATH`` before the run) it also prints the
run's progress, :class:`ragmi.run_progress.RunProgress`: answers done and left and the time left at
this run's measured rate, at least every 30 s at a terminal (``RAGMI_CONSOLE=tty``) and every 60 s in a
log while model answers are awaited, and after as long a silence at any other time.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

TIMESTAMP = re.compile(r"^\[(Mon|Tue|Wed|Thu|Fri|Sat|Sun) .*\d\]$")
JOB_BLOCK = re.compile(r"^(local)?(rule|checkpoint) \S+:$")
FINISHED = re.compile(r"^Finished jobid: \d+")


def filtered(lines: Iterable[str]) -> Iterator[str]:
    """The lines of ``lines`` (each with its newline) without Snakemake's job blocks."""
    held = None  # a timestamp line, kept back until the next line says what it belongs to
    in_block = False
    for line in lines:
        text = line.rstrip("\n")
        if in_block:
            if text.strip() == "":
                in_block = False
                continue
            if text[:1] in (" ", "\t"):  # an indented line of the block (input:, reason:, ...)
                continue
            in_block = False  # the first line after the block: the job's own output, or Snakemake's
        if TIMESTAMP.match(text):
            if held is not None:
                yield held
            held = line
            continue
        if JOB_BLOCK.match(text):
            held, in_block = None, True
            continue
        if FINISHED.match(text):
            held = None
            continue
        if held is not None:
            yield held
            held = None
        yield line
    if held is not None:
        yield held


def lines_with_ticks(fd: int, tick_s: float = 1.0) -> Iterator[str | None]:
    """The lines read from ``fd`` as they come (each with its newline; a last line without one at the
    end), and None whenever ``tick_s`` passed without a whole line."""
    buf = b""
    while True:
        ready, _, _ = select.select([fd], [], [], tick_s)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if buf:
                yield buf.decode("utf-8", "replace")
            return
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for line in whole:
            yield line.decode("utf-8", "replace") + "\n"
        if not whole:
            yield None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default=None, help="the run's plan, written by tools/eta.py --plan-file")
    args = parser.parse_args(argv)
    if args.plan is None:
        for line in filtered(iter(sys.stdin.readline, "")):
            sys.stdout.write(line)
            sys.stdout.flush()
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from ragmi.progress import is_interactive
    from ragmi.run_progress import RunProgress, read_plan

    plan = read_plan(args.plan)
    logs = Path(plan["root"]) / "logs" if plan and plan.get("root") else None
    interactive = os.environ.get("RAGMI_CONSOLE") == "tty" or is_interactive(sys.stdout)
    run = RunProgress(plan, interactive=interactive, logs_dir=logs)
    source = lines_with_ticks(sys.stdin.fileno())

    def incoming() -> Iterator[str]:
        # the lines as they come; between them, the run line whenever one is due
        for item in source:
            if item is None:
                line = run.tick()
                if line is not None:
                    sys.stdout.write(line + "\n")
                    sys.stdout.flush()
                continue
            yield item

    for line in filtered(incoming()):
        run.observe(line)
        sys.stdout.write(line)
        sys.stdout.flush()
        due = run.tick()  # a busy console gets its run line too
        if due is not None:
            sys.stdout.write(due + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
