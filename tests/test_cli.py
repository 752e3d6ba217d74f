"""``python -m ragmi``'s habits, run as a user runs them (a subprocess): help on stdout, a named error
for an unknown command, ``--version``, plain-text help with a help string for every option, the
``summary`` command's dispatch, and ``ragmi gate --limits FILE`` (or ``--configfile FILE``) with a
file that holds only a ``gate:`` section, its console lines rounded and gate.json at full precision."""

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from test_gate import write_tables

import ragmi.__main__ as cli

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("serve-target", "gate", "store-cleanup")  # summary's options are ragmi.report.run_summary's


def ragmi(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ragmi", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},  # this checkout's ragmi
        timeout=300,
    )


def test_help_goes_to_stdout_and_exits_0():
    for flag in ("--help", "-h"):
        proc = ragmi(flag)
        assert proc.returncode == 0 and proc.stderr == ""
        assert proc.stdout.startswith("usage: ragmi ")
        for command in (*SUBCOMMANDS, "summary", "--version"):
            assert f"  {command} " in proc.stdout
    summary = next(ln for ln in proc.stdout.splitlines() if ln.startswith("  summary "))
    assert summary.split(None, 1)[1] == (
        "print the verdict table of a finished run and the paths of its results (results/run.json)"
    )


def test_an_unknown_command_is_named_on_stderr_and_exits_2():
    proc = ragmi("bogus")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ragmi: unknown command 'bogus'\n")
    assert "usage: ragmi " in proc.stderr and "  gate " in proc.stderr
    proc = ragmi()  # no command
    assert proc.returncode == 2 and proc.stderr.startswith("ragmi: a command is required\n")


def test_version_is_the_package_version():
    proc = ragmi("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ragmi {importlib.metadata.version('ragmi')}\n"


def test_version_falls_back_to_pyproject(monkeypatch):
    # run from a source tree where ragmi is not installed (PYTHONPATH=src)
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    expected = re.search(r'(?m)^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert cli.version() == expected


def _options_without_help(text: str) -> list[str]:
    """The options of an argparse --help text that have no help string."""
    section = text.split("\noptions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    missing = []
    for i, line in enumerate(section):
        if not line.startswith("  -"):
            continue
        invocation, _, rest = line.strip().partition("  ")
        following = section[i + 1] if i + 1 < len(section) else ""
        continued = following.startswith(" " * 6) and not following.lstrip().startswith("-")  # help on the next line
        if not rest.strip() and not continued:
            missing.append(invocation)
    return missing


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_option_has_plain_help(command):
    proc = ragmi(command, "--help")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith(f"usage: ragmi {command} ")
    assert _options_without_help(proc.stdout) == []
    assert "``" not in proc.stdout and ":func:" not in proc.stdout  # no reStructuredText


def test_the_help_check_sees_an_option_without_help():
    import argparse

    ap = argparse.ArgumentParser(prog="x")
    ap.add_argument("--port", type=int)
    ap.add_argument("--host", help="address")
    assert _options_without_help(ap.format_help()) == ["--port PORT"]


def test_summary_dispatches_to_run_summary(monkeypatch):
    # ragmi.report.run_summary is imported when the command runs, so the CLI works before it exists
    calls = []
    fake = types.ModuleType("ragmi.report.run_summary")
    fake.main = lambda argv: calls.append(argv) or 5
    monkeypatch.setitem(sys.modules, "ragmi.report.run_summary", fake)
    assert cli.main(["summary", "--results", "r"]) == 5 and calls == [["--results", "r"]]


# the gate with a limits file alone


@pytest.fixture
def run_dir(tmp_path):
    """A run of the embedded default: its tables (target qwen-rag), an AUC interval with many digits."""
    tables = tmp_path / "results" / "tables"
    write_tables(tables)
    for f in tables.glob("*.csv"):
        f.write_text(f.read_text().replace("prod", "qwen-rag"))
    summary = tables / "summary.csv"
    summary.write_text(summary.read_text().replace(",0.62,0.91,", ",0.6212345,0.91346789,", 1))
    return tmp_path


LEAK = {"id": "leak", "metric": "auc_hi", "max": 0.8, "target": "qwen-rag", "attack": "rag_mia"}


def _check_breach(proc, run_dir):
    assert proc.returncode == 1, proc.stderr
    breach = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragmi gate: BREACH leak:")]
    assert len(breach) == 1
    assert "AUC 95% CI upper end 0.913 > max 0.8 (n = 20+20); AUC 0.77 [0.621, 0.913]" in breach[0]
    doc = json.loads((run_dir / "results/gate/gate.json").read_text())
    (cell,) = [c for c in doc["cells"] if c["limit"] == "leak"]
    assert cell["status"] == "breach" and cell["value"] == 0.91346789  # full precision in the JSON


def test_gate_with_a_limits_file_alone(run_dir):
    (run_dir / "limits.yaml").write_text(yaml.safe_dump({"gate": {"limits": [LEAK]}}))
    _check_breach(ragmi("gate", "--limits", "limits.yaml", cwd=run_dir), run_dir)


def test_gate_with_a_configfile_holding_only_the_gate(run_dir):
    (run_dir / "gate.yaml").write_text(yaml.safe_dump({"gate": {"limits": [LEAK]}}))
    _check_breach(ragmi("gate", "--configfile", "gate.yaml", cwd=run_dir), run_dir)


def test_gate_refuses_a_limits_file_with_other_sections(run_dir):
    (run_dir / "limits.yaml").write_text(yaml.safe_dump({"gate": {"limits": [LEAK]}, "seed": 1}))
    proc = ragmi("gate", "--limits", "limits.yaml", cwd=run_dir)
    assert proc.returncode == 2
    assert proc.stderr == (
        "ragmi: limits file limits.yaml must hold a gate: section only (gate: {limits: [...]}), not seed: "
        "pass those with --configfile\n"
    )
