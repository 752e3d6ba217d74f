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

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..cache import ResponseCache
from ..config import STREAM_JSON_KEYS
from ..errors import ConfigError, EndpointError
from .generators import CachedGenerator, make_request

_MISSING = object()
QUERY_ID_HEADER = "X-Ragmi-Query-Id"


def json_path(doc, path: str):
    """The value at a dotted ``path`` (``data.answer``, ``choices.0.text``), or ``_MISSING``."""
    cur = doc
    for part in path.split(".") if path else []:
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def sources_at(doc, path: str) -> list[str]:
    """The source values at ``path``: ``a.b.*.c`` = field ``c`` of every item of the list at ``a.b``;
    without ``*`` the path names a list of strings.  Missing or null: no sources (``[]``)."""
    head, star, tail = path.partition("*")
    items = json_path(doc, head.rstrip("."))
    if items is _MISSING or items is None:
        return []
    if not isinstance(items, list):
        items = [items]
    out = []
    for item in items:
        v = json_path(item, tail.lstrip(".")) if star else item
        if v is not _MISSING and v is not None and str(v).strip():
            out.append(str(v))
    return out


def _fold(text: str) -> str:
    return " ".join(str(text).split()).casefold()


class SourceMatcher:
    """Which candidate document a source value names (``remote.sources_match``):

    * ``id``: the value is the document's ``doc_id``;
    * ``title``: the document's title, compared with case and runs of white space folded;
    * ``text_sha256``: the SHA-256 hex digest of the document's text (UTF-8);
    * ``text``: the value is a passage of at least :attr:`MIN_PASSAGE` characters contained in the
      document's text (case and white space folded) — the chunk a service retrieved out of it.

    A value naming several documents (a shared title, a passage two of them contain) names each; a
    value naming none is kept as ``remote:<value>``, so it can never be mistaken for a candidate id.
    ``aliases`` maps other values to a document's ``doc_id`` whatever ``how`` is: the ids the membership
    game wrote its members under in the target's store (``<id_prefix><run key>-<doc_id>``, from the
    game's manifest; docs/vector-stores.md), which a service reports as the ids of its sources.
    """

    MIN_PASSAGE = 32
    UNMATCHED = "remote:"

    def __init__(self, documents, how: str, aliases: Mapping[str, str] | None = None):
        self.how = how
        self.aliases = {str(k): str(v) for k, v in (aliases or {}).items()}
        self.ids = [str(d) for d in documents["doc_id"]]
        if how == "title":
            keys = [_fold(t) for t in documents["title"]]
        elif how == "text_sha256":
            keys = [hashlib.sha256(str(t).encode("utf-8")).hexdigest() for t in documents["text"]]
        elif how == "text":
            keys = [_fold(t) for t in documents["text"]]
        else:
            keys = list(self.ids)
        self.keys = keys
        self.index: dict[str, list[str]] = {}
        if how != "text":
            for k, d in zip(keys, self.ids):
                if k:
                    self.index.setdefault(k, []).append(d)

    def match(self, value: str) -> list[str]:
        if value in self.aliases:
            return [self.aliases[value]]
        if self.how == "text":
            v = _fold(value)
            hits = [d for k, d in zip(self.keys, self.ids) if len(v) >= self.MIN_PASSAGE and v in k]
        else:
            key = value.strip().lower() if self.how == "text_sha256" else value
            key = _fold(key) if self.how == "title" else key
            hits = self.index.get(key, [])
        return hits or [self.UNMATCHED + value]

    def retrieved_ids(self, sources: list[str]) -> list[str]:
        out: list[str] = []
        for v in sources:
            for d in self.match(v):
                if d not in out:
                    out.append(d)
        return out


def fill_body(template, query: str, request: Mapping, session_id: str | None = None):
    """The request body of ``api: json``: ``{query}`` replaced in every string (and ``{session_id}``
    by the session's id, when there is one), and the strings ``"{max_tokens}"``,
    ``"{top_logprobs}"``, ``"{temperature}"`` replaced by those numbers."""
    numbers = {
        "{max_tokens}": request["max_tokens"],
        "{top_logprobs}": request["top_logprobs"],
        "{temperature}": request["temperature"],
    }

    def fill(x):
        if isinstance(x, str):
            if x in numbers:
                return numbers[x]
            if session_id is not None:  # first: a query that quotes "{session_id}" stays as it is
                x = x.replace("{session_id}", session_id)
            return x.replace("{query}", query)
        if isinstance(x, list):
            return [fill(v) for v in x]
        if isinstance(x, Mapping):
            return {k: fill(v) for k, v in x.items()}
        return x

    return fill(copy.deepcopy(template))


def _top_list(entry, k: int) -> list[dict]:
    """One position's top-K alternatives as ``[{"token", "logprob"}]`` from a list of such objects
    or a ``{token: logprob}`` mapping (sorted by log-probability)."""
    if isinstance(entry, Mapping):
        items = sorted(entry.items(), key=lambda kv: -float(kv[1]))
        out = [{"token": str(t), "logprob": float(lp)} for t, lp in items]
    else:
        out = [{"token": str(a["token"]), "logprob": float(a["logprob"])} for a in entry or []]
    return out[:k] if k > 0 else out


def query_text(messages) -> str:
    """The text of the last user message (a string, or the text parts of a content list)."""
    for m in reversed(list(messages or [])):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return "".join(p.get("text", "") for p in c if isinstance(p, Mapping))
            return "" if c is None else str(c)
    return ""


class RequestBudget:
    """At most ``limit`` HTTP requests per run to one target (retries count; cache hits do not).

    With ``ledger`` (a file shared by the run's jobs, named by ``RAGMI_RUN_ID``) the count is kept
    there under an exclusive lock, so concurrent jobs share one budget; without it, in memory."""

    def __init__(self, limit: int | None, ledger: str | os.PathLike | None, where: str):
        self.limit = limit
        self.ledger = Path(ledger) if ledger else None
        self.where = where
        self.used = 0  # by this process
        self._count = 0
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, limit: int | None, cache_dir: str | None, target: str, where: str) -> RequestBudget:
        run = os.environ.get("RAGMI_RUN_ID")
        ledger = None
        if limit is not None and run and cache_dir:
            ledger = Path(cache_dir).parent / "remote_requests" / f"{target}.{run}.count"
        return cls(limit, ledger, where)

    def take(self) -> None:
        with self._lock:
            if self.limit is None:
                self.used += 1
                return
            if self.ledger is None:
                n = self._count
            else:
                import fcntl

                self.ledger.parent.mkdir(parents=True, exist_ok=True)
                with open(self.ledger, "a+", encoding="utf-8") as fh:
                    fcntl.flock(fh, fcntl.LOCK_EX)
                    fh.seek(0)
                    text = fh.read().strip()
                    n = int(text) if text else 0
                    if n < self.limit:
                        fh.seek(0)
                        fh.truncate()
                        fh.write(str(n + 1))
                        fh.flush()
            if n >= self.limit:
                raise EndpointError(
                    f"the request budget of this run is spent: {self.limit} requests ({self.where}.max_requests); "
                    "the answers obtained are in the response cache, a rerun resumes from them with a fresh budget"
                )
            self._count = n + 1
            self.used += 1


def resolve_dots(url: str) -> str:
    """``url`` with the ``.`` and ``..`` segments of its path resolved (RFC 3986, section 5.2.4), so
    that ``url`` + ``path`` may name a sibling of ``url``: ``https://h/chat/api/<id>`` +
    ``/../open`` = ``https://h/chat/api/open``.  A ``..`` above the root stays at the root."""
    parts = urllib.parse.urlsplit(url)
    segs = parts.path.split("/")
    if "." not in segs and ".." not in segs:
        return url
    out: list[str] = []
    for seg in segs[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    path = "/" + "/".join(out)
    if segs[-1] in (".", "..") and not path.endswith("/"):
        path += "/"
    return urllib.parse.urlunsplit(parts._replace(path=path))


class RemoteClient:
    """The HTTP side of a remote target: one request per generation request (two with a session
    opened per query: ``session_open_path``), answers in the generators' response format
    (``ragmi.rag.generators``).

    Sessions (``session_open_path``, MaxKB's chat API): before a message, ``GET <url><session_open_path>``
    returns a session (chat) id at ``session_id_path``; the message goes to ``path`` with the id in
    place of ``{session_id}`` (in the body too).  ``session: per_query`` (the default) opens a fresh
    session for every message sent, a retry included (the failed attempt may have entered the
    session's history), so no answer depends on another query; ``per_worker`` keeps one per worker
    thread and drops it after a failed attempt; a fixed ``session_id`` opens none.  Session ids are
    kept in memory only: never in the cache identity, a cached answer or a log line."""

    def __init__(self, cfg: Mapping, where: str, budget: RequestBudget | None = None, log: Callable = print):
        self.cfg = dict(cfg)
        self.where = where
        self.url = cfg["url"].rstrip("/") if cfg["api"] == "openai" else cfg["url"]
        self.endpoint = resolve_dots(
            self.url + "/chat/completions" if cfg["api"] == "openai" else self.url + cfg["path"]
        )
        self.session_url = resolve_dots(self.url + cfg["session_open_path"]) if cfg.get("session_open_path") else None
        self.fixed_session = cfg.get("session_id")
        self.session_mode = cfg.get("session") or "per_query"
        self._local = threading.local()  # per_worker: each worker thread's open session
        self.budget = budget or RequestBudget(None, None, where)
        self.log = log
        self._secret = None
        headers = {"Content-Type": "application/json", **dict(cfg["headers"])}
        var = cfg.get("api_key_env")
        if var:
            key = os.environ.get(var)
            if not key:
                raise ConfigError(
                    f"config key {where}.api_key_env: the API key is read from the environment variable {var}, "
                    "which is not set"
                )
            self._secret = key
            headers[cfg["auth_header"]] = f"{cfg['auth_prefix']}{key}"
        self._headers = headers
        self.stats = {"sent": 0, "retried": 0, "sessions": 0}
        self._stats_lock = threading.Lock()
        self._stop = threading.Event()

    def model_id(self) -> str:
        """The cache identity: API, URL, model and the request/response layout (never the key)."""
        layout = {k: self.cfg.get(k) for k in ("body", "answer_path", "token_logprobs_path", "top_logprobs_path")}
        # keys added later enter the identity only when set, so answers cached without them stay valid
        for k in ("path", "stream", "sources_path", *STREAM_JSON_KEYS, *SESSION_KEYS):
            if self.cfg.get(k):
                layout[k] = self.cfg[k]
        if self.cfg.get("sources_path"):
            layout["sources_match"] = self.cfg["sources_match"]
        if self.session_url or self.fixed_session:
            # the answers depend on the conversation they are part of; the ids of opened sessions
            # are not part of the identity (they differ at every run)
            layout["session"] = "fixed" if self.fixed_session else self.session_mode
        digest = hashlib.sha256(json.dumps(layout, sort_keys=True).encode()).hexdigest()[:16]
        return f"remote|{self.cfg['api']}|{self.url}|{self.cfg['model']}|logprobs={self.cfg['logprobs']}|{digest}"

    def _clean(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def payload(self, req: Mapping, session_id: str | None = None) -> dict:
        if self.cfg["api"] == "json":
            return fill_body(self.cfg["body"], query_text(req["messages"]), req, session_id)
        body = {
            "model": self.cfg["model"],
            "messages": req["messages"],
            "max_tokens": req["max_tokens"],
            "temperature": req["temperature"],
            "seed": req["seed"],
        }
        if self.cfg["stream"]:
            body["stream"] = True
        if self.cfg["logprobs"]:
            body["logprobs"] = True
            if req["top_logprobs"] > 0:
                body["top_logprobs"] = req["top_logprobs"]
        return body

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _post(self, body: bytes | None, headers: Mapping, url: str | None = None, stream: bool | None = None):
        """(status, response bytes, Retry-After seconds or None) of a POST of ``body`` to ``url``
        (the endpoint), or of a GET when ``body`` is None; network failures raise OSError."""
        stream = self.cfg["stream"] if stream is None else stream
        method = "GET" if body is None else "POST"
        request = urllib.request.Request(url or self.endpoint, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.cfg["timeout_s"]) as resp:
                if not stream:
                    return resp.status, resp.read(), None
                # a stream: timeout_s bounds the whole answer, not only each read
                deadline = time.monotonic() + self.cfg["timeout_s"]
                chunks = []
                while True:
                    piece = resp.read1(65536)
                    if not piece:
                        break
                    chunks.append(piece)
                    if time.monotonic() > deadline:
                        raise TimeoutError("stream not finished within timeout_s")
                return resp.status, b"".join(chunks), None
        except urllib.error.HTTPError as e:
            retry_after = e.headers.get("Retry-After") if e.headers else None
            try:
                wait = float(retry_after) if retry_after is not None else None
            except ValueError:
                wait = None
            try:
                data = e.read()
            except OSError:
                data = b""
            return e.code, data, wait

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        d = self.cfg["backoff_s"] * (2**attempt)
        if retry_after is not None:
            d = max(d, retry_after)
        return min(d, self.cfg["max_backoff_s"])

    def _network_problem(self, e: BaseException) -> str:
        reason = getattr(e, "reason", e)
        if isinstance(reason, socket.timeout | TimeoutError):
            return f"no answer within {self.cfg['timeout_s']} s ({self.where}.timeout_s)"
        return f"cannot reach it ({self._clean(str(reason))})"

    def _session(self) -> str | None:
        """The session id for the next message: none, the fixed one, this worker's, or a new one."""
        if self.fixed_session:
            return self.fixed_session
        if self.session_url is None:
            return None
        if self.session_mode == "per_worker":
            sid = getattr(self._local, "session", None)
            if sid is None:
                sid = self._local.session = self.open_session()
            return sid
        return self.open_session()

    def _drop_session(self) -> None:
        self._local.session = None

    def open_session(self) -> str:
        """``GET <url><session_open_path>`` (with retries, counted against the budget) and the id
        at ``session_id_path`` of its answer; a failure raises EndpointError with one sentence that
        names the status and the server's message (never the key)."""
        url, where = self.session_url, f"{self.where}.session_open_path"
        headers = {k: v for k, v in self._headers.items() if k.lower() != "content-type"}
        retries = self.cfg["max_retries"]
        problem = ""
        for attempt in range(retries + 1):
            if self._stop.is_set():
                raise Cancelled()
            self.budget.take()
            self._count("sent")
            self._count("sessions")
            retry_after = None
            try:
                status, data, retry_after = self._post(None, headers, url=url, stream=False)
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as e:
                problem = self._network_problem(e)
            else:
                if status == 200:
                    return self._session_id(data)
                excerpt = self._clean(server_message(data))
                if status in (401, 403):
                    raise EndpointError(
                        f"the remote endpoint {url} could not open a session: HTTP {status}, it rejected the "
                        f"credentials ({self.where}.api_key_env){': ' + excerpt if excerpt else ''}"
                    )
                problem = f"HTTP {status}{': ' + excerpt if excerpt else ''}"
                if status != 429 and status < 500:
                    raise EndpointError(f"the remote endpoint {url} could not open a session: {problem} ({where})")
            if attempt < retries:
                self._count("retried")
                time.sleep(self._delay(attempt, retry_after))
        raise EndpointError(
            f"the remote endpoint {url} could not open a session after {retries + 1} attempt(s) "
            f"({self.where}.max_retries): {problem}"
        )

    def _session_id(self, data: bytes) -> str:
        path = self.cfg["session_id_path"]
        doc = self._json(data)
        sid = json_path(doc, path)
        if isinstance(sid, bool) or not isinstance(sid, str | int) or not str(sid).strip():
            # MaxKB answers a refusal (an unknown or unpublished application) with HTTP 200 and
            # {"code": 500, "message": ..., "data": null}
            raise EndpointError(
                f"the remote endpoint {self.session_url} answered no session id at {path!r} "
                f"({self.where}.session_id_path): {self._clean(one_line(error_text(doc)))}"
            )
        return str(sid)

    def request(self, req: Mapping) -> dict:
        """Send one request (with retries) and parse its answer; raise EndpointError with one sentence.
        With sessions, each attempt first takes its session (``_session``: opened per attempt by
        default), so a retried query is not answered inside the failed attempt's conversation."""
        headers = dict(self._headers)
        if "query_id" in req:  # remote.send_query_id
            headers[QUERY_ID_HEADER] = str(req["query_id"])
        sessions = bool(self.session_url or self.fixed_session)
        body = None if sessions else json.dumps(self.payload(req), ensure_ascii=False).encode("utf-8")
        retries = self.cfg["max_retries"]
        problem = ""
        for attempt in range(retries + 1):
            if self._stop.is_set():
                raise Cancelled()
            url = self.endpoint
            if sessions:
                sid = self._session()
                url = self.endpoint.replace("{session_id}", urllib.parse.quote(sid, safe=""))
                body = json.dumps(self.payload(req, sid), ensure_ascii=False).encode("utf-8")
            self.budget.take()
            self._count("sent")
            t0 = time.perf_counter()
            retry_after = None
            try:
                status, data, retry_after = self._post(body, headers, url=url)
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as e:
                problem = self._network_problem(e)
            else:
                latency = time.perf_counter() - t0
                if status == 200 and not self.cfg["stream"]:
                    return self.parse(data, req, latency)
                if status == 200:
                    try:
                        return self.parse_stream(data, req, latency)
                    except _PartialStream as e:  # cut off: no answer, retried like one that did not come
                        problem = str(e)
                else:
                    excerpt = self._clean(server_message(data))
                    if status in (401, 403):
                        raise EndpointError(
                            f"the remote endpoint {self.endpoint} answered HTTP {status}: it rejected the "
                            f"credentials ({self.where}.api_key_env){': ' + excerpt if excerpt else ''}"
                        )
                    problem = f"HTTP {status}{': ' + excerpt if excerpt else ''}"
                    if status != 429 and status < 500:
                        raise EndpointError(f"the remote endpoint {self.endpoint} answered {problem} ({self.where})")
            if sessions:
                self._drop_session()  # per_worker: the next attempt opens a fresh one
            if attempt < retries:
                self._count("retried")
                time.sleep(self._delay(attempt, retry_after))
        raise EndpointError(
            f"the remote endpoint {self.endpoint} failed after {retries + 1} attempt(s) "
            f"({self.where}.max_retries): {problem}"
        )

    def _json(self, data: bytes, what: str = "answered with something that is not JSON"):
        try:
            return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} {what}: "
                f"{self._clean(data[:120].decode('utf-8', 'replace') if isinstance(data, bytes) else data[:120])!r}"
            ) from None

    def parse(self, data: bytes, req: Mapping, latency: float) -> dict:
        where, cfg = self.where, self.cfg
        doc = self._json(data)
        k = int(req["top_logprobs"])
        token_lps, tops = [], []
        if cfg["api"] == "openai":
            answer_path = "choices.0.message.content"
            text = json_path(doc, answer_path)
            if text is None and json_path(doc, "choices.0.message") is not _MISSING:
                text = ""  # OpenAI's null content: an empty answer
            if cfg["logprobs"]:
                content = json_path(doc, "choices.0.logprobs.content")
                if content is _MISSING or content is None:
                    raise EndpointError(
                        f"the remote endpoint {self.endpoint} answered without choices.0.logprobs.content, but "
                        f"{where}.logprobs is true (set it to false for an endpoint without log-probabilities)"
                    )
                token_lps = [float(t["logprob"]) for t in content]
                if k > 0:
                    tops = [_top_list(t.get("top_logprobs"), k) for t in content]
            pt = json_path(doc, "usage.prompt_tokens")
            ct = json_path(doc, "usage.completion_tokens")
        else:
            answer_path = cfg["answer_path"]
            text = json_path(doc, answer_path)
            if cfg["logprobs"]:
                if "token_logprobs_path" in cfg:
                    v = json_path(doc, cfg["token_logprobs_path"])
                    if v is _MISSING or not isinstance(v, list):
                        raise EndpointError(
                            f"the remote endpoint {self.endpoint} answered without a list at "
                            f"{cfg['token_logprobs_path']!r} ({where}.token_logprobs_path)"
                        )
                    token_lps = [float(x) for x in v]
                if "top_logprobs_path" in cfg and k > 0:
                    v = json_path(doc, cfg["top_logprobs_path"])
                    if v is _MISSING or not isinstance(v, list):
                        raise EndpointError(
                            f"the remote endpoint {self.endpoint} answered without a list at "
                            f"{cfg['top_logprobs_path']!r} ({where}.top_logprobs_path)"
                        )
                    tops = [_top_list(x, k) for x in v]
            pt = json_path(doc, cfg["prompt_tokens_path"]) if "prompt_tokens_path" in cfg else _MISSING
            ct = json_path(doc, cfg["completion_tokens_path"]) if "completion_tokens_path" in cfg else _MISSING
        return self._answer(text, answer_path, token_lps, tops, pt, ct, self._sources(doc), latency)

    def _sources(self, doc) -> list[str]:
        return sources_at(doc, self.cfg["sources_path"]) if "sources_path" in self.cfg else []

    def _answer(self, text, answer_path, token_lps, tops, pt, ct, sources, latency, replaced=None) -> dict:
        where, cfg = self.where, self.cfg
        if text is _MISSING:
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered without the answer field {answer_path!r}"
                + (f" ({where}.answer_path)" if cfg["api"] == "json" else f" ({where}.api is openai)")
            )
        if not isinstance(text, str):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered a {type(text).__name__} at {answer_path!r}, not text"
                + (f" ({where}.answer_path)" if cfg["api"] == "json" else "")
            )
        if not text.strip() and cfg["on_empty_answer"] == "error":
            raise EndpointError(
                f"the remote endpoint {self.endpoint} answered an empty answer at {answer_path!r} "
                f"({where}.on_empty_answer: error; set it to keep to accept empty answers)"
            )
        return {
            "response_text": text,
            "first_token_logprobs": tops[0] if tops else [],
            "token_logprobs": token_lps,
            "token_top_logprobs": tops,
            "prompt_tokens": int(pt) if isinstance(pt, int | float) else 0,
            "completion_tokens": int(ct) if isinstance(ct, int | float) else 0,
            "latency_s": latency,
            "sources": sources,
            "answer_replaced": replaced,
        }

    def parse_stream(self, data: bytes, req: Mapping, latency: float) -> dict:
        """The answer of a server-sent event stream (``stream: true``): OpenAI's chat-completion
        chunks up to ``data: [DONE]`` (api openai), or events whose text pieces sit at
        ``stream_path`` (api json).  A stream without its end marker raises :class:`_PartialStream`."""
        events = sse_events(data.decode("utf-8", "replace"))
        if self.cfg["api"] == "openai":
            return self._openai_stream(events, req, latency)
        return self._json_stream(events, latency)

    def _openai_stream(self, events, req, latency) -> dict:
        cfg, k = self.cfg, int(req["top_logprobs"])
        pieces, token_lps, tops, usage, done, seen = [], [], [], None, False, False
        for _, payload in events:
            if payload.strip() == "[DONE]":
                done = True
                break
            chunk = self._json(payload, "streamed an event that is not JSON")
            if isinstance(chunk, Mapping) and chunk.get("error"):
                raise EndpointError(
                    f"the remote endpoint {self.endpoint} streamed an error ({self.where}): "
                    f"{self._clean(one_line(error_text(chunk)))}"
                )
            if json_path(chunk, "usage") not in (_MISSING, None):
                usage = json_path(chunk, "usage")
            delta = json_path(chunk, "choices.0.delta")
            if delta is _MISSING:
                continue
            seen = True
            piece = json_path(chunk, "choices.0.delta.content")
            if isinstance(piece, str):
                pieces.append(piece)
            content = json_path(chunk, "choices.0.logprobs.content")
            if isinstance(content, list):
                token_lps += [float(t["logprob"]) for t in content]
                if k > 0:
                    tops += [_top_list(t.get("top_logprobs"), k) for t in content]
        if not done:
            raise _PartialStream(f"the stream ended before its 'data: [DONE]' line ({len(pieces)} pieces received)")
        if cfg["logprobs"] and seen and not token_lps and "".join(pieces):
            raise EndpointError(
                f"the remote endpoint {self.endpoint} streamed no choices.0.logprobs.content, but "
                f"{self.where}.logprobs is true (set it to false for an endpoint without log-probabilities)"
            )
        text = "".join(pieces) if seen else _MISSING
        pt = json_path(usage, "prompt_tokens") if usage else _MISSING
        ct = json_path(usage, "completion_tokens") if usage else _MISSING
        return self._answer(text, "choices.0.delta.content", token_lps, tops, pt, ct, [], latency)

    def _json_stream(self, events, latency) -> dict:
        cfg = self.cfg
        want = set(cfg["stream_text_events"]) if "stream_text_events" in cfg else None
        end_event, error_event = cfg.get("stream_end_event"), cfg.get("stream_error_event")
        replace_event = cfg.get("stream_replace_event")
        pieces, last, end, seen, replaced = [], {}, None, False, False
        for name, payload in events:
            if payload.strip() == "[DONE]":
                end = end if end is not None else last
                break
            doc = self._json(payload, "streamed an event that is not JSON")
            kind = json_path(doc, cfg["stream_event_path"]) if "stream_event_path" in cfg else name
            if kind is not _MISSING and not isinstance(kind, str):
                kind = json.dumps(kind)  # MaxKB's is_end: true / false
            if error_event is not None and kind == error_event:
                raise EndpointError(
                    f"the remote endpoint {self.endpoint} streamed an error event ({self.where}): "
                    f"{self._clean(one_line(error_text(doc)))}"
                )
            if replace_event is not None and kind == replace_event:
                # Dify's message_replace: its answer replaces all the text so far; later pieces append
                piece = json_path(doc, cfg["stream_path"])
                if isinstance(piece, str):
                    pieces, seen, replaced = [piece], True, True
            elif want is None or kind in want:
                piece = json_path(doc, cfg["stream_path"])
                if isinstance(piece, str):
                    pieces.append(piece)
                    seen = True
            last = doc
            if end_event is not None and kind == end_event:
                end = doc
                break
        if end_event is not None and end is None:
            raise _PartialStream(f"the stream ended before its {end_event!r} event ({len(pieces)} pieces received)")
        final = end if end is not None else last
        pt = json_path(final, cfg["prompt_tokens_path"]) if "prompt_tokens_path" in cfg else _MISSING
        ct = json_path(final, cfg["completion_tokens_path"]) if "completion_tokens_path" in cfg else _MISSING
        text = "".join(pieces) if seen or end is not None else _MISSING
        flag = replaced if replace_event is not None else None  # None: the stream cannot say
        return self._answer(text, cfg["stream_path"], [], [], pt, ct, self._sources(final), latency, flag)

    def generate(self, requests: list[dict], on_result: Callable | None = None) -> list[dict]:
        """Answer every request, ``concurrency`` at a time; ``on_result(i, answer)`` as each arrives.
        On the first failure no further request is sent, the answers of those in flight are still
        reported (and so cached), then the failure is raised."""
        if not requests:
            return []
        self._stop.clear()
        n = min(self.cfg["concurrency"], len(requests))
        self.log(f"  {n} requests in flight at most to {self.endpoint}")
        return answer_concurrently(requests, self._guarded, n, self._stop, self.log, on_result)

    def _guarded(self, req: Mapping) -> dict:
        """:meth:`request`, and on its failure no further request of the batch is sent."""
        try:
            return self.request(req)
        except Cancelled:
            raise
        except BaseException:
            self._stop.set()
            raise

    def summary(self) -> str:
        limit = self.budget.limit
        budget = f", budget {self.budget.limit} per run" if limit is not None else ""
        opened = f", {self.stats['sessions']} of them session opens" if self.stats["sessions"] else ""
        return (
            f"remote endpoint {self.endpoint}: {self.stats['sent']} HTTP requests "
            f"({self.stats['retried']} retries{opened}){budget}"
        )

    def close(self):
        pass


class _PartialStream(Exception):
    """A streamed answer cut off before its end marker: not an answer (retried, then an error)."""


SESSION_KEYS = ("session_open_path", "session_id_path", "session_id")


def sse_events(text: str) -> list[tuple[str, str]]:
    """The (event type, data) of every event of a server-sent event stream (the WHATWG HTML
    standard's event-stream format: fields ``event:`` and ``data:``, several data lines joined by a
    newline, events ended by a blank line, ``:`` comments ignored); the type is ``message`` when the
    event names none.  An event not ended by a blank line (a cut-off stream) is still returned: the
    callers tell a complete stream by its end marker."""
    out, name, data = [], "", []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data:
                out.append((name or "message", "\n".join(data)))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    if data:
        out.append((name or "message", "\n".join(data)))
    return out


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line (runs of white space folded), shortened to ``limit`` characters."""
    t = " ".join(str(text).split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def error_text(doc) -> str:
    """The message of an error body: OpenAI's ``error.message``, ``message``, ``detail`` or ``error``
    (Dify, FastAPI, others), else the whole body."""
    if isinstance(doc, Mapping):
        err = doc.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail", "error", "msg"):
            if isinstance(doc.get(key), str) and doc[key].strip():
                return doc[key]
    return json.dumps(doc, ensure_ascii=False) if not isinstance(doc, str) else doc


def server_message(data: bytes) -> str:
    """The server's error message in an error response, on one line."""
    text = data.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return one_line(text)
    return one_line(error_text(doc))


class Cancelled(Exception):
    """A queued request not sent (or call not made) because another one of its batch failed."""


def answer_concurrently(
    requests: list, call: Callable, n: int, stop: threading.Event, log: Callable, on_result: Callable | None = None
) -> list:
    """``call(request)`` for every request, ``n`` at a time; ``on_result(i, answer)`` as each arrives.
    On the first failure ``stop`` is set (``call`` then raises :class:`Cancelled` for what is still
    queued), the answers of the calls in flight are still reported (and so cached), then the failure
    is raised.  Shared by remote targets and python targets (``ragmi.rag.python_target``)."""
    results: list = [None] * len(requests)
    failure = None
    done = 0
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = {pool.submit(call, r): i for i, r in enumerate(requests)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                res = fut.result()
            except Cancelled:
                continue
            except BaseException as e:  # noqa: BLE001 - stop sending, keep what arrived, re-raise
                if failure is None:
                    failure = e
                    stop.set()
                continue
            results[i] = res
            if on_result is not None:
                on_result(i, res)
            done += 1
            if done % max(1, len(requests) // 10) == 0 or done == len(requests):
                log(f"  answered {done}/{len(requests)}")
    if failure is not None:
        log(f"  {done} answers obtained before the failure (kept in the response cache)")
        raise failure
    return results


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
