"""A LlamaIndex query engine as a python target.

``from_query_engine(engine)`` returns the per-query callable of ``targets.<t>.python``: it calls
``engine.query(query)`` and reads the ``Response``: its text (``response``; None, which LlamaIndex
returns when nothing was synthesised, is an empty answer) and the ids of its ``source_nodes``
(``NodeWithScore``, https://docs.llamaindex.ai/en/stable/module_guides/querying/response_synthesizers/):
each node's ``metadata[id_key]``, else the id of the document it was parsed from
(``ref_doc_id``), else its own ``node_id``.  LlamaIndex's query engines do not pass the LLM's
log-probabilities into the ``Response``, so such a target is a black box (``logprobs: false``).
"""

from __future__ import annotations

from collections.abc import Callable


def node_ids(source_nodes, id_key: str) -> list[str]:
    ids = []
    for n in source_nodes or []:
        node = getattr(n, "node", n)
        meta = getattr(node, "metadata", None) or {}
        value = meta.get(id_key) or getattr(node, "ref_doc_id", None) or getattr(node, "node_id", None)
        if value is None:
            raise ValueError(f"a source node has neither metadata[{id_key!r}], a ref_doc_id nor a node_id")
        ids.append(str(value))
    return ids


def response_result(resp, *, id_key: str = "id") -> dict:
    """What one ``engine.query`` returned, in the python target's contract."""
    if not hasattr(resp, "source_nodes"):
        raise ValueError(f"the query engine returned a {type(resp).__name__}, not a Response with source_nodes")
    text = getattr(resp, "response", None)
    return {"answer": "" if text is None else str(text), "retrieved_ids": node_ids(resp.source_nodes, id_key)}


def from_query_engine(engine, *, id_key: str = "id") -> Callable:
    """The per-query callable of a LlamaIndex query engine (see the module's docstring)."""

    def run(query: str) -> dict:
        return response_result(engine.query(query), id_key=id_key)

    return run
