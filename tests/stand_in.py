"""A stand-in HTTP endpoint for the tests of clients (remote targets, the generators' chat client),
and the body of an OpenAI-compatible chat completion for it to answer."""

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
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
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
