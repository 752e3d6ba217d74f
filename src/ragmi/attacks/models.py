"""The attacker's own local models (never the target's): MEntA's NLI model and sentence embedder
(:func:`load_nli`, :func:`load_embedder`: one instance per configuration and process) and MBA's proxy
causal LM (:func:`load_proxy`).  Provenance: docs/provenance.md#menta, docs/provenance.md#mba."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..embedder import Embedder
from ..errors import ConfigError
from ..models import load_error

# --------------------------------------------------------------------------------------------------
# NLI (MEntA's entailment scorer)
# --------------------------------------------------------------------------------------------------


def nli_label_indices(id2label: Mapping, model_name: str = "NLI model") -> dict:
    """Column of each NLI class, from ``config.id2label`` (names compared case-insensitively).

    Returns ``{"entailment": i, "neutral": j | None, "contradiction": k | None}``.  The entailment
    column is required; raises :class:`ConfigError` when it is missing or ambiguous.
    """
    found: dict[str, list[int]] = {"entailment": [], "neutral": [], "contradiction": []}
    for idx, name in dict(id2label or {}).items():
        key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
        if key.startswith("entail"):
            found["entailment"].append(int(idx))
        elif key.startswith("neutral"):
            found["neutral"].append(int(idx))
        elif key.startswith("contradict"):
            found["contradiction"].append(int(idx))
    if len(found["entailment"]) != 1:
        raise ConfigError(
            f"{model_name}: config.id2label {dict(id2label or {})} must name exactly one 'entailment' class "
            "(case-insensitive); MEntA cannot tell which output is entailment without it"
        )
    for k in ("neutral", "contradiction"):
        if len(found[k]) > 1:
            raise ConfigError(f"{model_name}: config.id2label names several '{k}' classes: {dict(id2label)}")
    return {k: (v[0] if v else None) for k, v in found.items()}


class NLIModel:
    """A sequence-classification NLI model; the class columns come from ``config.id2label``."""

    def __init__(self, path: str, batch_size: int, max_length: int, device: str | None = None, name: str | None = None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.name = name or path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(path)
        except Exception as e:  # noqa: BLE001 - one clear message for every loading failure
            raise ConfigError(
                f"MEntA scorer 'nli' cannot load the NLI model {self.name!r} ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); set attacks.menta.nli_model to a local folder, "
                "or use scorer: similarity"
            ) from None
        self.labels = nli_label_indices(self.model.config.id2label, self.name)
        self.ent = self.labels["entailment"]
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.batch_size = int(batch_size)
        limit = int(max_length)
        cfg = self.model.config
        # Models with absolute position embeddings cannot read past them; DeBERTa-v2/v3
        # (position_biased_input=False) can, and the MEntA authors run it at max_length=2048.
        if getattr(cfg, "position_biased_input", True) and getattr(cfg, "max_position_embeddings", None):
            limit = min(limit, int(cfg.max_position_embeddings))
        self.max_length = limit
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def logits(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Raw logits, shape (len(premises), num_labels)."""
        import torch

        out = []
        for i in range(0, len(premises), self.batch_size):
            enc = self.tokenizer(
                premises[i : i + self.batch_size],
                hypotheses[i : i + self.batch_size],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.no_grad():
                out.append(self.model(**enc).logits.float().cpu().numpy())
        n_labels = int(self.model.config.num_labels)
        return np.concatenate(out, axis=0) if out else np.zeros((0, n_labels), dtype=np.float32)

    def probs(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Softmax class probabilities; identical pairs are computed once."""
        pairs = list(zip(premises, hypotheses))
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        if todo:
            lg = self.logits([p for p, _ in todo], [h for _, h in todo])
            lg = lg - lg.max(axis=1, keepdims=True)
            pr = np.exp(lg) / np.exp(lg).sum(axis=1, keepdims=True)
            for pair, row in zip(todo, pr):
                self._cache[pair] = row
        n_labels = int(self.model.config.num_labels)
        return np.array([self._cache[p] for p in pairs]).reshape(len(pairs), n_labels)

    def is_entailed(self, probs: np.ndarray) -> np.ndarray:
        """``p(ent) >= p(other)`` for every other class (3 classes: ent >= neu and ent >= con)."""
        others = np.delete(probs, self.ent, axis=1)
        return probs[:, self.ent] >= others.max(axis=1)


_NLI_CACHE: dict[tuple, NLIModel] = {}


def load_nli(path: str, batch_size: int, max_length: int, name: str | None = None) -> NLIModel:
    key = (path, int(batch_size), int(max_length))
    if key not in _NLI_CACHE:
        _NLI_CACHE[key] = NLIModel(path, batch_size=batch_size, max_length=max_length, name=name)
    return _NLI_CACHE[key]


# --------------------------------------------------------------------------------------------------
# Sentence embedder (MEntA's similarity scorer)
# --------------------------------------------------------------------------------------------------


class EmbeddingCache:
    """Unit-length sentence embeddings by a :class:`ragmi.embedder.Embedder`, each distinct text
    encoded once (the texts not seen yet go to the embedder together, in batches of its size)."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            for t, v in zip(todo, self.embedder.encode(todo, normalize=True)):
                self._cache[t] = v
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)


_EMB_CACHE: dict[str, EmbeddingCache] = {}


def load_embedder(name: str) -> EmbeddingCache:
    """The embedder ``name`` (packaged name, local folder or HF id) on CPU, batches of 64, the model's
    own ``max_seq_length``."""
    if name not in _EMB_CACHE:
        _EMB_CACHE[name] = EmbeddingCache(Embedder(name, batch_size=64, max_seq_length=None))
    return _EMB_CACHE[name]


# --------------------------------------------------------------------------------------------------
# Proxy causal LM (MBA's mask ranking)
# --------------------------------------------------------------------------------------------------


def load_proxy(path: str, dtype: str, device: str):
    """(tokenizer, model) of a local causal LM folder or HF id, in eval mode; ``device`` "auto" is
    CUDA when available, else CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    except Exception as e:  # noqa: BLE001 - a missing or broken model: one sentence, no traceback
        raise load_error("MBA proxy LM (attacks.mba.proxy_lm)", path, e) from None
    return tok, model.to(device).eval()
