"""End to end: a tiny SmolLM2 run with gate.enabled, then `python -m ragmi gate` on its tables.

One pipeline run serves both outcomes: the run's own limits (rule gate) are breached, so the command
that reads the rule's gate.json exits 1 and its SARIF names the target and the attack; a second config
with limits the same tables pass is evaluated by the command on the same results and exits 0. The
tiny model answers every black-box question "No.": that cell is uninformative, so no limit is decided
on it (never a pass); the clean config says so with fail_on_no_evidence: false.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_snakemake
from test_gate import assert_valid_junit, assert_valid_sarif
from test_pipeline_e2e import tiny_config

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

BREACHED = [
    {"id": "leak", "metric": "auc_hi", "max": 0.01, "target": "t", "attack": "rag_mia"},
    {"id": "canaries", "metric": "canary_rate", "max": 0.5},  # this config builds no canaries table
]
CLEAN = [
    {"id": "auc-ceiling", "metric": "auc_hi", "max": 1.0, "target": "t", "attack": "rag_mia"},
    {"id": "auc-floor", "metric": "auc_lo", "min": 0.0},
]


def gate_cmd(work, *args):
    return subprocess.run(
        [sys.executable, "-m", "ragmi", "gate", "--results", "results", *args],
        capture_output=True,
        text=True,
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},  # this checkout's ragmi
    )


@pytest.fixture(scope="module")
def gated_run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("gate_e2e")
    cfg = tiny_config(Path(smollm2_dir).parent, gate={"enabled": True, "limits": BREACHED})
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(work, "--configfile", str(work / "config.yaml"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    clean = dict(cfg, gate={"enabled": True, "limits": CLEAN, "fail_on_no_evidence": False})
    (work / "clean.yaml").write_text(yaml.safe_dump(clean))
    return work


def test_a_breach_fails_the_gate_but_not_the_run(gated_run):
    work = gated_run
    assert (work / "results/tables/summary.csv").is_file()  # the tables were built despite the breach
    assert (work / "results/benchmarks/gate.tsv").is_file()
    assert "ragmi gate: FAIL: " in (work / "logs/gate.log").read_text()
    proc = gate_cmd(work)
    assert proc.returncode == 1, proc.stderr
    breaches = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragmi gate: BREACH leak:")]
    assert breaches and all("target t" in ln and "attack rag_mia" in ln for ln in breaches)
    assert any("NO EVIDENCE canaries:" in ln and "was not built" in ln for ln in proc.stderr.splitlines())
    doc = json.loads((work / "results/gate/gate.sarif").read_text())
    assert_valid_sarif(doc)
    found = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "leak" and r["properties"]["status"] == "breach"]
    assert found and all(r["level"] == "error" and r["properties"]["target"] == "t" for r in found)
    assert {r["properties"]["attack"] for r in found} == {"rag_mia"}
    assert all(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "results/tables/summary.csv" for r in found
    )
    assert_valid_junit((work / "results/gate/junit.xml").read_bytes())
    verdict = json.loads((work / "results/gate/gate.json").read_text())
    assert verdict["verdict"] == "fail" and verdict["counts"]["breach"] == len(found)


def test_clean_limits_on_the_same_tables_pass(gated_run):
    work = gated_run
    proc = gate_cmd(work, "--configfile", "clean.yaml", "--out", "clean_gate")
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads((work / "clean_gate/gate.json").read_text())
    assert verdict["verdict"] == "pass" and verdict["counts"]["breach"] == 0
    assert verdict["counts"]["pass"] >= 2
    # the uninformative black-box cell is no evidence, named as such, not a pass
    unread = [c for c in verdict["cells"] if c["status"] == "no evidence"]
    assert len(unread) == verdict["counts"]["no evidence"]
    assert all(c["variant"] == "rag_mia/black/t2" and "not informative" in c["message"] for c in unread)
    assert sum(ln.startswith("ragmi gate: no evidence (not failing)") for ln in proc.stderr.splitlines()) == len(unread)
    doc = json.loads((work / "clean_gate/gate.sarif").read_text())
    assert_valid_sarif(doc)
    assert all(r["level"] == "none" for r in doc["runs"][0]["results"])
    assert_valid_junit((work / "clean_gate/junit.xml").read_bytes())
