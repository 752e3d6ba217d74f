"""Nothing answered is lost on a crash: each response reaches the cache the moment it arrives.

A stand-in backend answers some requests and then dies (an exception, or a real SIGKILL of its
process); the rerun finds those answers cached and sends only the others.  No model is involved.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragmi.cache import ResponseCache
from ragmi.errors import EndpointError
from ragmi.rag.generators import CachedGenerator, OpenAIGenerator, TransformersGenerator, make_request

ROOT = Path(__file__).resolve().parents[1]


def answer(req) -> dict:
    return {
        "response_text": "re: " + req["messages"][-1]["content"],
        "first_token_logprobs": [],
        "token_logprobs": [-0.5],
        "prompt_tokens": 3,
        "completion_tokens": 1,
        "latency_s": 0.0,
    }


class Crash(Exception):
    pass


class DyingBackend:
    """Reports each answer through ``on_result``; raises after ``die_after`` answers (None: never)."""

    def __init__(self, die_after: int | None):
        self.die_after = die_after
        self.sent = []

    def generate(self, reqs, on_result=None):
        out = []
        for i, r in enumerate(reqs):
            if self.die_after is not None and i == self.die_after:
                raise Crash(f"died after {i} answers")
            self.sent.append(r["messages"][-1]["content"])
            out.append(answer(r))
            on_result(i, out[-1])
        return out

    def close(self):
        pass


def requests(n):
    return [make_request([{"role": "user", "content": f"q{i}"}], 4, 0) for i in range(n)]


def cache_files(d: Path):
    return sorted(p.name for p in d.rglob("*.json"))


def test_answers_before_a_crash_are_cached_and_not_sent_again(tmp_path):
    reqs = requests(10)
    first = DyingBackend(die_after=4)
    logs = []
    gen = CachedGenerator("m", lambda: first, ResponseCache(tmp_path), log=logs.append)
    with pytest.raises(Crash):
        gen.generate(reqs)
    assert len(cache_files(tmp_path)) == 4
    assert gen.stats == {"requests": 10, "from_cache": 0, "generated": 4}

    second = DyingBackend(die_after=None)
    logs = []
    gen = CachedGenerator("m", lambda: second, ResponseCache(tmp_path), log=logs.append)
    out = gen.generate(reqs)
    assert second.sent == [f"q{i}" for i in range(4, 10)]  # only the unanswered ones
    assert logs == ["10 requests: 4 from cache, 6 to generate"]
    assert [r["cached"] for r in out] == [True] * 4 + [False] * 6
    assert [r["response_text"] for r in out] == [f"re: q{i}" for i in range(10)]
    assert gen.stats == {"requests": 10, "from_cache": 4, "generated": 6}
    assert gen.summary() == "responses of m: 10 requests, 4 from cache, 6 generated"
    assert len(cache_files(tmp_path)) == 10


def test_a_request_repeated_in_one_batch_is_sent_once(tmp_path):
    reqs = requests(3)
    reqs = [reqs[0], reqs[1], reqs[0], reqs[2], reqs[0]]
    backend = DyingBackend(die_after=None)
    logs = []
    gen = CachedGenerator("m", lambda: backend, ResponseCache(tmp_path), log=logs.append)
    out = gen.generate(reqs)
    assert backend.sent == ["q0", "q1", "q2"]
    assert logs == ["5 requests: 0 from cache, 3 to generate (2 repeated within the batch, sent once)"]
    assert [r["response_text"] for r in out] == ["re: q0", "re: q1", "re: q0", "re: q2", "re: q0"]
    assert not any(r["cached"] for r in out)
    assert gen.stats == {"requests": 5, "from_cache": 0, "generated": 3}


KILLED_JOB = textwrap.dedent(
    """
    import os, signal, sys
    from ragmi.cache import ResponseCache
    from ragmi.rag.generators import CachedGenerator, make_request

    cache_dir, n, die_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    class Backend:
        def generate(self, reqs, on_result=None):
            out = []
            for i, r in enumerate(reqs):
                if i == die_after:
                    os.kill(os.getpid(), signal.SIGKILL)  # kill -9: no exception handler, no cleanup
                out.append({"response_text": "re: " + r["messages"][-1]["content"], "first_token_logprobs": [],
                            "token_logprobs": [], "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.0})
                on_result(i, out[-1])
            return out

    reqs = [make_request([{"role": "user", "content": f"q{i}"}], 4, 0) for i in range(n)]
    CachedGenerator("m", Backend, ResponseCache(cache_dir), log=lambda m: print(m, flush=True)).generate(reqs)
    """
)


def test_sigkill_midway_keeps_every_answer_given_before_it(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(KILLED_JOB)
    cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, str(script), str(cache), "60", "30"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "60 requests: 0 from cache, 60 to generate" in proc.stdout
    assert len(cache_files(cache)) == 30

    backend = DyingBackend(die_after=None)
    logs = []
    gen = CachedGenerator("m", lambda: backend, ResponseCache(cache), log=logs.append)
    out = gen.generate(requests(60))
    assert logs == ["60 requests: 30 from cache, 30 to generate"]
    assert backend.sent == [f"q{i}" for i in range(30, 60)]
    assert [r["response_text"] for r in out] == [f"re: q{i}" for i in range(60)]


def test_openai_backend_reports_each_answer_as_it_finishes(monkeypatch):
    """Answers finished before the endpoint fails reach ``on_result``; the failure is one clear error."""
    from ragmi.rag.generators import ChatConnectionError

    order = []

    async def fake_one(self, client, sem, req):
        async with sem:
            q = req["messages"][-1]["content"]
            await asyncio.sleep(0.001)
            if q == "q3":
                raise ChatConnectionError("Connection refused")
            order.append(q)
            return answer(req)

    monkeypatch.setattr(OpenAIGenerator, "_one", fake_one)
    gen = OpenAIGenerator("http://127.0.0.1:9/v1", "m", "EMPTY", concurrency=1, timeout=5, max_retries=0, log=print)
    got = {}
    with pytest.raises(EndpointError, match="cannot reach the generator endpoint"):
        gen.generate(requests(6), on_result=lambda i, r: got.setdefault(i, r))
    assert {0, 1, 2} <= set(got) and 3 not in got
    assert all(got[i]["response_text"] == f"re: q{i}" for i in got)
    # and without a failure every answer is reported once, before generate returns
    got.clear()
    monkeypatch.setattr(OpenAIGenerator, "_one", lambda self, client, sem, req: _ok(req))
    out = gen.generate(requests(5), on_result=lambda i, r: got.setdefault(i, r))
    assert sorted(got) == [0, 1, 2, 3, 4] and [got[i] for i in range(5)] == out


async def _ok(req):
    await asyncio.sleep(0)
    return answer(req)


def test_transformers_backend_reports_each_batch_before_the_next(monkeypatch):
    events = []
    gen = TransformersGenerator.__new__(TransformersGenerator)  # no model: _batch is replaced below
    gen.batch_size = 2
    gen.log = events.append

    def fake_batch(reqs):
        events.append(("batch", [r["messages"][-1]["content"] for r in reqs]))
        return [answer(r) for r in reqs]

    gen._batch = fake_batch
    reqs = requests(5)
    out = gen.generate(reqs, on_result=lambda i, r: events.append(("result", i)))
    assert out == [answer(r) for r in reqs]
    batches = [e for e in events if isinstance(e, tuple) and e[0] == "batch"]
    assert len(batches) == 3
    # every answer of a batch is reported before the next batch starts
    for k, (_, contents) in enumerate(batches):
        start = events.index(batches[k])
        stop = events.index(batches[k + 1]) if k + 1 < len(batches) else len(events)
        reported = sorted(e[1] for e in events[start:stop] if isinstance(e, tuple) and e[0] == "result")
        assert reported == sorted(int(c[1:]) for c in contents)
