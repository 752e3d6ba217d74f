"""A Python target: a user's RAG chain called in process (``targets.<t>.kind: python``, the schema's
``$defs.python``).

The target is a callable named ``"package.module:function"``: ``python.callable`` is called once per
query as ``fn(query, **kwargs)``; ``python.factory`` is called once per job as ``factory(**kwargs)``
and returns that per-query callable (where building the chain, its vector store and its clients
takes time).  If the per-query callable takes ``max_tokens`` or ``top_logprobs`` (by name, or
``**kwargs``), the attack's values are passed (introspected with :func:`inspect.signature`).

It returns the answer text, a ``(answer, retrieved_ids)`` pair, or a mapping or object with
``answer`` and optionally ``retrieved_ids`` (or ``sources``), ``token_logprobs``, ``top_logprobs``
(top-K alternatives per generated token), ``first_token_logprobs``, ``prompt_tokens`` and
``completion_tokens`` (:func:`normalise_result`).  ``ragmi.rag.adapters`` wraps LangChain chains and
LlamaIndex query engines into this contract.

Like a remote target it is a black box to ragmi (no index, no defenses of ragmi's, its own
datasets), with one difference: the retrieved ids it reports reach the responses, so the tables
can say how often a member candidate's own document was retrieved.  Every answer goes through the
response cache (:class:`~ragmi.rag.generators.CachedGenerator`) the moment it arrives, so a rerun
resumes; ``concurrency`` calls run at once in threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..cache import ResponseCache
from ..errors import ConfigError, EndpointError
from .concurrency import Cancelled, answer_concurrently
from .generators import CachedGenerator, make_request


def reference_key(cfg: Mapping) -> str:
    """Which of ``callable`` / ``factory`` the ``python`` block uses."""
    return "factory" if "factory" in cfg else "callable"


@contextlib.contextmanager
def _search_path(folders):
    """``folders`` (the ``python.path`` entries) in front of ``sys.path`` while importing."""
    added = [str(Path(f).expanduser().resolve()) for f in folders]
    sys.path[:0] = added
    try:
        yield
    finally:
        for f in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(f)
    importlib.invalidate_caches()


def check_reference(cfg: Mapping, where: str) -> None:
    """At validation: the module of ``callable`` / ``factory`` can be found on ``sys.path`` and
    ``python.path`` without running it (importing a chain may load models; the packages above it
    are imported, as :func:`importlib.util.find_spec` does)."""
    key = reference_key(cfg)
    module = cfg[key].split(":", 1)[0]
    with _search_path(cfg["path"]):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:  # a parent package that is not there, or fails
            found, why = None, f" ({type(e).__name__}: {e})"
        else:
            why = ""
    if found is None:
        raise ConfigError(
            f"config key {where}.{key}: module {module!r} is not importable{why}; "
            f"add its folder to {where}.path or install it in the environment that runs ragmi"
        )


def load_reference(ref: str, folders, where: str) -> Callable:
    """The object ``"pkg.mod:attr.sub"`` names, imported with ``folders`` on the search path; one
    ConfigError naming ``where`` when it cannot be imported or is not callable."""
    module, _, attr = ref.partition(":")
    with _search_path(folders):
        try:
            obj = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - the user's module: any failure is one sentence
            raise ConfigError(f"config key {where}: cannot import module {module!r}: {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"config key {where}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(f"config key {where}: {ref} is a {type(obj).__name__}, not a callable")
    return obj


def call_options(fn: Callable) -> set[str]:
    """Which of ``max_tokens`` / ``top_logprobs`` ``fn`` accepts by keyword."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the query only
        return set()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return {"max_tokens", "top_logprobs"}
    named = {
        p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return named & {"max_tokens", "top_logprobs"}


def _get(result, name: str, default=None):
    if isinstance(result, Mapping):
        return result.get(name, default)
    return getattr(result, name, default)


def _has(result, name: str) -> bool:
    return name in result if isinstance(result, Mapping) else hasattr(result, name)


def _top_list(entry, k: int, where: str) -> list[dict]:
    """One position's top-K alternatives, ``[{"token", "logprob"}]`` sorted by log-probability, from
    such a list or a ``{token: logprob}`` mapping."""
    if isinstance(entry, Mapping):
        out = [{"token": str(t), "logprob": float(lp)} for t, lp in entry.items()]
    elif isinstance(entry, list | tuple):
        try:
            out = [{"token": str(_get(a, "token")), "logprob": float(_get(a, "logprob"))} for a in entry]
        except (TypeError, ValueError):
            raise EndpointError(f"{where}: top_logprobs entries must be {{token, logprob}} objects") from None
    else:
        raise EndpointError(f"{where}: top_logprobs must be a list per generated token, not {type(entry).__name__}")
    out.sort(key=lambda a: -a["logprob"])
    return out[:k] if k > 0 else out


def _ids(value, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise EndpointError(f"{where}: retrieved_ids must be a list of document ids, not {type(value).__name__}")
    return [str(v) for v in value]


def normalise_result(result, *, top_k: int, logprobs: bool, on_empty: str, where: str) -> dict:
    """The callable's return value as a response of ``ragmi.rag.generators`` (plus ``retrieved_ids``:
    None when it reports none).  ``where`` names the callable in every error."""
    if isinstance(result, str):
        fields = {"answer": result}
    elif isinstance(result, tuple):
        if len(result) != 2:
            raise EndpointError(f"{where} returned a tuple of {len(result)}; expected (answer, retrieved_ids)")
        fields = {"answer": result[0], "retrieved_ids": result[1]}
    elif _has(result, "answer"):
        fields = result
    else:
        raise EndpointError(
            f"{where} returned a {type(result).__name__} without 'answer'; expected a str, "
            "(answer, retrieved_ids) or a mapping/object with answer[, retrieved_ids, token_logprobs, top_logprobs]"
        )
    text = _get(fields, "answer")
    if not isinstance(text, str):
        raise EndpointError(f"{where} returned an answer of type {type(text).__name__}, not str")
    if not text.strip() and on_empty == "error":
        raise EndpointError(f"{where} returned an empty answer (on_empty_answer: error; set it to keep to accept them)")
    ids = _get(fields, "retrieved_ids")
    if ids is None:
        ids = _get(fields, "sources")
    token_lps = _get(fields, "token_logprobs") or []
    tops_in = _get(fields, "top_logprobs") or []
    first = _get(fields, "first_token_logprobs")
    if logprobs and not (token_lps or tops_in or first):
        raise EndpointError(
            f"{where} returned no token_logprobs, top_logprobs or first_token_logprobs, but logprobs is true "
            "(set it to false for a chain without log-probabilities)"
        )
    try:
        token_lps = [float(x) for x in token_lps]
    except (TypeError, ValueError):
        raise EndpointError(f"{where}: token_logprobs must be a list of numbers") from None
    if any(math.isnan(x) for x in token_lps):
        raise EndpointError(f"{where}: token_logprobs holds NaN")
    tops = [_top_list(t, top_k, where) for t in tops_in] if top_k > 0 else []
    first_list = _top_list(first, top_k, where) if first else (tops[0] if tops else [])
    if not logprobs:  # the config says the chain gives none: do not let stray values reach gray-box variants
        token_lps, tops, first_list = [], [], []
    pt, ct = _get(fields, "prompt_tokens", 0), _get(fields, "completion_tokens", 0)
    return {
        "response_text": text,
        "first_token_logprobs": first_list,
        "token_logprobs": token_lps,
        "token_top_logprobs": tops,
        "prompt_tokens": int(pt) if isinstance(pt, int | float) else 0,
        "completion_tokens": int(ct) if isinstance(ct, int | float) else 0,
        "retrieved_ids": _ids(ids, where),
    }


def query_text(messages) -> str:
    """The text of the last user message of a generation request."""
    for m in reversed(list(messages or [])):
        if m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


class PythonClient:
    """The backend behind the response cache: one call of the user's callable per request."""

    def __init__(self, cfg: Mapping, where: str, log: Callable = print):
        self.cfg = dict(cfg)
        self.where = where
        self.log = log
        key = reference_key(cfg)
        self.ref = cfg[key]
        self.name = f"{where}.{key} {self.ref}"
        obj = load_reference(self.ref, cfg["path"], f"{where}.{key}")
        kwargs = dict(cfg["kwargs"])
        if key == "factory":
            try:
                fn = obj(**kwargs)
            except Exception as e:  # noqa: BLE001 - the user's code: one sentence
                raise EndpointError(f"{self.name} raised {type(e).__name__}: {e}") from None
            if not callable(fn):
                raise ConfigError(
                    f"config key {where}.factory: {self.ref} returned a {type(fn).__name__}, not a callable"
                )
            self.fn, self.kwargs = fn, {}
        else:
            self.fn, self.kwargs = obj, kwargs
        self.options = call_options(self.fn)
        self.stats = {"calls": 0}
        self._stop = threading.Event()

    def call(self, req: Mapping) -> dict:
        if self._stop.is_set():
            raise Cancelled()
        extra = {k: int(req[k]) for k in self.options}
        self.stats["calls"] += 1
        t0 = time.perf_counter()
        try:
            result = self.fn(query_text(req["messages"]), **self.kwargs, **extra)
        except Exception as e:  # noqa: BLE001 - the user's chain: one sentence, the query named
            raise EndpointError(f"{self.name} raised {type(e).__name__}: {str(e)[:300]}") from None
        out = normalise_result(
            result,
            top_k=int(req["top_logprobs"]),
            logprobs=self.cfg["logprobs"],
            on_empty=self.cfg["on_empty_answer"],
            where=self.name,
        )
        out["latency_s"] = time.perf_counter() - t0
        return out

    def generate(self, requests: list[dict], on_result: Callable | None = None) -> list[dict]:
        """Answer every request, ``concurrency`` at a time; ``on_result(i, answer)`` as each arrives.
        On the first failure no further call starts; the answers already made are reported (and so
        cached), then the failure is raised."""
        if not requests:
            return []
        self._stop.clear()
        n = min(self.cfg["concurrency"], len(requests))
        return answer_concurrently(requests, self.call, n, self._stop, self.log, on_result)

    def close(self):
        pass


def model_id(cfg: Mapping) -> str:
    """The cache identity: the callable or factory, its kwargs, logprobs and ``revision``."""
    key = reference_key(cfg)
    layout = {"kwargs": cfg["kwargs"], "logprobs": cfg["logprobs"], "revision": cfg["revision"]}
    digest = hashlib.sha256(json.dumps(layout, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"python|{key}|{cfg[key]}|{digest}"


class PythonTarget:
    """A user's chain as a target: the attack's prompt is the query, nothing else is added; answers
    come from the response cache or the callable.  ``answer`` returns what
    :meth:`ragmi.rag.system.RAGSystem.answer` does, with the retrieved ids the chain reported."""

    def __init__(self, generator, logprobs: bool, temperature: float, seed: int, log: Callable = print):
        self.generator = generator
        self.logprobs = bool(logprobs)
        self.temperature = temperature
        self.seed = seed
        self.log = log
        self.defenses: list = []

    def answer(self, user_prompts, max_tokens, top_logprobs, query_ids=None) -> list[dict]:
        requests = [
            make_request(
                [{"role": "user", "content": str(q)}],
                mt,
                int(k) if self.logprobs else 0,
                self.temperature,
                self.seed,
            )
            for q, mt, k in zip(user_prompts, max_tokens, top_logprobs)
        ]
        out = []
        for resp in self.generator.generate(requests) if requests else []:
            r = dict(resp)
            r.setdefault("retrieved_ids", None)
            r["retrieval_scores"] = None
            r["retrieval_s"] = 0.0
            r["response_text_raw"] = r["response_text"]
            r["refused"] = False
            r["hook_trace"] = "[]"
            r["n_docs_truncated"] = None  # the chain builds its own prompt (ragmi.rag.fit)
            r["chars_truncated"] = None
            r["answer_replaced"] = None  # a remote service's own replacement (ragmi.rag.remote)
            out.append(r)
        return out


@contextlib.contextmanager
def python_target(spec, log):
    """The :class:`PythonTarget` of a ``TargetSpec`` of kind python; the callable is imported (and a
    factory called) only when an answer is not in the cache."""
    cfg = spec.target["python"]
    where = f"targets.{spec.name}.python"
    holder: dict = {}

    def backend():
        holder["client"] = PythonClient(cfg, where, log)
        return holder["client"]

    gen = CachedGenerator(model_id(cfg), backend, ResponseCache(spec.cache_dir), log=log)
    try:
        yield PythonTarget(gen, cfg["logprobs"], spec.temperature, spec.seed, log)
    finally:
        if gen.stats["requests"]:
            log(gen.summary())
        if "client" in holder:
            log(f"{holder['client'].name}: {holder['client'].stats['calls']} calls")
