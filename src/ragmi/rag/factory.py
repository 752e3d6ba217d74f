"""Build a target RAG system (or a bare cached generator) from validated config entries.

Every config entry passed here is validated, its schema defaults filled (``ragmi.config``); the
code reads ``cfg["key"]`` and holds no defaults of its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..cache import ResponseCache
from ..defenses import build_defense
from ..errors import ConfigError, EndpointError
from ..hardware import choose_dtype
from ..models import hub_offline, is_packaged_gguf, require_cached_hub_model
from .fit import PromptFitter
from .frameworks import build_framework
from .generators import (
    NO_API_KEY,
    CachedGenerator,
    OpenAIGenerator,
    TransformersGenerator,
    api_key_from_env,
    generator_model_id,
    make_request,
)
from .index import Retriever, RetrieverSpec, database_documents
from .serving_metrics import metrics_url
from .system import RAGSystem
from .templates import get_template
from .vllm_server import SharedVLLMServer, VLLMServer

VLLM_CACHE_ROOT = str(Path(".ragmi") / "vllm-cache")


def needs_model_dir(gen_cfg: Mapping) -> bool:
    return gen_cfg["backend"] in ("vllm", "transformers") and is_packaged_gguf(gen_cfg["model"])


def model_path(gen_cfg: Mapping, model_dir: str | None) -> str:
    return str(model_dir) if needs_model_dir(gen_cfg) else gen_cfg["model"]


def shared_server(gen_cfg: Mapping, model_dir, threads: int, server_log: str) -> SharedVLLMServer:
    """The shared local vLLM server of a ``vllm`` generator entry (not started yet)."""
    server = VLLMServer.from_config(gen_cfg, model_path(gen_cfg, model_dir), server_log, threads, VLLM_CACHE_ROOT)
    return SharedVLLMServer(server, idle_s=gen_cfg["server_idle_s"])


class ManagedGenerator:
    """Creates the backend on first use; for ``vllm`` it holds (and on first use starts) the shared server."""

    def __init__(self, gen_cfg: Mapping, model_dir: str | None, threads: int, server_log: str, log):
        self.cfg = gen_cfg
        self.model_dir = model_dir
        self.log = log
        self.server = None
        self.inner = None
        self.startup_s = None  # seconds this job waited for the server to be ready (vllm backend)
        if gen_cfg["backend"] == "vllm":
            self.server = shared_server(gen_cfg, model_dir, threads, server_log)
            self.server.hold()

    def _create(self):
        c = self.cfg
        if c["backend"] == "transformers":
            dtype = choose_dtype(c["dtype"], "transformers").dtype  # ragmi.hardware: the one rule for 'auto'
            return TransformersGenerator(
                model_path(c, self.model_dir), batch_size=c["batch_size"], dtype=dtype, log=self.log
            )
        if c["backend"] == "openai":
            base_url, api_key = c["base_url"], api_key_from_env(c.get("api_key_env"))
            server_metrics = None  # an external endpoint: no server counters to read
        else:
            if hub_offline(self.server.server.environment()):
                require_cached_hub_model(model_path(c, self.model_dir), "generator model (backend vllm)")
            t0 = time.perf_counter()
            base_url, api_key = self.server.acquire(log=self.log), NO_API_KEY
            self.startup_s = round(time.perf_counter() - t0, 3)
            server_metrics = metrics_url(base_url)  # the local server's Prometheus counters: prefix-cache hits
        return OpenAIGenerator(
            base_url,
            c["model"],
            api_key,
            concurrency=c["concurrency"],
            timeout=c["timeout_s"],
            max_retries=c["max_retries"],
            log=self.log,
            metrics_url=server_metrics,
        )

    def generate(self, requests, on_result=None):
        if self.inner is None:
            self.inner = self._create()
        return self.inner.generate(requests, on_result=on_result)

    @property
    def usage(self) -> list[dict]:
        """The backend's per-call token accounting (OpenAI backend), [] otherwise."""
        return list(getattr(self.inner, "usage", None) or [])

    def close(self):
        if self.server is not None:
            self.server.release(log=self.log)
            self.server = None


def start_server_early(name: str, gen_cfg: Mapping, model_dir, threads: int, server_log: str, log) -> bool:
    """Start the shared vLLM server of generator ``name`` (or find it running), wait until it is ready,
    and let go of it: the model jobs that follow find it ready instead of each waiting for its start,
    and the jobs without a model run beside the start-up.  Its watchdog stops it after
    ``server_idle_s`` if no job uses it.  Nothing inside a SLURM job (each model job there runs a
    server of its own).  True when a server is ready."""
    shared = shared_server(gen_cfg, model_dir, threads, server_log)
    if shared.slurm_job:
        log(f"{name}: not starting a vLLM server early inside SLURM job {shared.slurm_job}")
        return False
    choice = choose_dtype(gen_cfg["dtype"], "vllm")
    log(
        f"{name}: starting its vLLM server now, for the model jobs that follow; it computes in "
        f"{choice.as_record()['dtype']} ({choice.reason})"
    )
    try:
        shared.acquire(log=log)
    finally:
        shared.release(log=log)
    return True


@contextlib.contextmanager
def cached_generator(gen_cfg: Mapping, model_dir, cache_dir, threads: int, server_log: str, log):
    managed = ManagedGenerator(gen_cfg, model_dir, threads, server_log, log)
    gen = CachedGenerator(generator_model_id(gen_cfg), lambda: managed, ResponseCache(cache_dir), log=log)
    try:
        yield gen
    finally:
        if gen.stats["requests"]:
            log(gen.summary())
            log(gen.serving_summary())
        managed.close()


@dataclass(frozen=True)
class TargetSpec:
    """One target RAG system of a run: its validated config entries and where its files are."""

    name: str
    target: Mapping  # targets.<name>
    retriever: Mapping  # retrievers.<target["retriever"]>
    generator: Mapping  # generators.<target["generator"]>
    index_dir: str
    model_dir: str | None  # the converted packaged model, when the generator needs one
    cache_dir: str
    threads: int
    server_log: str
    seed: int
    temperature: float
    defenses: tuple = ()  # ((name, config entry), ...) in the target's hook order
    defender: Mapping | None = None  # generators.<defender.generator>, for LLM-based defenses
    defender_model_dir: str | None = None
    defender_server_log: str | None = None
    embedding_cache_dir: str | None = None  # query embeddings shared by the jobs (ragmi.cache)

    @property
    def retriever_name(self) -> str:
        return self.target["retriever"]


def defender_chat(gen, seed: int):
    """The defender LLM as ``chat(prompts, max_tokens, temperature) -> texts`` (cached, batched)."""

    def chat(prompts, max_tokens, temperature):
        out = gen.generate([make_request(p, max_tokens, 0, temperature, seed) for p in prompts])
        return [r["response_text"] for r in out]

    return chat


def target_framework(spec: TargetSpec):
    """The target's framework (``targets.<t>.framework``), its local model resolved: ``model:
    generator`` is the generator's own weights (the converted folder of a packaged model)."""
    key = f"targets.{spec.name}.framework"
    fw = build_framework(spec.target["framework"], spec.target["framework_params"], where=key, validated=True)
    if fw.needs_local_model:
        m = fw.params["model"]
        fw.model_path = model_path(spec.generator, spec.model_dir) if m == "generator" else m
        fw.model_key = f"{key}_params.model"
    return fw


@contextlib.contextmanager
def rag_system(spec: TargetSpec, members: pd.DataFrame, log):
    defenses = [build_defense(name, dict(entry), validated=True) for name, entry in spec.defenses]
    framework = target_framework(spec)
    with contextlib.ExitStack() as stack:
        stack.callback(framework.close)
        # The generator first: it holds a running shared server while the retriever loads.
        own = framework.generator(  # Spring's: the generator with the virtual tokens in its embedding table
            spec.generator,
            model_path(spec.generator, spec.model_dir),
            spec.cache_dir,
            f"targets.{spec.name}.framework",
            log,
        )
        if own is not None:
            gen = stack.enter_context(own)
        else:
            gen = stack.enter_context(
                cached_generator(spec.generator, spec.model_dir, spec.cache_dir, spec.threads, spec.server_log, log)
            )
        chat = None
        if any(d.needs_llm for d in defenses):
            dgen = stack.enter_context(
                cached_generator(
                    spec.defender, spec.defender_model_dir, spec.cache_dir, spec.threads, spec.defender_server_log, log
                )
            )
            chat = defender_chat(dgen, spec.seed)
        retriever = Retriever(spec.index_dir, RetrieverSpec.from_validated(spec.retriever), spec.embedding_cache_dir)
        with_titles = bool(spec.target["with_titles"])
        if retriever.with_titles != with_titles:
            raise ConfigError(
                f"target {spec.name}: the index {spec.index_dir} was built with_titles={retriever.with_titles}, "
                f"the target has with_titles={with_titles}; rebuild the index"
            )
        # the context holds the documents as the index does: "<title>\n<text>" with titles
        docs = database_documents(members, with_titles)
        fitter = prompt_fitter(spec, log)
        if fitter is not None:
            stack.callback(lambda: fitter.stats["prompts"] and log(fitter.summary()))
        system = RAGSystem(
            retriever=retriever,
            documents=docs,
            template=get_template(spec.target["template"]),
            generator=gen,
            k=spec.target["k"],
            seed=spec.seed,
            temperature=spec.temperature,
            defenses=defenses,
            defender=chat,
            log=log,
            framework=framework,
            fitter=fitter,
        )
        try:
            yield system
        except EndpointError as e:  # the endpoint's one line, and whose generator it is
            raise EndpointError(f"{e} (target {spec.name}, generator {spec.target['generator']})") from None


def prompt_fitter(spec: TargetSpec, log) -> PromptFitter | None:
    """The target's :class:`~ragmi.rag.fit.PromptFitter`: its rule (``targets.<t>.context_fit``) over
    its generator's context (``max_model_len``) and tokenizer.  None for a generator of backend
    ``openai``: an external endpoint's context and tokenizer are not known here, its prompts are sent
    as built (an endpoint that refuses one stops the job with its one-line error)."""
    if spec.generator["backend"] == "openai":
        return None
    return PromptFitter(
        spec.generator["max_model_len"],
        spec.target["context_fit"],
        tokenizer_path=model_path(spec.generator, spec.model_dir),
        where=f"targets.{spec.name}.context_fit",
        log=log,
    )
