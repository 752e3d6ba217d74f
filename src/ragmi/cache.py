"""Content-addressed response cache: (backend, model, messages, sampling parameters) -> response.

One JSON file per key under ``<dir>/<k[:2]>/<k>.json``, written atomically (:mod:`ragmi.io`), so
concurrent shard jobs, on one machine or on a cluster's shared file system, can share it safely.  A
rerun, or another attack that sends the same prompt, never queries the model twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .io import atomic_write_text


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
