"""The attacker's embedding tools for the embedding-space attacks (DGEA, RandomEmb, RandomToken): its
own sentence embedder's tokenizer, the public-text statistics its random target vectors are drawn
from, and the greedy token search that moves a query's embedding towards a target vector.

Provenance (docs/provenance.md#adaptive-extraction-campaigns): the benchmark of Qi et al. (KDD 2026),
``attacks/dgea.py`` and ``attacks/random.py``, after Cohen et al., "Unleashing Worms and Extracting
Data" (arXiv 2409.08045).  Random target vectors: one normal draw per dimension with the mean and
variance of public text's embeddings (the benchmark: Wikipedia, ``extra_data/embedding_statistics*``;
ragmi by default: WordNet's glosses, the public English text on every machine ragmi runs on, or the
benchmark's CSV named by ``embedding_statistics``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ...errors import ConfigError
from ..models import EmbeddingCache, load_embedder

N_GLOSSES = 500  # WordNet glosses embedded for the public-text statistics
SMALL_BATCH = 64  # batches below this size are embedded on one thread


class AttackerEmbedder:
    """The attacker's embedder (unit vectors) and its tokenizer's vocabulary."""

    def __init__(self, name: str):
        self.name = name
        self.cache: EmbeddingCache = load_embedder(name)
        emb = self.cache.embedder
        if getattr(emb, "fast", None) is not None:
            tok = emb.fast.tokenizer
            self._encode = lambda s: tok.encode(s, add_special_tokens=False).ids
            self._decode = lambda ids: tok.decode(list(ids))
            self.vocab_size = tok.get_vocab_size()
        else:  # sentence-transformers
            tok = emb.model.tokenizer
            self._encode = lambda s: tok.encode(s, add_special_tokens=False)
            self._decode = lambda ids: tok.decode(list(ids))
            self.vocab_size = len(tok)
        self._pool: list[int] | None = None

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts``.  A small batch (the token search's candidates of one position) runs on
        one BLAS thread: with two, 20 batches of 4 took 22 s instead of 8 s on this project's 2-core
        machine while other jobs ran (docs/campaigns.md)."""
        if len(texts) >= SMALL_BATCH:
            return self.cache.embedder.encode(list(texts), normalize=True)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            return self.cache.embedder.encode(list(texts), normalize=True)

    def encode_ids(self, text: str) -> list[int]:
        return list(self._encode(text))

    def decode(self, ids) -> str:
        return self._decode(ids)

    def token_pool(self, allow_non_ascii: bool) -> list[int]:
        """Every token id (decoded alone, ASCII only unless ``allow_non_ascii``), as the benchmark's pool."""
        if self._pool is None:
            words = [self._decode([i]) for i in range(self.vocab_size)]
            self._pool = [i for i, w in enumerate(words) if w and (allow_non_ascii or w.isascii())]
        return self._pool

    def token_words(self, allow_non_ascii: bool) -> list[str]:
        return [self._decode([i]) for i in self.token_pool(allow_non_ascii)]


def wordnet_glosses(n: int = N_GLOSSES, seed: int = 0) -> list[str]:
    """``n`` glosses of WordNet's noun, verb and adjective synsets, drawn with ``seed``."""
    from ..wordnet import find_wordnet_dir

    root = find_wordnet_dir()
    glosses = []
    for part in ("noun", "verb", "adj"):
        with open(Path(root) / f"data.{part}", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                g = line.split("|", 1)[1].strip()
                if g:
                    glosses.append(g)
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(glosses), size=min(n, len(glosses)), replace=False)
    return [glosses[i] for i in sorted(pick)]


def public_statistics(embedder: AttackerEmbedder, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) per dimension of public text's embeddings: ``source`` ``wordnet`` (module
    docstring) or a CSV with columns ``mean`` and ``variance`` (the benchmark's file)."""
    if source == "wordnet":
        vecs = embedder.embed(wordnet_glosses())
        return vecs.mean(axis=0), vecs.var(axis=0)
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"embedding_statistics: {source} is no file (give 'wordnet' or the benchmark's CSV)")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"mean", "variance"} <= set(rows[0]):
        raise ConfigError(f"embedding_statistics: {source} needs the columns mean and variance")
    mean = np.array([float(r["mean"]) for r in rows])
    var = np.array([float(r["variance"]) for r in rows])
    dim = embedder.embed(["dimension check"]).shape[1]
    if len(mean) != dim:
        raise ConfigError(f"embedding_statistics: {source} has {len(mean)} dimensions, the embedder {dim}")
    return mean, var


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of every row of ``a`` with the vector ``b``."""
    a = np.atleast_2d(a)
    return (a @ b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b) + 1e-12)


def greedy_token_search(
    embedder: AttackerEmbedder,
    template: str,
    start_ids: list[int],
    target: np.ndarray,
    *,
    iterations: int,
    pool_size: int,
    allow_non_ascii: bool,
    rng: np.random.Generator,
) -> tuple[str, float]:
    """The benchmark's Greedy Cosine Quantization: ``iterations`` passes over the info tokens in a random
    order; at each position ``pool_size`` random tokens of the pool are tried in its place, and the
    one whose query (``template`` with ``<info>`` = the decoded tokens) has the highest cosine with
    ``target`` is kept when it beats the best so far.  Returns (info text, its best cosine).

    Departure: the token ids are kept from step to step (the benchmark decodes the best text and
    tokenises it again at each position, which can change the number of tokens); the candidates of a
    position are embedded in one batch."""
    pool = embedder.token_pool(allow_non_ascii)
    best = list(start_ids)
    best_cos = -np.inf
    for _ in range(iterations):
        for i in rng.permutation(len(best)):
            cand = rng.choice(len(pool), size=min(pool_size, len(pool)), replace=False)
            texts = []
            for c in cand:
                ids = list(best)
                ids[int(i)] = pool[int(c)]
                texts.append(embedder.decode(ids))
            cos = cosine(embedder.embed([template.replace("<info>", t) for t in texts]), target)
            j = int(np.argmax(cos))
            if cos[j] > best_cos:
                best_cos = float(cos[j])
                best = list(best)
                best[int(i)] = pool[int(cand[j])]
    return embedder.decode(best), float(best_cos)


def farthest_vector(space: np.ndarray, rng: np.random.Generator, steps: int, lr: float = 0.01) -> np.ndarray:
    """DGEA's next target: a vector in the box [-0.3, 0.3]^d whose cosine with the centroid of the
    embeddings extracted so far is at most 0.  As the benchmark: a random start scaled into the box,
    Adam (lr 0.01) on the cosine embedding loss max(0, cos(x, centroid)), clamped to the box after
    every step, at most ``steps`` steps.  Departure: it stops at the first step where the loss is 0
    (after which the benchmark's gradient is 0 and only Adam's momentum still moves the vector)."""
    c = np.asarray(space, dtype=np.float64).reshape(len(space), -1).mean(axis=0)
    x = rng.standard_normal(c.shape[0])
    x = 0.6 * (x - x.min()) / (x.max() - x.min()) - 0.3
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    b1, b2, eps = 0.9, 0.999, 1e-8
    cn = np.linalg.norm(c) + 1e-12
    for t in range(1, steps + 1):
        xn = np.linalg.norm(x) + 1e-12
        cos = float(x @ c) / (xn * cn)
        if cos <= 0:
            break
        grad = c / (xn * cn) - cos * x / xn**2
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad**2
        x = x - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        x = np.clip(x, -0.3, 0.3)
    return x
