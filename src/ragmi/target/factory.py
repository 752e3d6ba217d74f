"""Build a target RAG system (or a bare generator) from validated config sections."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pandas as pd

from ..cache import ResponseCache
from ..models import is_packaged_gguf
from .generators import CachedGenerator, OpenAIGenerator, TransformersGenerator, api_key_from_env
from .index import Retriever, RetrieverSpec
from .rag import RAGSystem
from .templates import get_template
from .vllm_server import SharedVLLMServer, VLLMServer


def generator_model_id(gen_cfg: dict) -> str:
    """The identity under which responses are cached: backend + model (+ dtype)."""
    where = gen_cfg.get("base_url", "local")
    return f"{gen_cfg['backend']}|{where}|{gen_cfg['model']}|{gen_cfg.get('dtype', 'auto')}"


def needs_model_dir(gen_cfg: dict) -> bool:
    return gen_cfg["backend"] in ("vllm", "transformers") and is_packaged_gguf(gen_cfg["model"])


def model_path(gen_cfg: dict, model_dir: str | None) -> str:
    return str(model_dir) if needs_model_dir(gen_cfg) else gen_cfg["model"]


class ManagedGenerator:
    """Creates the backend on first use; for ``vllm`` also starts (and later stops) the server."""

    def __init__(self, gen_cfg: dict, model_dir: str | None, threads: int, server_log: str, log):
        self.cfg = gen_cfg
        self.model_dir = model_dir
        self.threads = threads
        self.server_log = server_log
        self.log = log
        self.server = None
        self.inner = None
        if gen_cfg["backend"] == "vllm":
            self.server = SharedVLLMServer(self._vllm_server(), idle_s=gen_cfg.get("server_idle_s", 90))
            self.server.hold()

    def _vllm_server(self) -> VLLMServer:
        c = self.cfg
        return VLLMServer(
            model_path(c, self.model_dir), served_name=c["model"], log_path=self.server_log,
            dtype=c.get("dtype", "auto"), max_model_len=c.get("max_model_len", 2048),
            extra_args=c.get("extra_args", []), startup_timeout=c.get("startup_timeout_s", 900),
            threads=self.threads, cache_root=str(Path(".ragmi") / "vllm-cache"),
        )

    def _create(self):
        c = self.cfg
        if c["backend"] == "transformers":
            return TransformersGenerator(model_path(c, self.model_dir), batch_size=c.get("batch_size", 8),
                                         dtype="float32" if c.get("dtype", "auto") == "auto" else c["dtype"],
                                         log=self.log)
        if c["backend"] == "openai":
            return OpenAIGenerator(c["base_url"], c["model"], api_key_from_env(c.get("api_key_env")),
                                   concurrency=c.get("concurrency", 16), timeout=c.get("timeout_s", 300),
                                   max_retries=c.get("max_retries", 4), log=self.log)
        base_url = self.server.acquire(log=self.log)
        return OpenAIGenerator(base_url, c["model"], concurrency=c.get("concurrency", 16),
                               timeout=c.get("timeout_s", 300), max_retries=c.get("max_retries", 4), log=self.log)

    def generate(self, requests):
        if self.inner is None:
            self.inner = self._create()
        return self.inner.generate(requests)

    def close(self):
        if self.server is not None:
            self.server.release()
            self.server = None


@contextlib.contextmanager
def cached_generator(gen_cfg: dict, model_dir, cache_dir, threads: int, server_log: str, log):
    managed = ManagedGenerator(gen_cfg, model_dir, threads, server_log, log)
    gen = CachedGenerator(generator_model_id(gen_cfg), lambda: managed, ResponseCache(cache_dir), log=log)
    try:
        yield gen
    finally:
        managed.close()


@contextlib.contextmanager
def rag_system(target_cfg: dict, retriever_cfg: dict, gen_cfg: dict, index_dir, members: pd.DataFrame,
               model_dir, cache_dir, threads: int, server_log: str, seed: int, temperature: float, log,
               retriever_name: str = "retriever"):
    # The generator first: it holds a running shared server while the retriever loads.
    with cached_generator(gen_cfg, model_dir, cache_dir, threads, server_log, log) as gen:
        spec = RetrieverSpec.from_config(retriever_name, retriever_cfg)
        retriever = Retriever(index_dir, spec)
        docs = dict(zip(members["doc_id"].astype(str), members["text"].astype(str)))
        yield RAGSystem(retriever=retriever, documents=docs, template=get_template(target_cfg["template"]),
                        generator=gen, k=target_cfg["k"], seed=seed, temperature=temperature)
