"""Retrieval indexes over the member documents.

* Dense: sentence-transformers embeddings in FAISS: ``flat_ip`` (exact inner product on
  L2-normalised vectors, i.e. cosine), ``flat_l2`` (exact Euclidean) or ``hnsw`` (HNSW graph, inner
  product on normalised vectors, built with one thread so the graph is identical run to run).
* Sparse: BM25 via ``bm25s``.

A document's database text (:func:`document_text`) is ``"<title>\\n<text>"`` when the corpus gives it
a title and the target indexes titles (``targets.<name>.with_titles``), else its text; the RAG context
holds the same text (``ragmi.rag.factory``).  Dense retrievers with an E5 embedder encode
``"passage: "`` + document and ``"query: "`` + query (:func:`text_prefixes`).

Choices and their sources: docs/provenance.md#retrievers.  An index directory holds the index
file(s), ``ids.parquet`` (row -> doc_id) and ``meta.json`` (with ``with_titles`` and the prefixes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..embedder import Embedder
from ..errors import ConfigError
from ..io import atomic_dir
from ..schema import section_params


@dataclass(frozen=True)
class RetrieverSpec:
    """One ``retrievers`` entry of the config, every key filled (see config/schema.yaml)."""

    kind: str  # "dense" | "bm25"
    index: str
    embedder: str
    hnsw_m: int
    hnsw_ef_search: int
    max_seq_length: int
    text_prefixes: str  # "auto" | "e5" | "none"

    @classmethod
    def from_config(cls, name: str, cfg: dict) -> RetrieverSpec:
        """Validate ``cfg`` (``retrievers.<name>``) against the schema, which also fills its defaults."""
        return cls(**section_params("retrievers", cfg, where=f"retrievers.{name}"))

    @classmethod
    def from_validated(cls, cfg: Mapping) -> RetrieverSpec:
        """A ``retrievers`` entry of a validated configuration (every key filled), taken as it is."""
        return cls(**{f.name: cfg[f.name] for f in dataclasses.fields(cls)})


# The dense indexes whose score is the cosine similarity: L2-normalised vectors searched by inner product.
COSINE_INDEXES = ("flat_ip", "hnsw")


def cosine_scores(retriever: Mapping) -> bool:
    """Whether a retriever (a ``retrievers`` entry of the config) scores by cosine similarity: a dense
    one with an index of :data:`COSINE_INDEXES`.  BM25 scores and ``flat_l2``'s negated squared
    distances (unnormalised vectors) are no cosines."""
    return retriever.get("kind") == "dense" and retriever.get("index") in COSINE_INDEXES


# An E5 model by name: intfloat/e5-base-v2, intfloat/multilingual-e5-large, e5-small, ...
E5_NAME = re.compile(r"(^|[/_-])(multilingual-)?e5([-_.]|$)", re.IGNORECASE)


def text_prefixes(spec: RetrieverSpec) -> tuple[str, str]:
    """(query prefix, passage prefix) of the retriever: E5's ``"query: "`` / ``"passage: "`` for a dense
    retriever whose embedder is an E5 model (``text_prefixes: auto``) or is declared one (``e5``),
    else none.  E5 was trained with these prefixes; without them its similarities degrade."""
    if spec.kind != "dense" or spec.text_prefixes == "none":
        return "", ""
    if spec.text_prefixes == "e5" or E5_NAME.search(spec.embedder):
        return "query: ", "passage: "
    return "", ""


def document_text(title, text, with_titles: bool) -> str:
    """A document as the retrieval database holds it: ``"<title>\\n<text>"`` when ``with_titles`` and
    the document has a title, else its text."""
    title = "" if title is None or title is pd.NA or title != title else str(title).strip()
    return f"{title}\n{text}" if with_titles and title else str(text)


def database_texts(docs: pd.DataFrame, with_titles: bool) -> list[str]:
    """:func:`document_text` of every row of ``docs`` (doc_id, text[, title])."""
    titles = docs["title"] if "title" in docs.columns else [""] * len(docs)
    return [document_text(t, x, with_titles) for t, x in zip(titles, docs["text"])]


def database_documents(docs: pd.DataFrame, with_titles: bool) -> dict:
    """{doc_id: database text} of ``docs``: what the target puts in the RAG context, the same text
    the index holds."""
    return dict(zip(docs["doc_id"].astype(str), database_texts(docs, with_titles)))


def reusable_vectors(index_dir: str | os.PathLike | None, meta: dict, log=print) -> dict[str, np.ndarray]:
    """{doc_id: vector} of a dense index built with the same embedder, prefixes, titles and
    normalisation as ``meta`` describes (empty when ``index_dir`` is None or differs).  The negative
    control's database (rule ``index_null``) shares most documents with the target's; their vectors
    are taken from the target's index instead of being computed again (13 s of the embedded default's
    start, beside vLLM's start-up), so both indexes hold the very same vectors for them."""
    if index_dir is None:
        return {}
    d = Path(index_dir)
    try:
        other = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    keys = ("kind", "embedder", "normalized", "passage_prefix", "with_titles")
    if any(other.get(k) != meta.get(k) for k in keys):
        setting = {k: other.get(k) for k in keys}
        log(f"not reusing {d}: built with {setting}")
        return {}
    import faiss

    ids = pd.read_parquet(d / "ids.parquet")["doc_id"].astype(str).tolist()
    index = faiss.read_index(str(d / "index.faiss"))
    vecs = index.reconstruct_n(0, index.ntotal)
    return dict(zip(ids, vecs))


def build_index(
    docs: pd.DataFrame,
    spec: RetrieverSpec,
    out_dir: str | os.PathLike,
    *,
    with_titles: bool,
    reuse_from: str | os.PathLike | None = None,
    log=print,
) -> dict:
    """Index ``docs`` (doc_id, text, title) into ``out_dir`` atomically; return its meta.

    ``with_titles``: index ``"<title>\\n<text>"`` for documents with a title (:func:`document_text`).
    ``reuse_from``: a dense index of the same setting whose vectors are reused for the documents it
    holds (:func:`reusable_vectors`)."""
    ids = docs["doc_id"].astype(str).tolist()
    texts = database_texts(docs, with_titles)
    query_prefix, passage_prefix = text_prefixes(spec)
    meta = {
        "kind": spec.kind,
        "n": len(ids),
        "with_titles": bool(with_titles),
        "query_prefix": query_prefix,
        "passage_prefix": passage_prefix,
    }
    with atomic_dir(out_dir) as tmp:
        if spec.kind == "dense":
            import faiss

            normalize = spec.index != "flat_l2"
            meta.update(embedder=spec.embedder, normalized=normalize)
            known = reusable_vectors(reuse_from, meta, log)
            todo = [i for i, doc_id in enumerate(ids) if doc_id not in known]
            if known:
                log(f"reusing the vectors of {len(ids) - len(todo)} documents from {reuse_from}")
            if todo or not known:
                emb = Embedder(spec.embedder, max_seq_length=spec.max_seq_length)
                log(f"embedding {len(todo)} member documents with {spec.embedder}")
                new = emb.encode([passage_prefix + texts[i] for i in todo], normalize=normalize, progress=False)
            else:  # every document's vector is known
                new = np.zeros((0, len(next(iter(known.values())))), dtype=np.float32)
            vecs = np.zeros((len(ids), new.shape[1]), dtype=np.float32)
            vecs[todo] = new
            for i, doc_id in enumerate(ids):
                if doc_id in known:
                    vecs[i] = known[doc_id]
            d = vecs.shape[1]
            if spec.index == "flat_ip":
                index = faiss.IndexFlatIP(d)
            elif spec.index == "flat_l2":
                index = faiss.IndexFlatL2(d)
            else:
                faiss.omp_set_num_threads(1)  # deterministic HNSW graph
                index = faiss.IndexHNSWFlat(d, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.add(vecs)
            faiss.write_index(index, str(tmp / "index.faiss"))
            meta.update(index=spec.index, dim=int(d))
        else:
            import bm25s

            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            retriever.save(str(tmp / "bm25"))
            meta.update(index="bm25")
        pd.DataFrame({"doc_id": ids}).to_parquet(tmp / "ids.parquet", index=False)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


class Retriever:
    """Loads an index directory and answers top-k queries with (doc_id, score) lists.

    A dense retriever embeds each query on its own (never in a batch with others), so a query's
    vector, and hence its retrieval, is a function of its text alone, whatever shard or job it is in.
    With ``embedding_cache_dir`` the vectors are kept in a :class:`~ragmi.cache.EmbeddingCache`
    shared by every job, and the embedder is loaded only when a query is not in it."""

    def __init__(self, index_dir: str | os.PathLike, spec: RetrieverSpec, embedding_cache_dir=None):
        d = Path(index_dir)
        self.meta = json.loads((d / "meta.json").read_text())
        self.ids = pd.read_parquet(d / "ids.parquet")["doc_id"].tolist()
        self.spec = spec
        if self.meta["kind"] == "dense":
            import faiss

            self.index = faiss.read_index(str(d / "index.faiss"))
            if spec.index == "hnsw":
                self.index.hnsw.efSearch = spec.hnsw_ef_search
            self._embedder = None
            self.embedding_cache = None
            if embedding_cache_dir:
                from ..cache import EmbeddingCache

                setting = {
                    "embedder": self.meta["embedder"],
                    "max_seq_length": spec.max_seq_length,
                    "normalized": bool(self.meta["normalized"]),
                }
                self.embedding_cache = EmbeddingCache(embedding_cache_dir, setting)
        else:
            import bm25s

            self.bm25 = bm25s.BM25.load(str(d / "bm25"))
        # an index built before prefixes and titles were recorded was built without prefixes, untitled
        self.query_prefix = self.meta.get("query_prefix", "")
        self.with_titles = bool(self.meta.get("with_titles", False))

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.meta["embedder"], max_seq_length=self.spec.max_seq_length)
        return self._embedder

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """One float32 row per query (prefix added), each encoded alone, through the cache if any."""
        rows = []
        for x in queries:
            text = self.query_prefix + x
            vec = self.embedding_cache.get(text) if self.embedding_cache is not None else None
            if vec is None:
                vec = self.embedder.encode([text], normalize=self.meta["normalized"])[0]
                if self.embedding_cache is not None:
                    self.embedding_cache.put(text, vec)
            rows.append(vec)
        dim = self.index.d
        return np.ascontiguousarray(np.vstack(rows) if rows else np.zeros((0, dim)), dtype=np.float32)

    def search(self, queries: list[str], k: int) -> tuple[list[list[str]], list[list[float]]]:
        k = min(k, len(self.ids))
        if self.meta["kind"] == "dense":
            q = self.embed_queries(queries)
            scores, rows = self.index.search(q, k)
            if self.meta["index"] == "flat_l2":
                scores = -scores  # higher = closer, whatever the metric
        else:
            import bm25s

            toks = bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
            rows, scores = self.bm25.retrieve(toks, k=k, show_progress=False, n_threads=1)
        out_ids = [[self.ids[int(r)] for r in row if int(r) >= 0] for row in rows]
        out_scores = [[float(s) for s, r in zip(srow, row) if int(r) >= 0] for srow, row in zip(scores, rows)]
        return out_ids, out_scores

    def all_scores(self, queries: list[str]) -> list[np.ndarray]:
        """The score of every indexed document per query (aligned with ``self.ids``), on the scale of
        :meth:`search`: what a detector over the whole database needs (Mirabel).  Flat dense indexes
        only; an approximate (HNSW) or sparse index has no exact whole-database scores here."""
        if self.meta["kind"] != "dense" or self.meta["index"] not in ("flat_ip", "flat_l2"):
            raise ConfigError(
                f"retriever {self.spec.kind}/{self.meta['index']} cannot score the whole database "
                "(a defense that needs it requires a dense retriever with index flat_ip or flat_l2)"
            )
        if not hasattr(self, "_matrix"):
            self._matrix = self.index.reconstruct_n(0, self.index.ntotal)
        q = self.embed_queries(queries)
        if self.meta["index"] == "flat_ip":
            s = q @ self._matrix.T
        else:
            x = self._matrix
            s = -((q * q).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2 * q @ x.T)  # minus squared L2
        return [row.astype(np.float64) for row in s]
