"""A Chroma server from the chromadb wheel (``chroma run``) on 127.0.0.1, started and stopped by the
tests (tests/test_stores.py, tests/test_stores_e2e.py). Skips with one reason where chromadb is not
installed (requirements/stores.txt)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def chroma_server(path, log_path):
    pytest.importorskip("chromadb", reason="chromadb is not installed (requirements/stores.txt)")
    port = free_port()
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    code = "import sys; from chromadb.cli.cli import app; sys.argv = ['chroma'] + sys.argv[1:]; app()"
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"chroma run did not start: {open(log_path).read()[-2000:]}") from None
                time.sleep(0.3)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def user_collection(port, name="user-docs", n=30, dim=384, seed=0):
    """A collection holding ``n`` documents of the 'user's' own, created with Chroma's defaults."""
    import chromadb
    import numpy as np
    from chromadb.config import Settings

    client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
    col = client.create_collection(name, metadata={"hnsw:space": "cosine"})
    rng = np.random.default_rng(seed)
    if n:
        col.add(
            ids=[f"user-{i:03d}" for i in range(n)],
            documents=[f"user document {i}" for i in range(n)],
            embeddings=rng.normal(size=(n, dim)).astype("float32"),
        )
    return col
