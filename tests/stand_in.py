"""A stand-in HTTP endpoint for the tests of clients (remote targets, the generators' chat client),
and the bodies it answers: an OpenAI-compatible chat completion, its streamed form, any server-sent
event stream."""

import http.server
import json
import threading


def openai_body(text, logprobs=None, usage=(7, 2)):
    """A chat completion answering ``text``; ``logprobs``: its ``logprobs.content`` list, if any."""
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {"choices": [choice], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}


def logprobs_content(steps, k=None):
    """``logprobs.content`` for ``steps`` of (token, logprob, [(alternative, logprob), ...]), each
    with its first ``k`` alternatives (all when ``k`` is None)."""
    return [
        {"token": t, "logprob": lp, "top_logprobs": [{"token": a, "logprob": b} for a, b in alts[:k]]}
        for t, lp, alts in steps
    ]


def sse(events):
    """A server-sent event stream: ``events`` of data (a JSON-able object, or a string sent as is)
    or (event type, data); every event ended by a blank line."""
    out = []
    for e in events:
        name, data = e if isinstance(e, tuple) else (None, e)
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + "".join(f"data: {x}\n" for x in text.split("\n")) + "\n")
    return "".join(out).encode()


SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def openai_chunks(pieces, logprobs=None, done=True, usage=(7, 2)):
    """The event stream of a streamed chat completion (OpenAI's chat.completion.chunk objects): one
    chunk per text piece (with its ``logprobs.content`` entries when ``logprobs`` gives them), a final
    chunk with the usage, then ``data: [DONE]`` unless ``done`` is false (a cut-off stream)."""
    events = []
    for i, p in enumerate(pieces):
        choice = {"index": 0, "delta": {"content": p}, "finish_reason": None}
        if logprobs is not None:
            choice["logprobs"] = {"content": logprobs[i]}
        events.append({"object": "chat.completion.chunk", "choices": [choice]})
    events.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append(
        {
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        }
    )
    if done:
        events.append("[DONE]")
    return sse(events)


class StandIn:
    """A stand-in endpoint: ``reply(n, path, body, headers) -> (status, doc, headers)`` per request
    (``n`` counts requests from 1; ``body`` is None for a GET); every request is recorded."""

    def __init__(self, reply):
        self.reply = reply
        self.requests = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        stand_in = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                self.answer(None)

            def do_POST(self):
                self.answer(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

            def answer(self, body):
                with stand_in.lock:
                    stand_in.requests.append(
                        {"method": self.command, "path": self.path, "body": body, "headers": dict(self.headers)}
                    )
                    n = len(stand_in.requests)
                    stand_in.in_flight += 1
                    stand_in.peak = max(stand_in.peak, stand_in.in_flight)
                try:
                    status, doc, headers = stand_in.reply(n, self.path, body, self.headers)
                finally:
                    with stand_in.lock:
                        stand_in.in_flight -= 1
                data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
                self.send_response(status)
                headers = dict(headers or {})
                headers.setdefault("Content-Type", "application/json")
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 64

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class MaxKB:
    """MaxKB's chat API with an application API key, as its source (1Panel-dev/MaxKB: apps/chat/urls.py
    and apps/chat/views/chat.py in version 2, apps/application/urls.py in 1.x, the responses of
    common/handle/impl/response/system_to_response.py and common/result) and its documentation's
    screenshots of the calls describe it:

    * open: ``GET /chat/api/open`` (2) or ``GET /api/application/<application id>/chat/open`` (1)
      answers ``{"code": 200, "message": ..., "data": "<chat id>"}``; an unknown application is
      answered HTTP 200 with ``code`` 500 and ``data`` null;
    * message: ``POST /chat/api/chat_message/<chat id>`` (2) or ``/api/application/chat_message/<chat
      id>`` (1) with ``{"message", "re_chat", "stream"}``: blocking ``{"code": 200, "data": {"chat_id",
      "id", "operate", "content", "is_end": true, "completion_tokens", "prompt_tokens"}}``, streamed
      ``data:`` events ``{"chat_id", "chat_record_id", "operate", "content", "node_id",
      "up_node_id_list", "is_end", "usage"}`` ending with one whose ``is_end`` is true; a chat id that
      was never opened is answered HTTP 500 ``{"code": 500, "message": "Conversation does not exist"}``;
    * the key: ``Authorization: Bearer <key>`` (2), ``Authorization: <key>`` (1); else HTTP 401.

    Each chat keeps its messages, and an answer says how many came before it in its chat (the
    conversation memory a membership attack must not let in), or ``answer(message, history)`` is
    the answer.  ``fail_first``: answer the first ``n`` messages HTTP 502 (after recording them in
    their chat, as a server may)."""

    def __init__(self, key: str, app_id: str, version: int = 2, fail_first: int = 0, answer=None):
        import uuid

        self.key, self.app_id, self.version, self.fail_first = key, app_id, version, fail_first
        self.answer = answer or (
            lambda message, history: f"MaxKB says: {message}" + (f" (after {len(history)} earlier)" if history else "")
        )
        self.chats: dict[str, list[str]] = {}
        self.messages = 0
        self._uuid = uuid.uuid4
        base = "/chat/api" if version == 2 else "/api/application"
        self.open_path = f"{base}/open" if version == 2 else f"{base}/{app_id}/chat/open"
        self.message_prefix = f"{base}/chat_message/"
        self.base_url = f"{base}/{app_id}"  # the application's Base URL, after the host
        self.server = StandIn(self.reply)
        self.url = self.server.url + self.base_url
        self.requests = self.server.requests

    @staticmethod
    def result(code, message, data, status=200):
        return status, {"code": code, "message": message, "data": data}, None

    def reply(self, n, path, body, headers):
        auth = headers.get("Authorization")
        want = f"Bearer {self.key}" if self.version == 2 else self.key
        if auth != want:
            return self.result(1002, "Authentication information is incorrect! illegal user", None, 401)
        if body is None:
            if path == self.open_path:
                chat_id = str(self._uuid())
                with self.server.lock:
                    self.chats[chat_id] = []
                return self.result(200, "成功", chat_id)
            if self.version == 1 and path.startswith("/api/application/") and path.endswith("/chat/open"):
                return self.result(500, "Application does not exist", None)  # MaxKB: HTTP 200, code 500
            return 404, b"Not Found", {"Content-Type": "text/html"}
        if not path.startswith(self.message_prefix):
            return 404, b"Not Found", {"Content-Type": "text/html"}
        chat_id = path[len(self.message_prefix) :]
        if chat_id not in self.chats:
            return self.result(500, "Conversation does not exist", None, 500)
        if not isinstance(body.get("message"), str) or (self.version == 2 and "stream" not in body):
            return self.result(500, "【message】为必填参数", None)
        with self.server.lock:
            history = list(self.chats[chat_id])
            self.chats[chat_id].append(body["message"])
            self.messages += 1
            fail = self.messages <= self.fail_first
        if fail:
            return 502, b"Bad Gateway", {"Content-Type": "text/html"}
        text = self.answer(body["message"], history)
        record = str(self._uuid())
        if not body.get("stream", True):
            data = {"chat_id": chat_id, "id": record, "operate": True, "content": text, "is_end": True}
            return self.result(200, "成功", {**data, "completion_tokens": 3, "prompt_tokens": 11})

        def chunk(content, is_end, usage=(0, 0)):
            return {
                "chat_id": chat_id,
                "chat_record_id": record,
                "operate": True,
                "content": content,
                "node_id": "ai-chat-node",
                "up_node_id_list": [],
                "is_end": is_end,
                "usage": {"completion_tokens": usage[1], "prompt_tokens": usage[0], "total_tokens": sum(usage)},
            }

        events = [chunk(text[:6], False), chunk(text[6:], False), chunk("", True, (11, 3))]
        return 200, sse(events), SSE_HEADERS

    def close(self):
        self.server.close()
