"""Vector stores of the user's own RAG service, and the controlled membership game played in them
(docs/vector-stores.md).

``REGISTRY`` maps a store's ``kind`` (``stores.<s>.kind`` in the config) to its adapter class, a
:class:`~ragmi.stores.base.Store`. Only Chroma is built (``ragmi.stores.chroma``); the Qdrant and
pgvector adapters are not, for the reasons docs/vector-stores.md gives.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import chroma
from .base import Store

REGISTRY: dict[str, type[Store]] = {"chroma": chroma.ChromaStore}


def open_store(name: str, spec: Mapping) -> Store:
    """The adapter of the validated ``stores.<name>`` entry ``spec`` (connected)."""
    return REGISTRY[spec["kind"]](name, spec)
