"""Retrieval indexes over the member documents.

* Dense: sentence-transformers embeddings in FAISS: ``flat_ip`` (exact inner product on
  L2-normalised vectors, i.e. cosine), ``flat_l2`` (exact Euclidean) or ``hnsw`` (HNSW graph, inner
  product on normalised vectors, built with one thread so the graph is identical run to run).
* Sparse: BM25 via ``bm25s``.

Choices and their sources: docs/provenance.md#retrievers.  An index directory holds the index
file(s), ``ids.parquet`` (row -> doc_id) and ``meta.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import section_params
from ..embedder import Embedder
from ..errors import ConfigError
from ..io import atomic_dir


@dataclass(frozen=True)
class RetrieverSpec:
    """One ``retrievers`` entry of the config, every key filled (see config/schema.yaml)."""

    kind: str  # "dense" | "bm25"
    index: str
    embedder: str
    hnsw_m: int
    hnsw_ef_search: int
    max_seq_length: int

    @classmethod
    def from_config(cls, name: str, cfg: dict) -> RetrieverSpec:
        """Validate ``cfg`` (``retrievers.<name>``) against the schema, which also fills its defaults."""
        return cls(**section_params("retrievers", cfg, where=f"retrievers.{name}"))


def build_index(docs: pd.DataFrame, spec: RetrieverSpec, out_dir: str | os.PathLike, log=print) -> dict:
    """Index ``docs`` (doc_id, text) into ``out_dir`` atomically; return its meta."""
    ids = docs["doc_id"].astype(str).tolist()
    texts = docs["text"].astype(str).tolist()
    meta = {"kind": spec.kind, "n": len(ids)}
    with atomic_dir(out_dir) as tmp:
        if spec.kind == "dense":
            import faiss

            emb = Embedder(spec.embedder, max_seq_length=spec.max_seq_length)
            log(f"embedding {len(texts)} member documents with {spec.embedder}")
            normalize = spec.index != "flat_l2"
            vecs = emb.encode(texts, normalize=normalize, progress=False)
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
            meta.update(index=spec.index, embedder=spec.embedder, dim=int(d), normalized=normalize)
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
    """Loads an index directory and answers top-k queries with (doc_id, score) lists."""

    def __init__(self, index_dir: str | os.PathLike, spec: RetrieverSpec):
        d = Path(index_dir)
        self.meta = json.loads((d / "meta.json").read_text())
        self.ids = pd.read_parquet(d / "ids.parquet")["doc_id"].tolist()
        self.spec = spec
        if self.meta["kind"] == "dense":
            import faiss

            self.index = faiss.read_index(str(d / "index.faiss"))
            if spec.index == "hnsw":
                self.index.hnsw.efSearch = spec.hnsw_ef_search
            self.embedder = Embedder(self.meta["embedder"], max_seq_length=spec.max_seq_length)
        else:
            import bm25s

            self.bm25 = bm25s.BM25.load(str(d / "bm25"))

    def search(self, queries: list[str], k: int) -> tuple[list[list[str]], list[list[float]]]:
        k = min(k, len(self.ids))
        if self.meta["kind"] == "dense":
            q = self.embedder.encode(queries, normalize=self.meta["normalized"])
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
        q = self.embedder.encode(queries, normalize=self.meta["normalized"])
        if self.meta["index"] == "flat_ip":
            s = q @ self._matrix.T
        else:
            x = self._matrix
            s = -((q * q).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2 * q @ x.T)  # minus squared L2
        return [row.astype(np.float64) for row in s]
