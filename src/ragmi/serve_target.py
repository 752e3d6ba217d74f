"""``ragmi serve-target``: a configured ragmi target, with its defenses, as an HTTP endpoint.

A red team can then attack it with its own tools, and ragmi can attack it as a remote target
(``targets.<t>.kind: remote``), which is how the remote path is tested end to end: the served
target answers exactly what the in-process target answers.

Endpoints (JSON over HTTP, standard library server, one request answered at a time so a local model
sees one generation at a time, as in process):

* ``POST /v1/chat/completions`` — OpenAI-compatible: the last user message is the attack's query;
  ``max_tokens`` (or ``max_completion_tokens``), ``logprobs`` and ``top_logprobs`` are honoured;
  the target's own temperature and seed apply (``generation.temperature``, ``seed``).
* ``POST /query`` — the generic JSON form: ``{"query": ..., "max_tokens": ..., "top_logprobs": ...}``
  -> ``{"answer": ..., "token_logprobs": [...], "top_logprobs": [[{"token", "logprob"}, ...], ...],
  "usage": {...}}`` (a remote target of ``api: json`` reads it with ``answer_path: answer``).
* ``GET /v1/models``, ``GET /health``.

It binds 127.0.0.1 unless told otherwise; any other address needs a bearer token read from the
environment variable ``--token-env`` names (the target answers from a private database), and the
server refuses to start without one.  With a token every request must carry ``Authorization:
Bearer <token>``.

The target's files are the pipeline's: its database ``results/split/<dataset>/members.parquet`` and
its index ``results/index/<dataset>/<titled|untitled>/<retriever>`` (built by ``snakemake``), run
from the directory holding ``results/`` (``--directory``).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.server
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .errors import ConfigError, RagmiError
from .rag.remote import QUERY_ID_HEADER, query_text

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_MAX_TOKENS = 256


def openai_response(resp: dict, model: str, logprobs: bool) -> dict:
    """An OpenAI chat completion carrying one ragmi response (its log-probabilities when asked)."""
    choice = {
        "index": 0,
        "finish_reason": "stop",
        "message": {"role": "assistant", "content": resp["response_text"]},
        "logprobs": None,
    }
    if logprobs:
        tops = resp["token_top_logprobs"] or []
        content = []
        for i, lp in enumerate(resp["token_logprobs"]):
            alts = tops[i] if i < len(tops) else []
            content.append(
                {
                    "token": alts[0]["token"] if alts else "",  # the sampled token's text is not kept
                    "logprob": lp,
                    "bytes": None,
                    "top_logprobs": [{"token": a["token"], "logprob": a["logprob"], "bytes": None} for a in alts],
                }
            )
        choice["logprobs"] = {"content": content}
    return {
        "id": f"ragmi-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": int(resp["prompt_tokens"]),
            "completion_tokens": int(resp["completion_tokens"]),
            "total_tokens": int(resp["prompt_tokens"]) + int(resp["completion_tokens"]),
        },
    }


def json_response(resp: dict) -> dict:
    return {
        "answer": resp["response_text"],
        "token_logprobs": list(resp["token_logprobs"]),
        "top_logprobs": [list(x) for x in resp["token_top_logprobs"] or []],
        "refused": bool(resp.get("refused", False)),
        "usage": {"prompt_tokens": int(resp["prompt_tokens"]), "completion_tokens": int(resp["completion_tokens"])},
    }


def make_server(target, name: str, host: str = "127.0.0.1", port: int = 0, token: str | None = None, log=print):
    """A started-on-demand ``ThreadingHTTPServer`` answering with ``target.answer`` (a RAGSystem or
    anything with its ``answer(prompts, max_tokens, top_logprobs, query_ids)``); call
    ``serve_forever()`` on it.  A host other than loopback without ``token`` is a ConfigError."""
    if host not in LOOPBACK and not token:
        raise ConfigError(
            f"serve-target: binding {host} (not 127.0.0.1) needs a bearer token: set --token-env to the name of an "
            "environment variable holding it (the target answers from a private database)"
        )
    return _Server((host, port), target, name, token, log)


class _Server(http.server.ThreadingHTTPServer):
    """The server of :func:`make_server`: the served target and what its handler needs."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], target, name: str, token: str | None, log: Callable):
        self.target = target
        self.target_name = name
        self.token = token
        self.log = log
        self.lock = threading.Lock()  # held while the target answers (do_POST)
        self.n_requests = 0
        super().__init__(address, _Handler)


def _parse_request(path: str, doc: dict) -> tuple[str, int, bool, int] | None:
    """``(query, max_tokens, logprobs wanted, top_logprobs)`` of a POST body to ``path``; None for a
    path that is not an endpoint."""
    if path in ("/v1/chat/completions", "/chat/completions"):
        query = query_text(doc.get("messages"))
        max_tokens = doc.get("max_tokens") or doc.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
        want_lp = bool(doc.get("logprobs"))
        top = int(doc.get("top_logprobs") or 0) if want_lp else 0
        return query, max_tokens, want_lp, top
    if path == "/query":
        query = str(doc.get("query", ""))
        max_tokens = doc.get("max_tokens") or DEFAULT_MAX_TOKENS
        return query, max_tokens, True, int(doc.get("top_logprobs") or 0)
    return None


class _Handler(http.server.BaseHTTPRequestHandler):
    """The endpoints of the module docstring, answering with the server's target."""

    protocol_version = "HTTP/1.1"
    server_version = "ragmi-serve-target"
    server: _Server

    def log_message(self, fmt, *args):  # the request line only, never headers
        pass

    def _send(self, status: int, doc: dict) -> None:
        body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": status}})

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        got = self.headers.get("Authorization", "")
        if hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            return True
        self._error(401, "missing or wrong bearer token")
        return False

    def do_GET(self):
        if not self._authorised():
            return
        name = self.server.target_name
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "ragmi"}]})
        elif self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok", "target": name})
        else:
            self._error(404, f"no such path {self.path}")

    def do_POST(self):
        if not self._authorised():
            return
        path = self.path.rstrip("/")
        try:
            doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if not isinstance(doc, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as e:
            self._error(400, f"bad JSON body: {e}")
            return
        parsed = _parse_request(path, doc)
        if parsed is None:
            self._error(404, f"no such path {self.path}")
            return
        query, max_tokens, want_lp, top = parsed
        if not query:
            self._error(400, "no query: the request has no user message (or an empty query)")
            return
        # the query's id seeds a randomized defense's noise (DefenseContext.rng): the client's ragmi id
        # when it sends one (remote.send_query_id), else one derived from the query text
        qid = self.headers.get(QUERY_ID_HEADER) or "q-" + hashlib.sha256(query.encode()).hexdigest()[:16]
        srv = self.server
        try:
            with srv.lock:  # one generation at a time, as the in-process target batches one shard
                srv.n_requests += 1
                resp = srv.target.answer([query], [int(max_tokens)], [top], [qid])[0]
        except RagmiError as e:
            srv.log(f"request failed: {e}")
            self._error(502, str(e))
            return
        out = json_response(resp) if path == "/query" else openai_response(resp, srv.target_name, want_lp)
        self._send(200, out)


def target_files(cfg: dict, target: str, dataset: str) -> tuple[str, str]:
    """(database, index folder) of an in-process target, as rules/common.smk lays them out."""
    t = cfg["targets"][target]
    null = t["database"] == "null_control"
    members = f"results/split/{dataset}/{'null_members' if null else 'members'}.parquet"
    root = "index_null" if null else "index"
    index = f"results/{root}/{dataset}/{'titled' if t['with_titles'] else 'untitled'}/{t['retriever']}"
    return members, index


def served_spec(cfg: dict, target: str, dataset: str, cache_dir: str | None = None):
    """The TargetSpec of ``target`` over ``dataset`` (what the generate rule gives it), checking that
    its files exist."""
    from .plan import target_needs_defender
    from .rag.factory import TargetSpec, needs_model_dir
    from .targets import own_pipeline

    if target not in cfg["targets"]:
        raise ConfigError(
            f"serve-target: no target {target!r} in the config (defined: {', '.join(sorted(cfg['targets']))})"
        )
    t = cfg["targets"][target]
    if own_pipeline(t):
        raise ConfigError(
            f"serve-target: target {target!r} is of kind {t['kind']}; only an in-process ragmi target can be served"
        )
    if dataset not in cfg["datasets"]:
        raise ConfigError(
            f"serve-target: no dataset {dataset!r} in the config (defined: {', '.join(sorted(cfg['datasets']))})"
        )
    gen = cfg["generators"][t["generator"]]
    members, index = target_files(cfg, target, dataset)
    models = cfg["generation"]["models_dir"]
    model_dir = f"{models}/{gen['model']}" if needs_model_dir(gen) else None
    defender = cfg["generators"].get(cfg["defender"]["generator"])
    defender_dir = None
    if target_needs_defender(cfg, target) and needs_model_dir(defender):
        defender_dir = f"{models}/{defender['model']}"
    needed = [members, index] + [p for p in (model_dir, defender_dir) if p]
    missing = [p for p in needed if not Path(p).exists()]
    if missing:
        raise ConfigError(
            f"serve-target: {missing[0]} does not exist; build the target's files first: "
            f"snakemake --configfile <config> {' '.join(missing)}"
        )
    spec = TargetSpec(
        name=target,
        target=t,
        retriever=cfg["retrievers"][t["retriever"]],
        generator=gen,
        index_dir=index,
        model_dir=model_dir,
        cache_dir=cache_dir or cfg["generation"]["cache_dir"],
        threads=cfg["generation"]["threads"],
        server_log=f"logs/servers/{t['generator']}.log",
        seed=cfg["seed"],
        temperature=cfg["generation"]["temperature"],
        defenses=tuple((n, cfg["defenses"][n]) for n in t["defenses"]),
        defender=defender,
        defender_model_dir=defender_dir,
        defender_server_log=f"logs/servers/{cfg['defender']['generator']}.log",
        embedding_cache_dir=cfg["generation"]["embedding_cache_dir"],
    )
    return spec, members


def main(argv: list[str] | None = None, ready: Callable | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ragmi serve-target",
        description="Serve a configured ragmi target (with its defenses) as an OpenAI-compatible chat endpoint.",
    )
    parser.add_argument("--configfile", required=True, help="the ragmi config that defines the target")
    parser.add_argument("--target", required=True, help="the target to serve (an in-process target of the config)")
    parser.add_argument("--dataset", help="whose database the target answers from (default: its first dataset)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument(
        "--token-env", help="environment variable holding the bearer token (required to bind a non-loopback host)"
    )
    parser.add_argument("--cache-dir", help="response cache of the served target (default: generation.cache_dir)")
    parser.add_argument("--directory", help="the pipeline's working directory (where results/ is)")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    try:
        from .config import load_config
        from .plan import target_datasets

        if args.directory:
            os.chdir(args.directory)
        cfg = load_config(args.configfile)
        # the math libraries get the generate jobs' threads (ragmi.workflow.run_step), so a local model
        # computes exactly what it computes in process
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(int(cfg["generation"]["threads"]))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(cfg["generation"]["threads"]))
        token = None
        if args.token_env:
            token = os.environ.get(args.token_env)
            if not token:
                raise ConfigError(
                    f"serve-target: --token-env names the environment variable {args.token_env}, which is not set"
                )
        if args.host not in LOOPBACK and not token:
            make_server(None, args.target, args.host, 0, None)  # raises the one message
        if args.target in cfg["targets"]:
            dataset = args.dataset or target_datasets(cfg, args.target)[0]
        else:
            dataset = args.dataset or ""
        spec, members_path = served_spec(cfg, args.target, dataset, args.cache_dir)
        import pandas as pd

        from .rag.factory import rag_system

        with rag_system(spec, pd.read_parquet(members_path), log) as rag:
            server = make_server(rag, args.target, args.host, args.port, token, log)
            host, port = server.server_address[:2]
            log(
                f"serving target {args.target} (dataset {dataset}) at http://{host}:{port}/v1 "
                f"(OpenAI chat) and http://{host}:{port}/query (JSON){'; bearer token required' if token else ''}"
            )
            if ready is not None:
                ready(server)
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass
            finally:
                server.server_close()
    except RagmiError as e:
        print(f"\nragmi: {e}\n", file=sys.stderr, flush=True)
        return 1
    except OSError as e:  # the port is taken, the address cannot be bound
        print(f"\nragmi: serve-target cannot listen on {args.host}:{args.port}: {e.strerror or e}\n", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
