"""Shared pieces of the store adapters' tests (Qdrant, pgvector): the member sample, a seeded fake
embedder, and an insert killed in the middle for the SIGKILL tests.

:func:`start_insert` runs ``insert_members`` in a child process against the store ``spec``
(20 members of 16-dimensional vectors, two a batch, slowly) and returns once the manifest says at
least ``n_inserted`` are in; the test then sends SIGKILL and checks ``store-cleanup``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

SRC = Path(__file__).resolve().parents[1] / "src"
DIM = 16  # the vectors' dimension in both adapters' tests


def members(n=10) -> pd.DataFrame:
    return pd.DataFrame(
        {"doc_id": [f"d{i}" for i in range(n)], "text": [f"member text {i}" for i in range(n)], "title": ""}
    )


def fake_embed(texts) -> np.ndarray:
    return np.random.default_rng(len(texts)).normal(size=(len(texts), DIM)).astype("float32")


KILLED = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, pandas as pd
    from ragmi.stores import open_store
    from ragmi.stores.base import insert_members
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(20)], "text": [f"t{i}" for i in range(20)]})
    def embed(texts):
        time.sleep(0.5)
        return np.ones((len(texts), int(sys.argv[3])), dtype="float32")
    insert_members(open_store("s", json.loads(sys.argv[1])), docs, sys.argv[2], target="t", dataset="d", seed=1,
                   embed=embed, batch_size=2)
    time.sleep(600)  # 'generation': killed before it ends
    """
)


def child_env() -> dict:
    """The environment of a child process that imports this checkout's ragmi."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), *sys.path]))


def start_insert(spec: dict, manifest: Path, n_inserted: int = 4, timeout_s: float = 90) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", KILLED, json.dumps(spec), str(manifest), str(DIM)], env=child_env())
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if manifest.exists() and len(json.loads(manifest.read_text())["inserted"]) >= n_inserted:
            break
        time.sleep(0.1)
    return proc
