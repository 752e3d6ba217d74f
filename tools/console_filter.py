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
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator

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


def main() -> int:
    for line in filtered(iter(sys.stdin.readline, "")):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
