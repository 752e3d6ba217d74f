"""A remote target: a RAG service reached over HTTP that does its own retrieval (``targets.<t>.kind:
remote``, the schema's ``$defs.remote``).

The attack's query goes out as the user message of an OpenAI-compatible chat request (``api:
openai``: ``POST <url>/chat/completions``) or inside the configured request body (``api: json``);
the answer, and the token log-probabilities when the service returns them (``logprobs: true``), are
read back from the configured places, from one JSON answer or from a stream of server-sent events
(``stream: true``: OpenAI's chat-completion chunks, or any event stream whose text pieces sit at
``stream_path``, such as Dify's).  The sources the service says it retrieved (``sources_path``) are
matched to the candidate documents (``sources_match``, :class:`SourceMatcher`) and recorded as the
response's ``retrieved_ids``.  ``preset: dify | maxkb | maxkb_v1 | maxkb_openai`` fills the keys of
those platforms' documented chat APIs (``config/schema.yaml`` ``$defs.remote_presets``); a service
that answers inside a session (MaxKB's chat API) has one opened for each query first
(``session_open_path``, :meth:`RemoteClient.open_session`).  What a job sends is bounded (``concurrency`` requests in
flight), retried with exponential backoff on 429 / 5xx / no answer (``max_retries``, ``backoff_s``,
``max_backoff_s``, a ``Retry-After`` header honoured), cut off after ``timeout_s``, and counted
against the run's request budget (``max_requests``, :class:`RequestBudget`).

Every answer goes through :class:`~ragmi.rag.generators.CachedGenerator`: it is stored in the
response cache the moment it arrives, so a job stopped by a misbehaving endpoint or a spent budget
keeps what it obtained and its rerun resumes.  The API key is read from the environment variable
``api_key_env`` names; it lives only in the request headers of this process — never in the cache
identity, a cached entry, a log line or an error message.

:class:`RemoteTarget` answers like :class:`~ragmi.rag.system.RAGSystem` (``answer(prompts,
max_tokens, top_logprobs, query_ids)``), with what a black box gives: no retrieved ids (``None``:
unknown, unless ``sources_path`` reads them from the response), no hook trace.
"""

from .budget import RequestBudget
from .client import QUERY_ID_HEADER, RemoteClient, resolve_dots
from .keys import SESSION_KEYS, STREAM_JSON_KEYS, check_remote_api, check_remote_target, check_session
from .mapping import SourceMatcher, fill_body, json_path, query_text, sources_at
from .responses import error_text, one_line, server_message
from .streams import sse_events
from .target import RemoteTarget, remote_target

__all__ = [
    "QUERY_ID_HEADER",
    "SESSION_KEYS",
    "STREAM_JSON_KEYS",
    "RemoteClient",
    "RemoteTarget",
    "RequestBudget",
    "SourceMatcher",
    "check_remote_api",
    "check_remote_target",
    "check_session",
    "error_text",
    "fill_body",
    "json_path",
    "one_line",
    "query_text",
    "remote_target",
    "resolve_dots",
    "server_message",
    "sources_at",
    "sse_events",
]
