"""Vector stores of the user's own RAG service, and the controlled membership game played in them
(docs/vector-stores.md).

``REGISTRY`` maps a store's ``kind`` (``stores.<s>.kind`` in the config) to its adapter class, a
:class:`~ragmi.stores.base.Store`: Chroma (``ragmi.stores.chroma``), Qdrant (``ragmi.stores.qdrant``) and
PostgreSQL with pgvector (``ragmi.stores.pgvector``). Each imports its client only when it connects.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import chroma, pgvector, qdrant
from .base import Store

REGISTRY: dict[str, type[Store]] = {
    "chroma": chroma.ChromaStore,
    "qdrant": qdrant.QdrantStore,
    "pgvector": pgvector.PgvectorStore,
}


def open_store(name: str, spec: Mapping) -> Store:
    """The adapter of the validated ``stores.<name>`` entry ``spec`` (connected)."""
    return REGISTRY[spec["kind"]](name, spec)
