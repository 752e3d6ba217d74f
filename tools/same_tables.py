#!/usr/bin/env python3
"""Assert that two runs wrote the same tables and figures: every file under ``tables/`` and ``figures/``
of the first results folder is byte-identical in the second (files only the second has are listed, not
compared: a change that adds a table keeps every existing one).  Exit 0 when all are identical, 1
otherwise, 2 on bad input.  For a refactoring that must not change behaviour:

    git worktree add /tmp/before <old commit>; (cd /tmp/before && snakemake --cores all)
    git worktree add /tmp/after <new commit>;  (cd /tmp/after && snakemake --cores all)
    python tools/same_tables.py /tmp/before/results /tmp/after/results
"""

from __future__ import annotations

import argparse
import filecmp
import sys
from pathlib import Path

PARTS = ("tables", "figures")


def files_under(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for part in PARTS
        if (root / part).is_dir()
        for p in (root / part).rglob("*")
        if p.is_file()
    )


def compare(before: Path, after: Path) -> tuple[list[str], list[str], list[str]]:
    """(identical, differing or missing in ``after``, only in ``after``) relative paths."""
    old, new = files_under(before), files_under(after)
    same, differ = [], []
    for f in old:
        ok = (after / f).is_file() and filecmp.cmp(before / f, after / f, shallow=False)
        (same if ok else differ).append(f)
    return same, differ, sorted(set(new) - set(old))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the first run's results folder")
    ap.add_argument("after", type=Path, help="the second run's results folder")
    args = ap.parse_args(argv)
    for p in (args.before, args.after):
        if not p.is_dir():
            print(f"same_tables: {p} is not a folder", file=sys.stderr)
            return 2
    same, differ, extra = compare(args.before, args.after)
    if not same and not differ:
        print(f"same_tables: {args.before} has no tables or figures", file=sys.stderr)
        return 2
    for f in differ:
        print(f"differs: {f}")
    print(
        f"{len(same)} of {len(same) + len(differ)} files identical"
        + (f"; only in the second: {', '.join(extra)}" if extra else "")
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
