"""A plain-numpy forward pass for sentence-transformers folders that hold a BERT encoder with mean
pooling (and optional normalisation), such as the packaged all-MiniLM-L6-v2.

Why: importing sentence-transformers (and with it transformers' model stack) takes about 6 s of CPU
per process on the 2-core machines this project runs on, more than embedding a job's queries; every
Snakemake job that embeds (index, generate, score, audit) is its own process and paid it.  This
module needs only numpy, ``tokenizers`` and ``safetensors`` (0.2 s to import; torch alone takes 2 s)
and computes the same function as ``SentenceTransformer(path).encode(..., normalize_embeddings=...)`` for such a
folder: the same WordPiece tokenizer (``tokenizer.json``) with leading/trailing whitespace stripped
and truncation at ``max_seq_length`` tokens (special tokens included), BERT's embeddings (word +
absolute position + token type 0, LayerNorm), post-LayerNorm encoder layers with exact (erf) GELU,
mean pooling over the attention mask, and L2 normalisation.  ``tests/test_bert_encoder.py`` checks
the vectors against sentence-transformers' own (maximum absolute difference below 1e-5, identical
nearest neighbours).

:func:`supported` says whether a folder has exactly that layout; :class:`ragmi.embedder.Embedder`
uses this encoder for such folders and sentence-transformers for every other model (E5 with its
prefixes is also a BERT mean-pooling model and takes this path; its prefixes are added by the caller).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def supported(folder: str | Path) -> bool:
    """True when ``folder`` is a local sentence-transformers folder: Transformer (a BERT with absolute
    positions and GELU, weights in ``model.safetensors``, a ``tokenizer.json``), mean pooling only,
    then optionally Normalize."""
    d = Path(folder)
    if not d.is_dir():
        return False
    modules = _read_json(d / "modules.json")
    if not isinstance(modules, list) or not modules:
        return False
    types = [m.get("type") for m in modules]
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        return False
    if modules[0].get("path", "") != "":
        return False
    pooling = _read_json(d / modules[1].get("path", "") / "config.json")
    if not isinstance(pooling, dict) or not pooling.get("pooling_mode_mean_tokens"):
        return False
    if any(v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"):
        return False
    cfg = _read_json(d / "config.json")
    st_cfg = _read_json(d / "sentence_bert_config.json") or {}
    return (
        isinstance(cfg, dict)
        and cfg.get("model_type") == "bert"
        and cfg.get("hidden_act") == "gelu"
        and cfg.get("position_embedding_type", "absolute") == "absolute"
        and not st_cfg.get("do_lower_case", False)
        and (d / "model.safetensors").is_file()
        and (d / "tokenizer.json").is_file()
    )


def _gelu(h: np.ndarray, block: int = 1 << 15) -> np.ndarray:
    """Exact (erf) GELU, in place on a float32 array, in blocks that stay in the CPU's cache (the
    unblocked passes over a batch's activations were memory-bound: 3 s of 8 for 320 documents).  erf
    to within 1.5e-7 (Abramowitz & Stegun 7.1.26) without importing scipy (0.5 s); the error this
    leaves in a vector is far below the 1e-5 the tests allow."""
    flat = h.reshape(-1)
    for s in range(0, flat.size, block):
        _gelu_block(flat[s : s + block])
    return h


def _gelu_block(h: np.ndarray) -> None:
    x = h * np.float32(1.0 / np.sqrt(2.0))
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|x|)
    np.copysign(poly, x, out=poly)  # sign(x) * (1 - erf(|x|)); erf(x) = sign(x) - that
    np.sign(x, out=x)
    x -= poly  # erf(x)
    x += 1.0
    x *= 0.5
    h *= x


class BertMeanEncoder:
    """The encoder of a :func:`supported` folder; :meth:`encode` mirrors ``SentenceTransformer.encode``.

    Pure numpy (float32 matrix products through numpy's BLAS): a job that embeds its queries does not
    import torch (about 2 s per process here, on every generate, audit and index job)."""

    def __init__(self, folder: str | Path, max_seq_length: int | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        d = Path(folder)
        cfg = json.loads((d / "config.json").read_text())
        st_cfg = _read_json(d / "sentence_bert_config.json") or {}
        self.normalize_module = len(_read_json(d / "modules.json")) == 3  # [Transformer, Pooling, Normalize]
        limit = int(cfg.get("max_position_embeddings", 512))
        self.max_seq_length = min(int(max_seq_length or st_cfg.get("max_seq_length") or limit), limit)
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.tokenizer = Tokenizer.from_file(str(d / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length, strategy="longest_first")
        w = load_file(str(d / "model.safetensors"))
        # checkpoints name the encoder with or without the "bert." prefix; linear weights are stored
        # (out, in) and kept transposed, contiguous, for x @ W
        self.w = {}
        for k, v in w.items():
            name = k[5:] if k.startswith("bert.") else k
            v = np.asarray(v, dtype=np.float32)
            if name.endswith(".weight") and v.ndim == 2 and not name.startswith("embeddings."):
                v = np.ascontiguousarray(v.T)
            self.w[name] = v
        self.pad_id = int(cfg.get("pad_token_id", 0) or 0)

    def _ln(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _lin(self, x, name):
        w = self.w[f"{name}.weight"]
        y = x.reshape(-1, x.shape[-1]) @ w  # one GEMM over every token of the batch
        y += self.w[f"{name}.bias"]
        return y.reshape(*x.shape[:-1], w.shape[1])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, t = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:t][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        hd = hidden // self.heads
        bias = np.where(mask[:, None, None, :] == 0, np.finfo(np.float32).min, 0.0).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(hd))

        def split(z):  # (n, t, hidden) -> (n, heads, t, head_dim)
            return z.reshape(n, t, self.heads, hd).transpose(0, 2, 1, 3)

        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q = split(self._lin(x, f"{p}.attention.self.query"))
            k = split(self._lin(x, f"{p}.attention.self.key"))
            v = split(self._lin(x, f"{p}.attention.self.value"))
            s = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, hidden)
            x = self._ln(self._lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
            h = _gelu(self._lin(x, f"{p}.intermediate.dense"))
            x = self._ln(self._lin(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        m = mask[..., None].astype(np.float32)
        return (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)

    def encode(self, texts: list[str], batch_size: int = 64, normalize: bool = True) -> np.ndarray:
        texts = [str(s).strip() for s in texts]
        out = np.zeros((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        # batches of similar length (as sentence-transformers sorts them), padded to the longest
        enc = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(enc[i].ids))
        for s in range(0, len(order), batch_size):
            rows = order[s : s + batch_size]
            t = max(len(enc[i].ids) for i in rows)
            ids = np.full((len(rows), t), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), t), dtype=np.int64)
            for j, i in enumerate(rows):
                e = enc[i].ids
                ids[j, : len(e)] = e
                mask[j, : len(e)] = 1
            vec = self._forward(ids, mask).astype(np.float32)
            if normalize or self.normalize_module:
                vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
            out[rows] = vec
        return out
