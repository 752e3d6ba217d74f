"""Qdrant (https://qdrant.tech), reached with ``qdrant-client`` (``QdrantClient``): a server at
``stores.<s>.url`` or ``host:port`` (REST, default port 6333), or qdrant-client's local mode, a folder
(``stores.<s>.path``) that the client itself reads and writes with the same collection and point API.

- Point ids: Qdrant accepts only unsigned integers and UUIDs as point ids
  (https://qdrant.tech/documentation/concepts/points/), so the point id of ragmi's id ``i`` is the
  name-based ``uuid5(NAMESPACE, i)``, the same on every run and in ``store-cleanup``; the payload keeps
  ``i`` under ``<metadata_key>.ragmi_id``. ``existing`` maps back, so the refuse-before-any-write check,
  the count and the hash of the sorted ids (the collection's point ids as strings) work as for Chroma.
- Payload: the text under ``text_key`` and ragmi's metadata under ``metadata_key``; the defaults
  (``page_content``, ``metadata``) are LangChain's ``QdrantVectorStore`` layout.
- Embedder: a Qdrant collection records a vector size and distance, not a model. The embedder is
  ``stores.<s>.embedder``, else the collection's metadata key ``ragmi:embedder`` (collection metadata:
  ``create_collection(metadata=...)`` of qdrant-client 1.20); otherwise one ConfigError. The vector size
  of the collection (or of its named vector ``vector_name``) must equal the embedder's dimension.
- API key: read from the environment variable that ``api_key_env`` names, never from the config, and
  never written to the manifest, the results or a log.
- ``upsert`` overwrites an existing point silently, so :func:`ragmi.stores.base.insert_members`'s check
  for existing ids before any write is what keeps a user's point from being replaced.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping

import numpy as np

from ..errors import ConfigError, DataError
from .base import Store

METADATA_EMBEDDER_KEY = "ragmi:embedder"
# namespace of the name-based (uuid5) point ids of ragmi's ids
POINT_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_OID, "ragmi")


def point_id(ragmi_id: str) -> str:
    """The Qdrant point id (a UUID string) of one of ragmi's ids; deterministic."""
    return str(uuid.uuid5(POINT_ID_NAMESPACE, ragmi_id))


def api_key(name: str, spec: Mapping) -> str | None:
    var = spec.get("api_key_env")
    if not var:
        return None
    if not os.environ.get(var):
        raise ConfigError(f"config key stores.{name}.api_key_env: environment variable {var} is not set")
    return os.environ[var]


class QdrantStore(Store):
    kind = "qdrant"

    def __init__(self, name: str, spec: Mapping):
        super().__init__(name, spec)
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            raise ConfigError(
                f"config key stores.{name}.kind: qdrant needs qdrant-client (pip install -r requirements/stores.txt)"
            ) from None
        key = api_key(name, spec)
        self.client = None
        try:
            if spec.get("path"):
                self.client = QdrantClient(path=str(spec["path"]))
            elif spec.get("url"):
                self.client = QdrantClient(url=spec["url"], api_key=key, timeout=30)
            else:
                self.client = QdrantClient(host=spec["host"], port=spec["port"], api_key=key, timeout=30)
            self.info = self.client.get_collection(spec["collection"])
            self.vector_name, self.size = self._vector_params()
        except ConfigError:
            self.close()
            raise
        except Exception as e:  # noqa: BLE001 - an unreachable server or missing collection: one sentence
            self.close()
            raise DataError(f"store {name!r} ({self.where()}): {type(e).__name__}: {e}") from None

    def _vector_params(self) -> tuple[str | None, int]:
        vectors = self.info.config.params.vectors
        want = self.spec.get("vector_name")
        col = self.spec["collection"]
        if isinstance(vectors, Mapping):
            if want in vectors:
                return want, int(vectors[want].size)
            if not want and "" in vectors:
                return "", int(vectors[""].size)
            raise ConfigError(
                f"config key stores.{self.name}.vector_name: collection {col!r} has the named vectors "
                f"{', '.join(sorted(vectors)) or 'none'}; name the one the service searches"
                + (f" ({want!r} is not one of them)" if want else "")
            )
        if vectors is None:
            raise ConfigError(f"store {self.name!r}: collection {col!r} has no dense vector")
        if want:
            raise ConfigError(
                f"config key stores.{self.name}.vector_name: collection {col!r} has one unnamed vector; remove vector_name"
            )
        return None, int(vectors.size)

    def where(self) -> str:
        s = self.spec
        if s.get("path"):
            at = f"local folder {s['path']}"
        elif s.get("url"):
            at = s["url"]
        else:
            at = f"http://{s['host']}:{s['port']}"
        return f"qdrant {at} collection {s['collection']}"

    def manifest_spec(self) -> dict:
        keys = ("kind", "host", "port", "url", "path", "api_key_env", "collection", "vector_name", "id_prefix")
        return {k: self.spec.get(k) for k in keys}

    def count(self) -> int:
        return int(self.client.count(self.spec["collection"], exact=True).count)

    def all_ids(self) -> list[str]:
        ids: list[str] = []
        offset = None
        while True:
            points, offset = self.client.scroll(
                self.spec["collection"], limit=1000, offset=offset, with_payload=False, with_vectors=False
            )
            ids += [str(p.id) for p in points]
            if offset is None:
                return ids

    def existing(self, ids: list[str]) -> list[str]:
        found: set[str] = set()
        for lo in range(0, len(ids), 500):
            pids = [point_id(i) for i in ids[lo : lo + 500]]
            recs = self.client.retrieve(self.spec["collection"], ids=pids, with_payload=False, with_vectors=False)
            found |= {str(r.id) for r in recs}
        return [i for i in ids if point_id(i) in found]

    def add(self, ids, texts, embeddings: np.ndarray, metadatas) -> None:
        from qdrant_client import models

        vecs = np.asarray(embeddings, dtype=np.float32)
        self.check_dimension(vecs.shape[1])
        text_key, meta_key = self.spec.get("text_key") or "page_content", self.spec.get("metadata_key") or "metadata"
        points = [
            models.PointStruct(
                id=point_id(i),
                vector={self.vector_name: v.tolist()} if self.vector_name is not None else v.tolist(),
                payload={text_key: t, meta_key: {**m, "ragmi_id": i}},
            )
            for i, t, v, m in zip(ids, texts, vecs, metadatas)
        ]
        self.client.upsert(self.spec["collection"], points=points, wait=True)

    def delete(self, ids) -> None:
        from qdrant_client import models

        self.client.delete(
            self.spec["collection"], points_selector=models.PointIdsList(points=[point_id(i) for i in ids]), wait=True
        )

    def embedder_name(self) -> str:
        if self.spec.get("embedder"):
            return self.spec["embedder"]
        meta = getattr(self.info.config, "metadata", None) or {}
        if METADATA_EMBEDDER_KEY in meta:
            return str(meta[METADATA_EMBEDDER_KEY])
        raise ConfigError(
            f"config key stores.{self.name}.embedder: a Qdrant collection records no embedding model and "
            f"collection {self.spec['collection']!r} has no metadata key {METADATA_EMBEDDER_KEY!r}; name the "
            "embedder that wrote it"
        )

    def check_dimension(self, dim: int) -> None:
        if dim != self.size:
            vec = f" vector {self.vector_name!r}" if self.vector_name else ""
            raise ConfigError(
                f"config key stores.{self.name}.embedder: the embedder writes {dim}-dimensional vectors but "
                f"collection {self.spec['collection']!r}{vec} holds {self.size}-dimensional ones"
            )

    def close(self) -> None:
        """Release the client (local mode: the folder's lock, which one process holds at a time)."""
        if self.client is not None:
            self.client.close()
