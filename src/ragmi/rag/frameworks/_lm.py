"""A small causal LM in process, for the frameworks that score or compress text with one
(Selective-Context's self-information; LongLLMLingua loads its own through ``llmlingua``)."""

from __future__ import annotations

from ...models import load_error


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_causal_lm(path: str, device: str, what: str):
    """(tokenizer, model) of a causal LM folder or Hub id, in float32 on ``device``, in eval mode; a
    model that does not load is one ConfigError naming ``what`` (the config key)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(resolve_device(device)).eval()
    except Exception as e:  # noqa: BLE001 - a missing or broken model: one sentence
        raise load_error(what, path, e) from None
    return tok, model
