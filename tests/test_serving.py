"""Serving: prefix-ordered requests, the server's /metrics counters, the per-job token accounting."""

import http.server
import json
import threading
from pathlib import Path

import pytest

from ragmi.cache import ResponseCache
from ragmi.rag import serving_metrics as sm
from ragmi.rag.generators import CachedGenerator, OpenAIGenerator, make_request, prefix_order
from ragmi.rag.templates import TEMPLATES, get_template
from ragmi.rag.vllm_server import VLLMServer
from ragmi.schema import section_params

FIXTURE = Path(__file__).parent / "data" / "vllm_metrics.txt"


def _req(context, question, template="dcmi"):
    return make_request(get_template(template).messages(question, [context]), 4)


# ------------------------------------------------------------------------------ request order


def test_prefix_order_groups_requests_with_the_same_context_and_keeps_ties_stable():
    reqs = [
        _req("doc B", "q1"),
        _req("doc A", "q2"),
        _req("doc B", "q3"),
        _req("doc C", "q4"),
        _req("doc A", "q5"),
        _req("doc B", "q1"),  # identical to request 0: stays after it
    ]
    order = prefix_order(reqs)
    assert sorted(order) == list(range(len(reqs)))
    contexts = [reqs[i]["messages"][0]["content"] for i in order]
    # every context's requests are adjacent
    runs = [c for j, c in enumerate(contexts) if j == 0 or c != contexts[j - 1]]
    assert len(runs) == len(set(contexts)) == 3
    assert order.index(0) < order.index(5)
    assert prefix_order([]) == []


def test_prefix_order_follows_the_chat_layout_system_first():
    """The system message comes first in the prompt: requests are grouped by it before the user turn."""
    a = make_request([{"role": "system", "content": "ctx 2"}, {"role": "user", "content": "a"}], 4)
    b = make_request([{"role": "system", "content": "ctx 1"}, {"role": "user", "content": "z"}], 4)
    c = make_request([{"role": "system", "content": "ctx 2"}, {"role": "user", "content": "0"}], 4)
    assert prefix_order([a, b, c]) == [1, 2, 0]


def test_templates_record_where_the_question_comes_first():
    """rag_mia and mba print the question before the context (as their papers do): their prompts
    share only the instructions; the others put the context first."""
    assert {n for n, t in TEMPLATES.items() if t.question_first} == {"rag_mia", "mba"}
    # context-first templates: two questions on the same documents share the prompt up to the question
    for name in ("ia", "dcmi", "menta"):
        x = get_template(name).messages("first question?", ["the same document"])
        y = get_template(name).messages("other question?", ["the same document"])
        flat_x = "".join(m["content"] for m in x)
        flat_y = "".join(m["content"] for m in y)
        assert flat_x[: flat_x.index("first question?")] == flat_y[: flat_y.index("other question?")]
        assert "the same document" in flat_x[: flat_x.index("first question?")]


# ------------------------------------------------------------------------------ stand-in server


class _Endpoint:
    """An OpenAI-compatible chat endpoint plus a vLLM-like /metrics: it records the order in which
    prompts arrive, answers each with its own user turn, and counts prompt tokens (one per
    character) of which those of a system message seen before count as prefix-cache hits."""

    def __init__(self, with_metrics=True):
        self.lock = threading.Lock()
        self.received = []
        self.seen_systems = set()
        self.counters = {"prompt": 0, "cached": 0, "gen": 0}
        ep = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, body: bytes, ctype: str, code: int = 200):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path != "/metrics" or not with_metrics:
                    return self._send(b"not found", "text/plain", 404)
                c = ep.counters
                text = (
                    "# TYPE vllm:prompt_tokens_total counter\n"
                    f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {float(c["prompt"])}\n'
                    f'vllm:prompt_tokens_cached_total{{engine="0",model_name="m"}} {float(c["cached"])}\n'
                    f'vllm:prefix_cache_hits_total{{engine="0",model_name="m"}} {float(c["cached"])}\n'
                    f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {float(c["gen"])}\n'
                )
                self._send(text.encode(), "text/plain; version=0.0.4")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                msgs = body["messages"]
                system = next((m["content"] for m in msgs if m["role"] == "system"), "")
                user = msgs[-1]["content"]
                n_prompt = len(system) + len(user)
                with ep.lock:
                    ep.received.append(user)
                    hit = len(system) if system in ep.seen_systems else 0
                    ep.seen_systems.add(system)
                    ep.counters["prompt"] += n_prompt
                    ep.counters["cached"] += hit
                    ep.counters["gen"] += 1
                out = {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": user},
                            "logprobs": {
                                "content": [{"token": "t", "logprob": -0.1, "bytes": None, "top_logprobs": []}]
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": n_prompt, "completion_tokens": 1, "total_tokens": n_prompt + 1},
                }
                self._send(json.dumps(out).encode(), "application/json")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    ep = _Endpoint()
    yield ep
    ep.close()


def _shard():
    """Six questions on three contexts, interleaved as the queries of a shard are."""
    return [
        make_request([{"role": "system", "content": f"context {c}"}, {"role": "user", "content": f"q{i}"}], 3)
        for i, c in enumerate("BACBAC")
    ]


def test_requests_are_sent_grouped_by_prefix_and_answered_in_the_original_order(endpoint):
    reqs = _shard()
    seen = {}
    gen = OpenAIGenerator(endpoint.base_url, "m", "EMPTY", concurrency=1, timeout=10, max_retries=0, log=lambda m: None)
    out = gen.generate(reqs, on_result=lambda i, r: seen.setdefault(i, r["response_text"]))
    # sent: context A's questions, then B's, then C's
    assert endpoint.received == ["q1", "q4", "q0", "q3", "q2", "q5"]
    # answered in the caller's order, and on_result got the caller's indices
    assert [r["response_text"] for r in out] == [f"q{i}" for i in range(6)]
    assert seen == {i: f"q{i}" for i in range(6)}


def test_todays_order_is_kept_when_prefix_ordering_is_off(endpoint):
    gen = OpenAIGenerator(
        endpoint.base_url,
        "m",
        "EMPTY",
        concurrency=1,
        timeout=10,
        max_retries=0,
        log=lambda m: None,
        order_by_prefix=False,
    )
    gen.generate(_shard())
    assert endpoint.received == [f"q{i}" for i in range(6)]


def test_each_generate_call_records_sent_and_computed_prompt_tokens(endpoint):
    logs = []
    gen = OpenAIGenerator(
        endpoint.base_url,
        "m",
        "EMPTY",
        concurrency=None,
        timeout=10,
        max_retries=0,
        log=logs.append,
        metrics_url=sm.metrics_url(endpoint.base_url),
    )
    endpoint.counters.update(prompt=1000, cached=400, gen=50)  # an earlier job's tokens: not this job's
    gen.generate(_shard())
    (rec,) = gen.usage
    sent = sum(len(f"context {c}") + 2 for c in "BACBAC")
    assert rec["prompt_tokens_sent"] == sent and rec["completion_tokens"] == 6 and rec["requests"] == 6
    assert rec["server_counters_exact"] is True
    assert rec["prefix_cache_hit_tokens"] == 3 * len("context A")  # the second question of each context
    assert rec["prompt_tokens_computed"] == sent - 3 * len("context A")
    assert rec["wall_s"] >= 0
    assert any("prefix-cache hits" in m for m in logs)


def test_without_a_metrics_endpoint_the_computed_tokens_are_unknown():
    ep = _Endpoint(with_metrics=False)
    try:
        gen = OpenAIGenerator(
            ep.base_url,
            "m",
            "EMPTY",
            concurrency=4,
            timeout=10,
            max_retries=0,
            log=lambda m: None,
            metrics_url=sm.metrics_url(ep.base_url),
        )
        gen.generate(_shard())
    finally:
        ep.close()
    (rec,) = gen.usage
    assert rec["prompt_tokens_sent"] > 0 and rec["prompt_tokens_computed"] is None


def test_cached_generator_records_what_the_job_generated(endpoint, tmp_path):
    gen = OpenAIGenerator(
        endpoint.base_url,
        "m",
        "EMPTY",
        concurrency=None,
        timeout=10,
        max_retries=0,
        log=lambda m: None,
        metrics_url=sm.metrics_url(endpoint.base_url),
    )
    cached = CachedGenerator("vllm|local|m|auto", lambda: gen, ResponseCache(tmp_path / "c"), log=lambda m: None)
    reqs = _shard()
    cached.generate(reqs[:3])
    cached.generate(reqs)  # the first three from the cache
    rec = cached.serving_record()
    assert rec["requests"] == 9 and rec["from_cache"] == 3 and rec["generated"] == 6
    assert rec["prompt_tokens_sent"] == sum(len(r["messages"][0]["content"]) + 2 for r in reqs)
    assert rec["completion_tokens"] == 6
    assert rec["prefix_cache_hit_tokens"] == 3 * len("context A")
    assert rec["prompt_tokens_computed"] == rec["prompt_tokens_sent"] - rec["prefix_cache_hit_tokens"]
    assert len(rec["generate_calls"]) == 2
    assert "prefix-cache hits" in cached.serving_summary()
    nothing = CachedGenerator("vllm|local|m|auto", lambda: gen, ResponseCache(tmp_path / "c"), log=lambda m: None)
    nothing.generate(reqs)  # all from the cache: no backend, nothing computed
    r0 = nothing.serving_record()
    assert r0["generated"] == 0 and r0["prompt_tokens_computed"] == 0 and r0["wall_s"] == 0


# ------------------------------------------------------------------------------ /metrics


def test_metrics_fixture_recorded_from_vllm_parses():
    """tests/data/vllm_metrics.txt: the vllm: lines of the Prometheus page that vLLM 0.32's own
    exporter writes (``PrometheusStatLogger`` + ``prometheus_client.generate_latest``, the code behind
    the server's /metrics), configured as ragmi's CPU server of SmolLM2-135M and fed the stats of two
    prefills of 300 prompt tokens, the second finding 288 of them in the prefix cache.  Made
    in-process, not scraped from a running server: no server could be started while this was
    written (the machine was reserved for a timing run)."""
    text = FIXTURE.read_text()
    c = sm.counters(text)
    assert set(sm.COUNTERS) <= set(c)
    assert c["prompt_tokens"] > 0 and c["generation_tokens"] > 0
    assert 0 < c["prefix_cache_hits"] <= c["prefix_cache_queries"]
    assert 0 < c["prompt_tokens_cached"] < c["prompt_tokens"]
    assert (c["prompt_tokens"], c["prompt_tokens_cached"], c["prefix_cache_hits"]) == (600, 288, 288)
    # computed + cached = total prompt tokens (vLLM's PromptTokenStats)
    assert c["prompt_tokens_local_compute"] + c["prompt_tokens_cached"] == c["prompt_tokens"]


def test_metrics_parsing_details():
    text = (
        "# HELP vllm:prompt_tokens_total x\n# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="a"} 10.0\n'
        'vllm:prompt_tokens_total{engine="1",model_name="a"} 5.0\n'
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="a",source="local_compute"} 7.0\n'
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="a",source="local_cache_hit"} 8.0\n'
        "vllm:gpu_cache_usage_perc NaN\n"
        "garbage line\n"
    )
    samples = sm.parse_prometheus(text)
    assert samples["vllm:prompt_tokens_total"] == 15.0
    assert samples['vllm:prompt_tokens_by_source_total{source="local_compute"}'] == 7.0
    assert sm.counters(text) == {"prompt_tokens": 15.0, "prompt_tokens_local_compute": 7.0}
    assert sm.counters("# nothing\n") is None
    assert sm.metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert sm.metrics_url("http://h:1/v1/") == "http://h:1/metrics"


def test_account_charges_no_other_jobs_tokens():
    mine = sm.account(100, 5, 1.0, {"prompt_tokens": 100, "prompt_tokens_cached": 60, "prefix_cache_hits": 64})
    assert mine["prompt_tokens_computed"] == 40 and mine["prefix_cache_hit_tokens"] == 60
    assert mine["prefix_cache_hit_rate"] == 0.6 and mine["server_counters_exact"] is True
    shared = sm.account(100, 5, 1.0, {"prompt_tokens": 180, "prompt_tokens_cached": 90})
    assert shared["server_counters_exact"] is False and shared["prompt_tokens_computed"] is None
    assert "another job" in sm.summary_line(shared)
    assert sm.account(100, 5, 1.0, None)["prompt_tokens_computed"] is None


# ------------------------------------------------------------------------------ server flags


def test_server_runs_with_prefix_caching_and_metrics_on():
    cfg = section_params("generators", {"backend": "vllm", "model": "m"})
    cmd = VLLMServer.from_config(cfg, "m", "s.log", 1, None).command()
    assert "--enable-prefix-caching" in cmd
    assert "--disable-log-stats" not in cmd  # it would turn off /metrics
    off = section_params("generators", {"backend": "vllm", "model": "m", "extra_args": ["--no-enable-prefix-caching"]})
    cmd = VLLMServer.from_config(off, "m", "s.log", 1, None).command()
    assert "--enable-prefix-caching" not in cmd and cmd[-1] == "--no-enable-prefix-caching"
