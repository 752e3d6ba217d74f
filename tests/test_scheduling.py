"""The local schedule of the embedded default, from Snakemake's dry run: the model jobs and the jobs
they need come first (priorities), and prepare_model, which starts the shared vLLM server
(generation.start_server_early), declares no threads so that the corpus and index jobs run beside it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dry_run(workdir: Path, *extra: str, every: bool = False):
    """rule -> {'priority': ..., 'threads': ..., 'resources': ..., 'wildcards': ...} of the first job of
    each rule in the dry run (``every``: rule -> list of all its jobs)."""
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
        if m:
            job = dict(re.findall(r"^\s+(priority|threads): (\d+)$", block, re.M))
            job.update(re.findall(r"^\s+(resources|wildcards): (.*)$", block, re.M))
            jobs.setdefault(m.group(1), []).append(job)
    return jobs if every else {rule: js[0] for rule, js in jobs.items()}


def test_model_jobs_and_their_inputs_come_before_the_one_core_jobs(tmp_path):
    jobs = dry_run(tmp_path / "w")
    assert (jobs["prepare_model"]["priority"], jobs["prepare_model"]["threads"]) == ("3", "0")
    assert jobs["prepare"]["priority"] == "2" and jobs["queries"]["priority"] == "2"
    for rule in ("corpus", "split", "index", "canaries"):
        assert jobs[rule]["priority"] == "1", rule
    # the one-core jobs after the model jobs keep the default priority (0: not printed)
    for rule in ("score", "metrics", "table", "leakage", "attack_figures"):
        assert "priority" not in jobs[rule] and jobs[rule].get("threads", "1") == "1", rule


def test_prepare_model_takes_a_core_when_it_starts_no_server(tmp_path):
    override = tmp_path / "late.yaml"
    override.write_text("generation:\n  start_server_early: false\n")
    jobs = dry_run(tmp_path / "w", "--configfile", str(ROOT / "config" / "config.yaml"), str(override))
    assert jobs["prepare_model"].get("threads", "1") == "1"  # Snakemake prints threads other than 1


def test_model_jobs_of_a_cpu_server_take_one_core_and_one_model_slot(tmp_path):
    """The server does the model's work on its own threads: a generate, canary, hook-probe or prepare
    job declares one thread (a one-core job runs beside it) and takes the run's one model_slot
    (profiles/default/profile.yaml), except MBA's prepare, whose proxy LM runs inside the job."""
    jobs = dry_run(tmp_path / "w", every=True)
    for rule in ("canaries", "hook_inventory", "prepare"):  # generate comes after the queries checkpoint
        assert jobs[rule], rule
        for job in jobs[rule]:
            assert "model_slot=1" in job["resources"], (rule, job)
            if rule == "prepare" and "attack=mba" in job["wildcards"]:
                assert job["threads"] == "2", job
            else:
                assert job.get("threads", "1") == "1", (rule, job)
    for rule in ("score", "metrics", "index"):
        assert "model_slot" not in jobs[rule][0]["resources"], rule
    assert {j["wildcards"].split("attack=")[1] for j in jobs["prepare"]} >= {"mba", "ia"}
