"""Where a run's time went: the per-job times Snakemake wrote under results/benchmarks/, summed per rule.

    python tools/bench_summary.py [results/benchmarks] [--top N]

Prints the total job-seconds, one line per rule (jobs, seconds) and the N slowest jobs.  With two
cores and mostly serial jobs the total is close to the run's wall time.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path


def job_times(root: Path) -> list[tuple[float, str]]:
    rows = []
    for f in sorted(root.rglob("*.tsv")):
        with f.open() as fh:
            first = next(csv.DictReader(fh, delimiter="\t"), None)
        if first is not None:
            rows.append((float(first["s"]), str(f.relative_to(root))))
    return rows


def summary(rows: list[tuple[float, str]], top: int) -> list[str]:
    per_rule: dict[str, list[float]] = defaultdict(list)
    for seconds, name in rows:
        per_rule[name.split("/")[0]].append(seconds)
    out = [f"total job-seconds {sum(s for s, _ in rows):.0f} in {len(rows)} jobs"]
    for rule, times in sorted(per_rule.items(), key=lambda kv: -sum(kv[1])):
        out.append(f"{rule:24s} {len(times):4d} jobs {sum(times):8.1f} s")
    out.append("")
    out += [f"{s:7.1f} s  {name}" for s, name in sorted(rows, reverse=True)[:top]]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default="results/benchmarks")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        print(f"ragmi: no benchmark directory {root} (run the pipeline first)", file=sys.stderr)
        return 1
    print("\n".join(summary(job_times(root), args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
