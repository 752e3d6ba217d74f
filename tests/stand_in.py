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
    (``n`` counts requests from 1); every request is recorded."""

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

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stand_in.lock:
                    stand_in.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
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
