"""tools/console_filter.py: Snakemake's per-job blocks off the console of `make run`, every other line kept."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import console_filter  # noqa: E402

SNAKEMAKE_OUT = """\
Building DAG of jobs...
Using shell: /usr/bin/bash
[Fri Dec  4 15:27:11 2026]
localrule split:
    input: results/corpus/synthetic.parquet
    output: results/split/synthetic/members.parquet
    jobid: 5
    reason: Missing output files: results/split/synthetic/members.parquet
    resources: tmpdir=/tmp

[15:27:12 +   0.1s] split: 120 members, 80 non-members
[Fri Dec  4 15:27:13 2026]
Finished jobid: 5 (Rule: split)
1 of 89 steps (1%) done
[Fri Dec  4 15:27:14 2026]
rule generate:
    input: results/queries/synthetic/s2mia.shards/00000.parquet
    wildcards: dataset=synthetic, target=pad, attack=s2mia, shard=00000
    threads: 2

[15:28:55 +  57.5s]   generated 20/40 [generate/synthetic/pad/s2mia/00000] after 56 s
[Fri Dec  4 15:29:01 2026]
Error in rule generate:
    jobid: 7
    log: logs/generate/synthetic/pad/s2mia/00000.log (check log file(s) for error details)
"""


def test_job_blocks_are_dropped_and_everything_else_kept():
    out = "".join(console_filter.filtered(SNAKEMAKE_OUT.splitlines(keepends=True)))
    lines = out.splitlines()
    assert "localrule split:" not in lines and "rule generate:" not in lines and "    jobid: 5" not in lines
    assert "reason:" not in out and "Finished jobid" not in out and "wildcards:" not in out
    assert "split: 120 members, 80 non-members" in out and "1 of 89 steps (1%) done" in out
    assert "generated 20/40" in out
    # a failure is shown whole, with the timestamp before it
    assert "[Fri Dec  4 15:29:01 2026]\nError in rule generate:\n    jobid: 7\n    log: logs/generate" in out
    assert out.startswith("Building DAG of jobs...\nUsing shell: /usr/bin/bash\n[15:27:12")


def test_the_filter_passes_lines_through_a_pipe_as_they_come():
    p = subprocess.run(
        [sys.executable, str(ROOT / "tools/console_filter.py")], input=SNAKEMAKE_OUT, capture_output=True, text=True
    )
    assert p.returncode == 0 and "1 of 89 steps (1%) done" in p.stdout and "localrule" not in p.stdout
