"""Content-addressed caches shared by the jobs of a run.

* :class:`ResponseCache`: (backend, model, messages, sampling parameters) -> response.  One JSON file
  per key under ``<dir>/<k[:2]>/<k>.json``, written atomically (:mod:`ragmi.io`), so concurrent shard
  jobs, on one machine or on a cluster's shared file system, can share it safely.  A rerun, or another
  attack that sends the same prompt, never queries the model twice.
* :class:`EmbeddingCache`: (embedder, its settings, query text) -> float32 vector, one raw file per
  key laid out the same way.  The same attack queries reach every target that shares a
  retriever (defended targets, controls), so only the first generate job of an attack loads the
  embedder (about 6 s of imports and loading per job on a 2-core CPU).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .io import atomic_write_bytes, atomic_write_text


def request_key(model_id: str, request: dict) -> str:
    payload = json.dumps({"model": model_id, **request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: str | os.PathLike | None):
        self.dir = Path(directory) if directory else None
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if self.dir is None:
            self.misses += 1
            return None
        p = self._path(key)
        try:
            value = json.loads(p.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: dict) -> None:
        if self.dir is None:
            return
        atomic_write_text(json.dumps(value, ensure_ascii=False), self._path(key))


class EmbeddingCache:
    """Query embeddings of one embedder setting (``setting``: the embedder name, its maximum sequence
    length and whether vectors are normalised), stored as raw little-endian float32."""

    def __init__(self, directory: str | os.PathLike, setting: dict):
        self.dir = Path(directory)
        self.setting = json.dumps(setting, sort_keys=True)
        self.hits = 0
        self.misses = 0

    def _path(self, text: str) -> Path:
        key = hashlib.sha256(f"{self.setting}\n{text}".encode()).hexdigest()
        return self.dir / key[:2] / f"{key}.f32"

    def get(self, text: str) -> np.ndarray | None:
        try:
            vec = np.frombuffer(self._path(text).read_bytes(), dtype="<f4")
        except FileNotFoundError:
            self.misses += 1
            return None
        self.hits += 1
        return vec

    def put(self, text: str, vec: np.ndarray) -> None:
        atomic_write_bytes(np.asarray(vec, dtype="<f4").tobytes(), self._path(text))
