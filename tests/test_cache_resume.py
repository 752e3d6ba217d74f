"""Nothing answered is lost on a crash: each response reaches the cache the moment it arrives.

A stand-in backend answers some requests and then dies (an exception, or a real SIGKILL of its
process); the rerun finds those answers cached and sends only the others.  No model is involved.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragmi.cache import INDEX_ENTRY, ResponseCache, pack_records, payload_key, request_key, request_payload
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
    return sorted(ResponseCache(d).keys())


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


# --------------------------------------------------------------------- entries checked, packs shared


def _put_two(d: Path):
    cache = ResponseCache(d)
    (ra, rb) = requests(2)
    ka, kb = request_key("m", ra), request_key("m", rb)
    cache.put(ka, answer(ra), request=request_payload("m", ra))
    cache.put(kb, answer(rb), request=request_payload("m", rb))
    cache.close()
    return ka, kb


def test_an_answer_filed_under_another_key_is_a_miss_said_once(tmp_path):
    """An index entry that leads to another key's record (what a writer mix-up or an overwritten pack
    would leave) is never served as an answer: both keys miss, the log says so once, both are counted."""
    ka, kb = _put_two(tmp_path)
    assert ResponseCache(tmp_path).get(ka)["response_text"] == "re: q0"
    (idx,) = (tmp_path / "packs").glob("*.idx")
    entries = np.frombuffer(idx.read_bytes(), INDEX_ENTRY).copy()
    entries["key"] = entries["key"][::-1].copy()  # each key now points at the other's record
    idx.write_bytes(entries.tobytes())
    logs = []
    cache = ResponseCache(tmp_path, log=logs.append)
    assert cache.get(ka) is None and cache.get(kb) is None
    assert (cache.hits, cache.misses, cache.rejected) == (0, 2, 2)
    assert len(logs) == 1 and f"key {ka[:12]}" in logs[0] and f"written under another key ({kb[:12]}" in logs[0]


def test_a_record_whose_request_hashes_elsewhere_or_that_does_not_parse_is_a_miss(tmp_path):
    (ra, rb) = requests(2)
    ka = request_key("m", ra)
    cache = ResponseCache(tmp_path)
    cache.put(ka, answer(rb), request=request_payload("m", rb))  # rb's answer under ra's key
    cache.close()
    logs = []
    reader = ResponseCache(tmp_path, log=logs.append)
    assert reader.get(ka) is None and reader.rejected == 1
    assert f"answers a request whose key is {request_key('m', rb)[:12]}" in logs[0]
    # the earlier layout: a bare response per file is valid; one that does not parse is a miss
    good, bad = "aa" + "1" * 62, "bb" + "2" * 62
    for key, text in ((good, json.dumps(answer(ra))), (bad, '{"response_text": "cut sh')):
        (tmp_path / key[:2]).mkdir()
        (tmp_path / key[:2] / f"{key}.json").write_text(text)
    assert reader.get(good) == answer(ra)
    assert reader.get(bad) is None and reader.rejected == 2 and len(logs) == 1


def test_a_pack_cut_short_loses_only_its_last_record(tmp_path):
    """A writer killed mid-record leaves a torn record and perhaps a torn index entry: the records
    before it are answers, the torn one is a miss, and the next writer's pack is unaffected."""
    reqs = requests(5)
    keys = [request_key("m", r) for r in reqs]
    cache = ResponseCache(tmp_path)
    for k, r in zip(keys, reqs):
        cache.put(k, answer(r), request=request_payload("m", r))
    cache.close()
    (pack,) = (tmp_path / "packs").glob("*.pack")
    idx = pack.with_suffix(".idx")
    pack.write_bytes(pack.read_bytes()[:-7])  # the last record cut short
    idx.write_bytes(idx.read_bytes() + b"\x01" * 20)  # and a partial index entry after it
    reader = ResponseCache(tmp_path, log=lambda m: None)
    assert [reader.get(k) is not None for k in keys] == [True] * 4 + [False]
    assert reader.rejected == 1
    ResponseCache(tmp_path).put(keys[4], answer(reqs[4]), request=request_payload("m", reqs[4]))
    assert ResponseCache(tmp_path).get(keys[4]) == answer(reqs[4])


def test_one_pack_per_writer_not_one_file_per_response(tmp_path):
    """1000 responses written by one process are two files (its pack and index), not 1000."""
    reqs = requests(1000)
    cache = ResponseCache(tmp_path)
    for r in reqs:
        cache.put(request_key("m", r), answer(r), request=request_payload("m", r))
    cache.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(p.suffix for p in files) == [".idx", ".pack"]
    reader = ResponseCache(tmp_path)
    assert all(reader.get(request_key("m", r)) == answer(r) for r in reqs)
    assert len(reader.keys()) == 1000


WRITER = textwrap.dedent(
    """
    import sys
    from ragmi.cache import ResponseCache, request_key, request_payload
    from ragmi.rag.generators import make_request

    cache_dir, me, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cache = ResponseCache(cache_dir)
    for i in range(n):
        # half the keys shared by every writer (the same request asked by two runs), half its own
        q = f"shared {i}" if i % 2 == 0 else f"own {me} {i}"
        r = make_request([{"role": "user", "content": q}], 4, 0)
        cache.put(request_key("m", r), {"response_text": "re: " + q, "by": me}, request=request_payload("m", r))
        if i % 50 == 0:  # read while the others write
            cache.get(request_key("m", make_request([{"role": "user", "content": "shared 0"}], 4, 0)))
    """
)


def test_concurrent_writers_leave_every_entry_whole_and_under_its_own_key(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path / "c"), str(w), "400"], env=env) for w in range(4)
    ]
    assert [p.wait() for p in procs] == [0] * 4
    records = list(pack_records(tmp_path / "c"))
    assert len(records) == 4 * 400 and len({r.pack for r in records}) == 4
    for r in records:
        rec = json.loads(r.data)
        assert r.digest.hex() == rec["key"] == payload_key(rec["request"])
        assert rec["response"]["response_text"] == "re: " + rec["request"]["messages"][0]["content"]
    reader = ResponseCache(tmp_path / "c")
    assert len(reader.keys()) == 200 + 4 * 200
    for w in range(4):
        r = make_request([{"role": "user", "content": f"own {w} 3"}], 4, 0)
        assert reader.get(request_key("m", r)) == {"response_text": f"re: own {w} 3", "by": w}
    assert reader.rejected == 0


def test_a_reader_sees_what_another_process_wrote_since(tmp_path, monkeypatch):
    import ragmi.cache as cache_mod

    (ra,) = requests(1)
    reader = ResponseCache(tmp_path)
    assert reader.get(request_key("m", ra)) is None
    ResponseCache(tmp_path).put(request_key("m", ra), answer(ra), request=request_payload("m", ra))
    assert reader.get(request_key("m", ra)) is None  # looked less than REFRESH_S ago
    monkeypatch.setattr(cache_mod, "REFRESH_S", 0.0)
    assert reader.get(request_key("m", ra)) == answer(ra)


# --------------------------------------------------------------------- claims: one answer per request


class SlowBackend:
    """Answers each request after ``delay_s``, counting what it was asked (shared by two jobs)."""

    def __init__(self, delay_s: float, sent: list):
        self.delay_s = delay_s
        self.sent = sent

    def generate(self, reqs, on_result=None):
        import time as _time

        out = []
        for i, r in enumerate(reqs):
            _time.sleep(self.delay_s)
            self.sent.append(r["messages"][-1]["content"])
            out.append(dict(answer(r), token_logprobs=[-0.5 - 1e-7 * len(self.sent)]))  # differs per call
            on_result(i, out[-1])
        return out

    def close(self):
        pass


def test_two_jobs_asking_the_same_requests_at_once_get_each_answered_once(tmp_path, monkeypatch):
    import threading

    import ragmi.rag.generators as generators

    monkeypatch.setattr(generators, "CLAIM_POLL_S", 0.05)
    sent: list = []
    outs = {}

    def job(name):
        gen = CachedGenerator("m", lambda: SlowBackend(0.05, sent), ResponseCache(tmp_path), log=lambda *_: None)
        try:
            outs[name] = gen.generate(requests(12))
        except BaseException as e:  # noqa: BLE001 - the assertion below shows it
            import traceback

            outs[name] = traceback.format_exc()
            raise e

    threads = [threading.Thread(target=job, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(outs.get(n), list) for n in "ab"), outs
    assert sorted(sent) == sorted(f"q{i}" for i in range(12))  # each request sent once, by one of the jobs
    # both jobs hold the same answers (the backend's differ from call to call in the last digits)
    strip = [[(r["response_text"], r["token_logprobs"]) for r in outs[n]] for n in "ab"]
    assert strip[0] == strip[1]
    # an answer counts as fresh for the job that generated it, as cached for the one that awaited it
    fresh = [sum(not r["cached"] for r in outs[n]) for n in "ab"]
    assert sum(fresh) == 12, fresh
    assert not list((tmp_path / "claims").iterdir())  # every claim released


def test_a_claim_given_up_while_another_is_still_awaited_is_answered_by_the_waiting_job(tmp_path, monkeypatch):
    """Another job holds the claims on q0 and q1; it gives q0 up unanswered (it stopped) while q1 is still
    in flight, then answers q1: the waiting job sends q0 itself and reads q1 from the cache."""
    import threading

    import ragmi.rag.generators as generators
    from ragmi.cache import Claims

    monkeypatch.setattr(generators, "CLAIM_POLL_S", 0.02)
    reqs = requests(2)
    keys = [request_key("m", r) for r in reqs]
    other = Claims(tmp_path)
    assert other.take(keys) == set(keys)

    def answer_q1():
        ResponseCache(tmp_path).put(keys[1], answer(reqs[1]), request=request_payload("m", reqs[1]))
        other.release([keys[1]])

    timers = [threading.Timer(0.2, other.release, [[keys[0]]]), threading.Timer(0.8, answer_q1)]
    for t in timers:
        t.start()
    backend = DyingBackend(None)
    try:
        out = CachedGenerator("m", lambda: backend, ResponseCache(tmp_path), log=lambda *_: None).generate(reqs)
    finally:
        for t in timers:
            t.join()
    assert backend.sent == ["q0"]
    assert [r["response_text"] for r in out] == ["re: q0", "re: q1"]
    assert [r["cached"] for r in out] == [False, True]


def test_a_claim_whose_process_is_gone_is_taken_over(tmp_path):
    import socket

    key = request_key("m", requests(1)[0])
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims" / key).symlink_to(f"{socket.gethostname()} 999999999 0")  # no such pid
    backend = DyingBackend(None)
    gen = CachedGenerator("m", lambda: backend, ResponseCache(tmp_path), log=lambda *_: None)
    out = gen.generate(requests(1))
    assert backend.sent == ["q0"] and out[0]["response_text"] == "re: q0"
    assert not (tmp_path / "claims" / key).exists()


def test_another_machines_claim_is_awaited_until_it_goes_stale(tmp_path, monkeypatch):
    import time as _time

    import ragmi.cache as cache_mod
    import ragmi.rag.generators as generators

    monkeypatch.setattr(generators, "CLAIM_POLL_S", 0.05)
    monkeypatch.setattr(cache_mod, "CLAIM_STALE_S", 1.0)
    key = request_key("m", requests(1)[0])
    claim = tmp_path / "claims" / key
    claim.parent.mkdir()
    claim.symlink_to("another-node 123 0")
    logs = []
    backend = DyingBackend(None)
    gen = CachedGenerator("m", lambda: backend, ResponseCache(tmp_path), log=logs.append)
    t0 = _time.monotonic()
    out = gen.generate(requests(1))
    waited = _time.monotonic() - t0
    assert backend.sent == ["q0"] and out[0]["response_text"] == "re: q0"
    assert 0.8 <= waited < 10, waited  # it waited for the claim to go stale (1 s), then asked itself
    assert any("being answered by another job sharing the cache" in line for line in logs), logs


def test_the_cache_index_benchmark_runs_at_a_tiny_size(tmp_path):
    """benchmarks/cache_index.py end to end at a tiny size (docs/running.md quotes its full size)."""
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/cache_index.py"),
            "--entries",
            "3000",
            "--indexes",
            "30",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["entries"] == 3000 and result["found"] == result["lookups"] == 30
