"""A plain-torch forward pass for sentence-transformers folders that hold a BERT encoder with mean
pooling (and optional normalisation), such as the packaged all-MiniLM-L6-v2.

Why: importing sentence-transformers (and with it transformers' model stack) takes about 6 s of CPU
per process on the 2-core machines this project runs on, more than embedding a job's queries; every
Snakemake job that embeds (index, generate, score, audit) is its own process and paid it.  This
module needs only torch, ``tokenizers`` and ``safetensors`` (about 1.5 s to import) and computes the
same function as ``SentenceTransformer(path).encode(..., normalize_embeddings=...)`` for such a
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


class BertMeanEncoder:
    """The encoder of a :func:`supported` folder; :meth:`encode` mirrors ``SentenceTransformer.encode``."""

    def __init__(self, folder: str | Path, max_seq_length: int | None = None):
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        d = Path(folder)
        self.torch = torch
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
        # checkpoints name the encoder with or without the "bert." prefix
        self.w = {k[5:] if k.startswith("bert.") else k: v.float() for k, v in w.items()}
        self.pad_id = int(cfg.get("pad_token_id", 0) or 0)

    def _ln(self, x, name):
        return self.torch.nn.functional.layer_norm(
            x, x.shape[-1:], self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps
        )

    def _lin(self, x, name):
        return self.torch.nn.functional.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _forward(self, ids, mask):
        torch = self.torch
        F = torch.nn.functional
        w = self.w
        n, t = ids.shape
        pos = torch.arange(t).unsqueeze(0)
        x = (
            F.embedding(ids, w["embeddings.word_embeddings.weight"])
            + F.embedding(pos, w["embeddings.position_embeddings.weight"])
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        hidden = x.shape[-1]
        hd = hidden // self.heads
        bias = torch.zeros(n, 1, 1, t)
        bias = bias.masked_fill(mask[:, None, None, :] == 0, torch.finfo(torch.float32).min)

        def split(z):  # (n, t, hidden) -> (n, heads, t, head_dim)
            return z.view(n, t, self.heads, hd).transpose(1, 2)

        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q = split(self._lin(x, f"{p}.attention.self.query"))
            k = split(self._lin(x, f"{p}.attention.self.key"))
            v = split(self._lin(x, f"{p}.attention.self.value"))
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).transpose(1, 2).reshape(n, t, hidden)
            x = self._ln(self._lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
            h = F.gelu(self._lin(x, f"{p}.intermediate.dense"))
            x = self._ln(self._lin(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        m = mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)

    def encode(self, texts: list[str], batch_size: int = 64, normalize: bool = True) -> np.ndarray:
        torch = self.torch
        texts = [str(s).strip() for s in texts]
        out = np.zeros((len(texts), self.w["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        # batches of similar length (as sentence-transformers sorts them), padded to the longest
        enc = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(enc[i].ids))
        with torch.inference_mode():
            for s in range(0, len(order), batch_size):
                rows = order[s : s + batch_size]
                t = max(len(enc[i].ids) for i in rows)
                ids = torch.full((len(rows), t), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(rows), t), dtype=torch.long)
                for j, i in enumerate(rows):
                    e = enc[i].ids
                    ids[j, : len(e)] = torch.tensor(e, dtype=torch.long)
                    mask[j, : len(e)] = 1
                vec = self._forward(ids, mask)
                if normalize or self.normalize_module:
                    vec = torch.nn.functional.normalize(vec, p=2, dim=1)
                out[rows] = vec.numpy()
        return out
