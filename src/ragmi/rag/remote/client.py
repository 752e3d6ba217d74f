"""The HTTP side of a remote target (:class:`RemoteClient`): transport, retries with backoff, the
request budget, sessions, and ``concurrency`` requests in flight.  Reading the answers is
:mod:`ragmi.rag.remote.responses` and :mod:`ragmi.rag.remote.streams`."""

from __future__ import annotations

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

from ...errors import ConfigError, EndpointError
from ..concurrency import Cancelled, answer_concurrently
from .budget import RequestBudget
from .keys import SESSION_IDENTITY_KEYS, STREAM_JSON_KEYS
from .mapping import fill_body, json_path, query_text
from .responses import error_text, one_line, server_message
from .streams import StreamParser, _PartialStream

QUERY_ID_HEADER = "X-Ragmi-Query-Id"


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


class RemoteClient(StreamParser):
    """The HTTP side of a remote target: one request per generation request (two with a session
    opened per query: ``session_open_path``), answers in the generators' response format
    (``ragmi.rag.generators``), read by :class:`~ragmi.rag.remote.streams.StreamParser` (a stream) and
    :class:`~ragmi.rag.remote.responses.ResponseParser` (one JSON answer).

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
        self._stop = threading.Event()

    def model_id(self) -> str:
        """The cache identity: API, URL, model and the request/response layout (never the key)."""
        layout = {k: self.cfg.get(k) for k in ("body", "answer_path", "token_logprobs_path", "top_logprobs_path")}
        # keys added later enter the identity only when set, so answers cached without them stay valid
        for k in ("path", "stream", "sources_path", *STREAM_JSON_KEYS, *SESSION_IDENTITY_KEYS):
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

    @property
    def stats(self) -> dict:
        """This job's HTTP requests sent, retries among them and session opens (the budget's ledger
        has the rest: :attr:`RequestBudget.job`)."""
        job = self.budget.job
        return {"sent": job["sent"], "retried": job["retries"], "sessions": job["session_opens"]}

    def _failed(self, e: BaseException) -> str:
        """Count a request that got no HTTP answer (a timeout or a network error) in the ledger and
        say what happened."""
        self.budget.add(**{"timeouts" if self._timed_out(e) else "network_errors": 1})
        return self._network_problem(e)

    def _answered(self, status: int) -> None:
        """Count an HTTP answer in the ledger: 200, or an HTTP error by its status."""
        self.budget.add(**({"answered": 1} if status == 200 else {"http_errors": {status: 1}}))

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

    @staticmethod
    def _timed_out(e: BaseException) -> bool:
        return isinstance(getattr(e, "reason", e), socket.timeout | TimeoutError)

    def _network_problem(self, e: BaseException) -> str:
        reason = getattr(e, "reason", e)
        if self._timed_out(e):
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
            self.budget.take(session_open=True)
            retry_after = None
            try:
                status, data, retry_after = self._post(None, headers, url=url, stream=False)
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as e:
                problem = self._failed(e)
            else:
                self._answered(status)
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
                self.budget.add(retries=1)
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
            t0 = time.perf_counter()
            retry_after = None
            try:
                status, data, retry_after = self._post(body, headers, url=url)
            except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as e:
                problem = self._failed(e)
            else:
                self._answered(status)
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
                self.budget.add(retries=1)
                time.sleep(self._delay(attempt, retry_after))
        raise EndpointError(
            f"the remote endpoint {self.endpoint} failed after {retries + 1} attempt(s) "
            f"({self.where}.max_retries): {problem}"
        )

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
        """The job's log line: its HTTP requests and what came of them (the ledger's fields, this
        job's share), the run's budget and where the run's ledger is."""
        job = self.budget.job
        opened = f", {job['session_opens']} of them session opens" if job["session_opens"] else ""
        errors = sorted(job["http_errors"].items(), key=lambda kv: int(kv[0]))
        by_status = f" ({', '.join(f'{s}: {n}' for s, n in errors)})" if errors else ""
        budget = f"; budget {self.budget.limit} per run" if self.budget.limit is not None else ""
        ledger = f"; run ledger {self.budget.ledger}" if self.budget.ledger else ""
        return (
            f"remote endpoint {self.endpoint}: {job['sent']} HTTP requests ({job['retries']} retries{opened}): "
            f"{job['answered']} answered, {job['timeouts']} timeouts (no answer within {self.cfg['timeout_s']} s), "
            f"{sum(job['http_errors'].values())} HTTP errors{by_status}, {job['network_errors']} network errors"
            f"{budget}{ledger}"
        )

    def close(self):
        pass
