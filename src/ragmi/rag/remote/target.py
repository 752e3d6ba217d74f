"""A remote RAG service as a target (:class:`RemoteTarget`) and the context manager that builds one
from a ``TargetSpec`` of kind remote (:func:`remote_target`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ...cache import ResponseCache
from ...errors import ConfigError
from ..generators import CachedGenerator, make_request
from .budget import RequestBudget
from .client import RemoteClient
from .mapping import SourceMatcher


class RemoteTarget:
    """A remote RAG service as a target: the attack's prompt is the user message, nothing else is
    added (the service builds its own context); answers come from the response cache or the endpoint."""

    def __init__(
        self,
        generator,
        logprobs: bool,
        temperature: float,
        seed: int,
        log: Callable = print,
        send_query_id=False,
        sources: SourceMatcher | None = None,
    ):
        self.generator = generator
        self.sources = sources  # None: the service's retrieval is not visible
        self.logprobs = bool(logprobs)
        self.send_query_id = bool(send_query_id)
        self.temperature = temperature
        self.seed = seed
        self.log = log
        self.defenses: list = []

    def answer(self, user_prompts, max_tokens, top_logprobs, query_ids=None) -> list[dict]:
        query_ids = query_ids or [str(i) for i in range(len(user_prompts))]
        requests = [
            make_request(
                [{"role": "user", "content": str(q)}],
                mt,
                int(k) if self.logprobs else 0,  # a service without log-probabilities is asked for none
                self.temperature,
                self.seed,
            )
            for q, mt, k in zip(user_prompts, max_tokens, top_logprobs)
        ]
        if self.send_query_id:
            requests = [dict(r, query_id=str(qid)) for r, qid in zip(requests, query_ids)]
        out = []
        for resp in self.generator.generate(requests) if requests else []:
            r = dict(resp)
            # the sources the service reported, matched to the candidates; None: unknown
            r["retrieved_ids"] = None if self.sources is None else self.sources.retrieved_ids(r.pop("sources", []))
            r.pop("sources", None)
            r["retrieval_scores"] = None
            r["n_docs_truncated"] = None  # the service builds its own prompt
            r["chars_truncated"] = None
            # the service replaced its answer (Dify's message_replace); None: it cannot say, or an
            # answer cached before the flag existed
            r["answer_replaced"] = r.get("answer_replaced")
            r["retrieval_s"] = 0.0
            r["response_text_raw"] = r["response_text"]
            r["refused"] = False
            r["hook_trace"] = "[]"
            out.append(r)
        return out


@contextlib.contextmanager
def remote_target(spec, log, documents=None, aliases=None):
    """The :class:`RemoteTarget` of a ``TargetSpec`` of kind remote (``ragmi.rag.factory``);
    ``documents`` (doc_id, text, title of the candidates) when ``sources_path`` is set, and ``aliases``
    (the store game's ids of the members, :class:`SourceMatcher`) when the target has a store."""
    cfg = spec.target["remote"]
    where = f"targets.{spec.name}.remote"
    budget = RequestBudget.for_run(cfg["max_requests"], spec.cache_dir, spec.name, where)
    client = RemoteClient(cfg, where, budget, log)  # a missing API key stops here, before any request
    gen = CachedGenerator(client.model_id(), lambda: client, ResponseCache(spec.cache_dir), log=log)
    try:
        matcher = None
        if "sources_path" in cfg:
            if documents is None:
                raise ConfigError(f"{where}.sources_path: the candidate documents to match the sources to are missing")
            matcher = SourceMatcher(documents, cfg["sources_match"], aliases)
        yield RemoteTarget(gen, cfg["logprobs"], spec.temperature, spec.seed, log, cfg["send_query_id"], matcher)
    finally:
        if gen.stats["requests"]:
            log(gen.summary())
        if client.stats["sent"]:
            log(client.summary())
