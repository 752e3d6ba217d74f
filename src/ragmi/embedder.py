"""Sentence-transformers embedder, shared by the target's dense retriever and the attacker's own
similarity scorers (an attack loads its own copy; it never touches the target's index).

A local BERT mean-pooling folder (the packaged all-MiniLM-L6-v2 among them) runs through
:mod:`ragmi.bert_encoder`, the same function without sentence-transformers' 6-second import; every
other model through sentence-transformers."""

from __future__ import annotations

import numpy as np

from .errors import RagmiError
from .models import load_error, resolve_embedder


class Embedder:
    """``max_seq_length``: truncate inputs to this many tokens (the retriever's config key of that
    name); ``None`` keeps the model's own limit."""

    def __init__(self, name: str, batch_size: int = 64, max_seq_length: int | None = None):
        from .bert_encoder import BertMeanEncoder, supported

        self.name = name
        self.batch_size = batch_size
        path = resolve_embedder(name)
        self.fast = None
        if supported(path):
            try:
                self.fast = BertMeanEncoder(path, max_seq_length=max_seq_length)
            except Exception as e:  # noqa: BLE001 - a broken folder: one sentence, no traceback
                raise load_error("embedder", name, e) from None
            self.max_seq_length = self.fast.max_seq_length
            return
        from sentence_transformers import SentenceTransformer

        try:
            self.model = SentenceTransformer(path, device="cpu")
        except RagmiError:
            raise
        except Exception as e:  # noqa: BLE001 - a missing or broken model: one sentence, no traceback
            raise load_error("embedder", name, e) from None
        if max_seq_length:
            self.model.max_seq_length = max_seq_length
        self.max_seq_length = self.model.max_seq_length

    def encode(self, texts: list[str], normalize: bool = True, progress: bool = False) -> np.ndarray:
        if self.fast is not None:
            return self.fast.encode(list(texts), batch_size=self.batch_size, normalize=normalize)
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=normalize,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)
