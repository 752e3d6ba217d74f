"""The local schedule of the embedded default, from Snakemake's dry run: the model jobs and the jobs
they need come first (priorities), and prepare_model, which starts the shared vLLM server
(generation.start_server_early), declares no threads so that the corpus and index jobs run beside it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dry_run(workdir: Path, *extra: str) -> dict[str, dict[str, str]]:
    """rule -> {'priority': ..., 'threads': ...} of the first job of each rule in the dry run."""
    r = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir)]
        + ["-n", "--cores", "2", "--configfile", str(ROOT / "config" / "config.yaml"), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:\n)", r.stdout):
        m = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):\n", block)
        if m and m.group(1) not in jobs:
            jobs[m.group(1)] = dict(re.findall(r"^\s+(priority|threads): (\d+)$", block, re.M))
    return jobs


def test_model_jobs_and_their_inputs_come_before_the_one_core_jobs(tmp_path):
    # with an attack whose queries the attacker LLM writes offline (rule prepare), which the default lacks
    ia = tmp_path / "ia.yaml"
    ia.write_text("attacks:\n  ia: {n_questions: 2}\n")
    jobs = dry_run(tmp_path / "w", "--configfile", str(ROOT / "config" / "config.yaml"), str(ia))
    assert jobs["prepare_model"] == {"priority": "3", "threads": "0"}
    assert jobs["prepare"]["priority"] == "2" and jobs["queries"]["priority"] == "2"
    for rule in ("corpus", "split", "index", "canaries"):
        assert jobs[rule]["priority"] == "1", rule
    assert jobs["canaries"]["threads"] == "2"
    # the one-core jobs after the model jobs keep the default priority (0: not printed)
    for rule in ("score", "metrics", "table", "leakage", "attack_figures"):
        assert "priority" not in jobs[rule] and jobs[rule].get("threads", "1") == "1", rule


def test_prepare_model_takes_a_core_when_it_starts_no_server(tmp_path):
    override = tmp_path / "late.yaml"
    override.write_text("generation:\n  start_server_early: false\n")
    jobs = dry_run(tmp_path / "w", "--configfile", str(ROOT / "config" / "config.yaml"), str(override))
    assert jobs["prepare_model"].get("threads", "1") == "1"  # Snakemake prints threads other than 1
