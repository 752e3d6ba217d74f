"""Remote targets (targets.<t>.kind: remote) against stand-in HTTP endpoints: no network, no model.

The OpenAI-compatible and generic JSON APIs, retries with backoff on 429 / 5xx, each kind of bad
endpoint as one sentence naming the URL or the config key, answers already obtained kept in the cache
so that a rerun resumes, the per-run request budget, and the API key never written anywhere.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from stand_in import StandIn, openai_body

from ragmi.config import validate_config
from ragmi.errors import ConfigError, DataError, EndpointError
from ragmi.rag.factory import TargetSpec
from ragmi.rag.remote import RemoteClient, RequestBudget, fill_body, json_path, remote_target
from ragmi.schema import section_params

SECRET = "sk-test-SECRET-0123456789"


@pytest.fixture
def stand_in():
    made = []

    def make(reply):
        s = StandIn(reply)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def remote_cfg(url, **kw):
    """A validated ``remote`` entry (schema defaults filled), fast retries."""
    entry = section_params("targets", {"kind": "remote", "remote": {"url": url, "backoff_s": 0.0, **kw}})
    return entry["remote"]


def spec_of(name, remote, cache_dir, seed=0):
    target = section_params("targets", {"kind": "remote", "remote": remote})
    return TargetSpec(
        name=name,
        target=target,
        retriever={},
        generator={},
        index_dir="",
        model_dir=None,
        cache_dir=str(cache_dir),
        threads=1,
        server_log="",
        seed=seed,
        temperature=0.0,
    )


def ask(target, prompts, max_tokens=4, top=0):
    n = len(prompts)
    return target.answer(prompts, [max_tokens] * n, [top] * n, [f"q{i}" for i in range(n)])


# ------------------------------------------------------------------ request and answer formats


def test_openai_api_sends_the_query_and_reads_text_and_logprobs(stand_in):
    content = [
        {
            "token": "Yes",
            "logprob": -0.25,
            "top_logprobs": [{"token": "Yes", "logprob": -0.25}, {"token": "No", "logprob": -1.5}],
        },
        {
            "token": ".",
            "logprob": -0.125,
            "top_logprobs": [{"token": ".", "logprob": -0.125}, {"token": "!", "logprob": -3.0}],
        },
    ]
    s = stand_in(lambda n, p, b, h: (200, openai_body("Yes.", content), None))
    client = RemoteClient(remote_cfg(s.url + "/v1", model="svc", logprobs=True), "targets.r.remote")
    req = {
        "messages": [{"role": "user", "content": "Is it?"}],
        "max_tokens": 3,
        "top_logprobs": 2,
        "temperature": 0.0,
        "seed": 5,
    }
    out = client.generate([req])[0]
    sent = s.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["messages"] == [{"role": "user", "content": "Is it?"}]
    assert sent["body"]["model"] == "svc" and sent["body"]["logprobs"] is True and sent["body"]["top_logprobs"] == 2
    assert out["response_text"] == "Yes."
    assert out["token_logprobs"] == [-0.25, -0.125]
    assert out["token_top_logprobs"][0] == [{"token": "Yes", "logprob": -0.25}, {"token": "No", "logprob": -1.5}]
    assert out["first_token_logprobs"] == out["token_top_logprobs"][0]
    assert (out["prompt_tokens"], out["completion_tokens"]) == (7, 2)


def test_openai_api_without_logprobs_asks_for_none(stand_in):
    s = stand_in(lambda n, p, b, h: (200, openai_body("No"), None))
    client = RemoteClient(remote_cfg(s.url + "/v1"), "targets.r.remote")
    req = {
        "messages": [{"role": "user", "content": "q"}],
        "max_tokens": 3,
        "top_logprobs": 20,
        "temperature": 0.0,
        "seed": 0,
    }
    out = client.generate([req])[0]
    assert "logprobs" not in s.requests[0]["body"] and "top_logprobs" not in s.requests[0]["body"]
    assert out["token_logprobs"] == [] and out["token_top_logprobs"] == [] and out["first_token_logprobs"] == []


def test_json_api_fills_the_body_template_and_reads_the_paths(stand_in):
    def reply(n, p, body, h):
        return (
            200,
            {
                "data": {
                    "answer": "about " + body["input"]["question"],
                    "lp": [-0.5],
                    "tops": [{"a": -0.5, "b": -2.0}],
                },
                "n": {"in": 11},
            },
            None,
        )

    s = stand_in(reply)
    cfg = remote_cfg(
        s.url + "/ask",
        api="json",
        body={"input": {"question": "{query}"}, "limit": "{max_tokens}", "tag": "q={query}!"},
        answer_path="data.answer",
        logprobs=True,
        token_logprobs_path="data.lp",
        top_logprobs_path="data.tops",
        prompt_tokens_path="n.in",
    )
    client = RemoteClient(cfg, "targets.r.remote")
    req = {
        "messages": [{"role": "user", "content": "cats"}],
        "max_tokens": 9,
        "top_logprobs": 1,
        "temperature": 0.0,
        "seed": 0,
    }
    out = client.generate([req])[0]
    assert s.requests[0]["path"] == "/ask"
    assert s.requests[0]["body"] == {"input": {"question": "cats"}, "limit": 9, "tag": "q=cats!"}
    assert out["response_text"] == "about cats"
    assert out["token_logprobs"] == [-0.5]
    assert out["token_top_logprobs"] == [[{"token": "a", "logprob": -0.5}]]  # top-1 of the mapping
    assert out["prompt_tokens"] == 11 and out["completion_tokens"] == 0


def test_json_path_and_body_helpers():
    doc = {"a": [{"b": "x"}, {"b": "y"}]}
    assert json_path(doc, "a.1.b") == "y"
    assert json_path(doc, "a.2.b") is not None and json_path(doc, "a.2.b") != "y"  # missing: the sentinel
    req = {"max_tokens": 3, "top_logprobs": 0, "temperature": 0.5}
    assert fill_body({"t": "{temperature}", "q": ["{query}"]}, "hi", req) == {"t": 0.5, "q": ["hi"]}


# ------------------------------------------------------------------ retries and bad endpoints


def test_500_then_success_is_retried_with_backoff(stand_in):
    s = stand_in(lambda n, p, b, h: (503, {"error": "busy"}, None) if n <= 2 else (200, openai_body("ok"), None))
    logs = []
    cfg = remote_cfg(s.url + "/v1", max_retries=3, backoff_s=0.05)
    client = RemoteClient(cfg, "targets.r.remote", log=logs.append)
    t0 = time.perf_counter()
    out = client.generate(
        [
            {
                "messages": [{"role": "user", "content": "q"}],
                "max_tokens": 2,
                "top_logprobs": 0,
                "temperature": 0.0,
                "seed": 0,
            }
        ]
    )
    assert out[0]["response_text"] == "ok"
    assert len(s.requests) == 3 and client.stats == {"sent": 3, "retried": 2, "sessions": 0}
    assert time.perf_counter() - t0 >= 0.05 + 0.10  # 0.05 s, then doubled


def test_429_honours_retry_after(stand_in):
    s = stand_in(
        lambda n, p, b, h: (
            (429, {"error": "slow down"}, {"Retry-After": "0.2"}) if n == 1 else (200, openai_body("ok"), None)
        )
    )
    client = RemoteClient(remote_cfg(s.url + "/v1", max_retries=1), "targets.r.remote")
    t0 = time.perf_counter()
    client.generate(
        [
            {
                "messages": [{"role": "user", "content": "q"}],
                "max_tokens": 2,
                "top_logprobs": 0,
                "temperature": 0.0,
                "seed": 0,
            }
        ]
    )
    assert time.perf_counter() - t0 >= 0.2 and len(s.requests) == 2


def _target(tmp_path, remote, name="r"):
    return remote_target(spec_of(name, remote, tmp_path / "cache"), lambda m: None)


def test_persistent_500s_name_the_url_and_keep_earlier_answers(stand_in, tmp_path):
    def reply(n, p, body, h):
        q = body["messages"][-1]["content"]
        return (500, {"error": "internal"}, None) if q == "bad" else (200, openai_body("re " + q), None)

    s = stand_in(reply)
    remote = {"url": s.url + "/v1", "backoff_s": 0.0, "max_retries": 2, "concurrency": 1}
    logs = []
    with pytest.raises(EndpointError) as e, remote_target(spec_of("r", remote, tmp_path / "cache"), logs.append) as t:
        ask(t, ["a", "b", "bad", "c"])  # one at a time: a and b are answered, bad fails, c is never sent
    msg = str(e.value)
    assert s.url + "/v1/chat/completions" in msg and "HTTP 500" in msg and "targets.r.remote.max_retries" in msg
    assert "3 attempt(s)" in msg
    assert [r["body"]["messages"][-1]["content"] for r in s.requests] == ["a", "b", "bad", "bad", "bad"]
    assert any("2 answers obtained before the failure" in line for line in logs)
    # the rerun, the endpoint healthy again, sends only what is not cached
    s.reply = lambda n, p, body, h: (200, openai_body("re " + body["messages"][-1]["content"]), None)
    before = len(s.requests)
    with _target(tmp_path, remote) as t:
        out = ask(t, ["a", "b", "bad", "c"])
    assert [r["cached"] for r in out] == [True, True, False, False]
    assert [r["response_text"] for r in out] == ["re a", "re b", "re bad", "re c"]
    assert [r["body"]["messages"][-1]["content"] for r in s.requests[before:]] == ["bad", "c"]


def test_closed_port_names_the_url(tmp_path):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    remote = {"url": f"http://127.0.0.1:{port}/v1", "backoff_s": 0.0, "max_retries": 1}
    with pytest.raises(EndpointError) as e, _target(tmp_path, remote) as t:
        ask(t, ["q"])
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in str(e.value) and "cannot reach" in str(e.value)


def test_answer_without_the_configured_field_names_the_key(stand_in, tmp_path):
    s = stand_in(lambda n, p, b, h: (200, {"result": {"text": "x"}}, None))
    remote = {"url": s.url + "/q", "api": "json", "body": {"q": "{query}"}, "answer_path": "data.answer"}
    with pytest.raises(EndpointError) as e, _target(tmp_path, remote) as t:
        ask(t, ["q"])
    assert "'data.answer'" in str(e.value) and "targets.r.remote.answer_path" in str(e.value) and s.url in str(e.value)
    s2 = stand_in(lambda n, p, b, h: (200, {"choices": []}, None))
    with pytest.raises(EndpointError) as e, _target(tmp_path, {"url": s2.url + "/v1"}) as t:
        ask(t, ["q"])
    assert "choices.0.message.content" in str(e.value)


def test_empty_answer_is_an_error_unless_kept(stand_in, tmp_path):
    s = stand_in(lambda n, p, b, h: (200, openai_body("  "), None))
    with pytest.raises(EndpointError) as e, _target(tmp_path, {"url": s.url + "/v1"}) as t:
        ask(t, ["q"])
    assert "empty answer" in str(e.value) and "targets.r.remote.on_empty_answer" in str(e.value)
    with _target(tmp_path, {"url": s.url + "/v1", "on_empty_answer": "keep"}) as t:
        assert ask(t, ["q"])[0]["response_text"] == "  "


def test_not_json_and_4xx_are_not_retried(stand_in, tmp_path):
    s = stand_in(lambda n, p, b, h: (200, b"<html>oops</html>", None))
    with pytest.raises(EndpointError, match="not JSON"), _target(tmp_path, {"url": s.url + "/v1"}) as t:
        ask(t, ["q"])
    s2 = stand_in(lambda n, p, b, h: (400, {"error": "bad model"}, None))
    with pytest.raises(EndpointError, match="HTTP 400") as e, _target(tmp_path, {"url": s2.url + "/v1"}) as t:
        ask(t, ["q"])
    assert len(s2.requests) == 1 and "bad model" in str(e.value)


def test_missing_api_key_variable_names_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGMI_TEST_REMOTE_KEY", raising=False)
    with (
        pytest.raises(ConfigError) as e,
        _target(tmp_path, {"url": "http://127.0.0.1:9/v1", "api_key_env": "RAGMI_TEST_REMOTE_KEY"}),
    ):
        pass
    assert "targets.r.remote.api_key_env" in str(e.value) and "RAGMI_TEST_REMOTE_KEY" in str(e.value)


def test_api_key_is_sent_but_never_written(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMI_TEST_REMOTE_KEY", SECRET)
    s = stand_in(
        lambda n, p, b, h: (200, openai_body("fine"), None) if n == 1 else (401, {"error": f"bad key {SECRET}"}, None)
    )
    logs = []
    remote = {"url": s.url + "/v1", "api_key_env": "RAGMI_TEST_REMOTE_KEY", "max_requests": 10}
    with remote_target(spec_of("r", remote, tmp_path / "cache"), logs.append) as t:
        ask(t, ["q1"])
    assert s.requests[0]["headers"]["Authorization"] == f"Bearer {SECRET}"
    with pytest.raises(EndpointError) as e, remote_target(spec_of("r", remote, tmp_path / "cache"), logs.append) as t:
        ask(t, ["q2"])
    assert "rejected the credentials" in str(e.value) and SECRET not in str(e.value)
    written = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]  # the cache's index is binary
    assert written and not any(SECRET.encode() in w for w in written)
    assert not any(SECRET in line for line in logs)


# ------------------------------------------------------------------ budget and concurrency


def test_budget_stops_the_job_and_a_rerun_resumes(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMI_RUN_ID", "run-1")
    s = stand_in(lambda n, p, b, h: (200, openai_body("re " + b["messages"][-1]["content"]), None))
    remote = {"url": s.url + "/v1", "max_requests": 3, "concurrency": 1}
    prompts = [f"p{i}" for i in range(5)]
    with pytest.raises(EndpointError) as e, _target(tmp_path, remote) as t:
        ask(t, prompts)
    assert "targets.r.remote.max_requests" in str(e.value) and "3 requests" in str(e.value)
    assert len(s.requests) == 3
    # another job of the same run shares the spent budget (the ledger under the cache's parent)
    with pytest.raises(EndpointError), _target(tmp_path, remote) as t:
        ask(t, ["p4"])
    assert len(s.requests) == 3
    ledger = tmp_path / "remote_requests" / "r.run-1.count"
    counts = json.loads(ledger.read_text())
    assert counts["sent"] == 3 and counts["answered"] == 3 and counts["timeouts"] == 0
    # the next run has a fresh budget and sends only the two answers not cached
    monkeypatch.setenv("RAGMI_RUN_ID", "run-2")
    with _target(tmp_path, remote) as t:
        out = ask(t, prompts)
    assert [r["response_text"] for r in out] == [f"re {p}" for p in prompts]
    assert sum(r["cached"] for r in out) == 3 and len(s.requests) == 5


def test_budget_in_memory_without_a_run_id():
    b = RequestBudget(2, None, "targets.r.remote")
    b.take()
    b.take()
    with pytest.raises(EndpointError, match="max_requests"):
        b.take()


def test_two_ledgers_on_one_file_from_two_threads_count_exactly(tmp_path):
    import threading

    path = tmp_path / "remote_requests" / "r.run.count"
    a, b = (RequestBudget(None, path, "targets.r.remote") for _ in range(2))

    def work(budget):
        for i in range(150):
            budget.take(session_open=i % 3 == 0)
            budget.add(**({"answered": 1} if i % 5 else {"http_errors": {504: 1}, "retries": 1}))

    threads = [threading.Thread(target=work, args=(x,)) for x in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = json.loads(path.read_text())
    assert counts == {
        "sent": 300,
        "answered": 240,
        "retries": 60,
        "timeouts": 0,
        "http_errors": {"504": 60},
        "network_errors": 0,
        "session_opens": 100,
    }
    assert a.job["sent"] == b.job["sent"] == 150 and a.read() == counts
    # with a budget: two jobs of one run get exactly max_requests requests between them
    path2 = tmp_path / "remote_requests" / "r.run2.count"
    limited = [RequestBudget(170, path2, "targets.r.remote") for _ in range(2)]
    refused = []

    def spend(budget):
        for _ in range(100):
            try:
                budget.take()
            except EndpointError as e:
                refused.append(str(e))

    threads = [threading.Thread(target=spend, args=(x,)) for x in limited]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert json.loads(path2.read_text())["sent"] == 170 and len(refused) == 30
    assert sum(x.job["sent"] for x in limited) == 170 and "targets.r.remote.max_requests" in refused[0]


def test_ledger_counts_timeouts_and_errors_without_a_budget(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMI_RUN_ID", "run-7")
    html = b"<html><body><h1>504 Gateway Time-out</h1></body></html>"

    def reply(n, p, b, h):
        if n == 1:
            time.sleep(1.5)  # past timeout_s: the client gives up and retries
        if n == 2:
            return 504, html, {"Content-Type": "text/html"}
        if n == 3:
            return 429, {"error": "slow down"}, None
        return 200, openai_body("re " + b["messages"][-1]["content"]), None

    s = stand_in(reply)
    logs = []
    remote = {"url": s.url + "/v1", "timeout_s": 0.5, "max_retries": 4, "concurrency": 1}
    with remote_target(spec_of("r", remote, tmp_path / "cache"), logs.append) as t:
        out = ask(t, ["a", "b"])
    assert [r["response_text"] for r in out] == ["re a", "re b"]
    counts = json.loads((tmp_path / "remote_requests" / "r.run-7.count").read_text())
    assert counts == {
        "sent": 5,
        "answered": 2,
        "retries": 3,
        "timeouts": 1,
        "http_errors": {"504": 1, "429": 1},
        "network_errors": 0,
        "session_opens": 0,
    }
    line = next(x for x in logs if "HTTP requests" in x)
    assert "5 HTTP requests (3 retries)" in line and "1 timeouts (no answer within 0.5 s)" in line
    assert "2 HTTP errors (429: 1, 504: 1)" in line and "run ledger" in line and "r.run-7.count" in line


def test_refused_connections_are_network_errors_in_a_job_ledger(tmp_path, monkeypatch):
    import socket

    monkeypatch.delenv("RAGMI_RUN_ID", raising=False)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    remote = {"url": f"http://127.0.0.1:{port}/v1", "backoff_s": 0.0, "max_retries": 2}
    with pytest.raises(EndpointError, match="cannot reach"), _target(tmp_path, remote) as t:
        ask(t, ["q"])
    # no run id: the job's own ledger; the next job (same process, same second) has another
    (ledger,) = (tmp_path / "remote_requests").glob("r.job-*.count")
    counts = json.loads(ledger.read_text())
    assert counts["sent"] == 3 and counts["network_errors"] == 3 and counts["retries"] == 2
    assert counts["timeouts"] == 0 and counts["answered"] == 0
    with pytest.raises(EndpointError, match="cannot reach"), _target(tmp_path, remote) as t:
        ask(t, ["q"])
    assert sorted(json.loads(p.read_text())["sent"] for p in (tmp_path / "remote_requests").glob("r.job-*")) == [3, 3]


def test_requests_in_flight_are_bounded(stand_in, tmp_path):
    def reply(n, p, b, h):
        time.sleep(0.1)
        return 200, openai_body("x"), None

    s = stand_in(reply)
    with _target(tmp_path, {"url": s.url + "/v1", "concurrency": 3}) as t:
        ask(t, [f"q{i}" for i in range(12)])
    assert s.peak == 3


def test_remote_answers_carry_no_retrieval(stand_in, tmp_path):
    s = stand_in(lambda n, p, b, h: (200, openai_body("x"), None))
    with _target(tmp_path, {"url": s.url + "/v1"}) as t:
        r = ask(t, ["q"])[0]
    assert r["retrieved_ids"] is None and r["refused"] is False and r["response_text_raw"] == "x"
    from ragmi.workflow import RESPONSE_FILE_COLUMNS

    assert set(RESPONSE_FILE_COLUMNS) - {"query_id"} <= set(r)


# ------------------------------------------------------------------ config


def _cfg(targets, datasets=None):
    return {
        "datasets": datasets or {"d": {"source": "synthetic", "n_docs": 40}},
        "targets": targets,
        "attacks": {"rag_mia": {}},
    }


@pytest.mark.parametrize(
    ("target", "key"),
    [
        ({"kind": "remote"}, "targets.r"),
        ({"kind": "remote", "remote": {"url": "ftp://x"}}, "targets.r.remote.url"),
        ({"kind": "remote", "remote": {"url": "http://x", "api": "json"}}, "targets.r.remote.body"),
        ({"kind": "remote", "remote": {"url": "http://x", "answer_path": "a"}}, "targets.r.remote.answer_path"),
        (
            {
                "kind": "remote",
                "remote": {"url": "http://x", "api": "json", "body": {}, "answer_path": "a", "logprobs": True},
            },
            "targets.r.remote.logprobs",
        ),
        ({"kind": "remote", "remote": {"url": "http://x"}, "defenses": ["p"]}, "targets.r.defenses"),
        ({"kind": "remote", "remote": {"url": "http://x"}, "generator": "smollm2"}, "targets.r.generator"),
        ({"kind": "remote", "remote": {"url": "http://x"}, "datasets": ["nope"]}, "targets.r.datasets.0"),
        ({"kind": "remote", "remote": {"url": "http://x", "max_requests": 0}}, "targets.r.remote.max_requests"),
    ],
)
def test_bad_remote_config_names_the_key(target, key):
    cfg = _cfg({"r": target})
    cfg["defenses"] = {"p": {"kind": "pad"}}
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    assert str(e.value).startswith(f"config key {key}"), str(e.value)


def test_remote_target_config_defaults_and_pairing():
    cfg = validate_config(
        _cfg(
            {
                "local": {"retriever": "minilm-cosine", "generator": "smollm2"},
                "r": {"kind": "remote", "remote": {"url": "http://127.0.0.1:1/v1"}, "datasets": ["d"]},
            },
            {"d": {"source": "synthetic", "n_docs": 40}, "e": {"source": "synthetic", "n_docs": 40}},
        )
        | {"controls": {"null_database": True}}
    )
    from ragmi.plan import runs

    r = cfg["targets"]["r"]["remote"]
    assert (r["api"], r["logprobs"], r["concurrency"], r["max_requests"], r["on_empty_answer"]) == (
        "openai",
        False,
        4,
        None,
        "error",
    )
    assert cfg["targets"]["local"]["kind"] == "rag"  # the schema's default kind: in process
    assert ("e", "r", "rag_mia") not in runs(cfg) and ("d", "r", "rag_mia") in runs(cfg)
    assert "r--null-db" not in cfg["targets"] and "local--null-db" in cfg["targets"]  # no control of a service


def test_only_remote_targets_default_the_attacker_to_a_configured_generator():
    cfg = validate_config(_cfg({"r": {"kind": "remote", "remote": {"url": "http://127.0.0.1:1/v1"}}}))
    assert cfg["attacker"]["generator"] == "smollm2"


# ------------------------------------------------------------------ candidates file and its split


def _write_candidates(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_candidates_file_split_by_labels(tmp_path):
    from ragmi.datasets.candidates import read_candidates
    from ragmi.split import split_labelled

    rows = [{"id": f"m{i}", "text": f"member text {i}", "label": "member"} for i in range(6)]
    rows += [{"id": f"n{i}", "text": f"other text {i}", "label": 0} for i in range(5)]
    path = _write_candidates(tmp_path / "c.jsonl", rows)
    spec = {"path": path, "text_column": "text", "label_column": "label", "id_column": "id"}
    labelled = read_candidates("audit", spec)
    members, nonmembers, cand, info = split_labelled(labelled, 2, 2, seed=3, name="audit")
    assert set(members["doc_id"]) == {f"m{i}" for i in range(6)} and len(nonmembers) == 5
    assert cand.groupby(["label", "role"]).size().tolist() == [2, 2, 2, 2]
    assert list(cand.columns) == ["doc_id", "text", "title", "human_turn", "label", "role"]
    assert info["roles_from_file"] is False
    again = split_labelled(labelled, 2, 2, seed=3, name="audit")[2]
    pd.testing.assert_frame_equal(cand, again)
    with pytest.raises(DataError, match="split.allow_shrink"):
        split_labelled(labelled, 3, 3, seed=3, name="audit")


def test_candidates_file_roles_and_bad_rows(tmp_path):
    from ragmi.datasets.candidates import read_candidates
    from ragmi.split import split_labelled

    rows = [
        {"text": f"t{i}", "label": lab, "role": role}
        for i, (lab, role) in enumerate(
            [
                (1, "reference"),
                (1, "reference"),
                (1, "eval"),
                (1, "eval"),
                (0, "reference"),
                (0, "reference"),
                (0, "eval"),
                (0, "eval"),
                (0, "eval"),
            ]
        )
    ]
    spec = {
        "path": _write_candidates(tmp_path / "c.jsonl", rows),
        "text_column": "text",
        "label_column": "label",
        "role_column": "role",
    }
    cand = split_labelled(read_candidates("a", spec), 100, 100, seed=1, name="a")[2]
    assert cand.groupby(["label", "role"]).size().to_dict() == {
        (0, "eval"): 3,
        (0, "reference"): 2,
        (1, "eval"): 2,
        (1, "reference"): 2,
    }
    bad = rows + [{"text": "tx", "label": "maybe", "role": "eval"}]
    spec["path"] = _write_candidates(tmp_path / "bad.jsonl", bad)
    with pytest.raises(DataError, match=r"row 10: label is 'maybe'"):
        read_candidates("a", spec)
    dup = rows + [{"text": "T0 ", "label": 0, "role": "eval"}]
    spec["path"] = _write_candidates(tmp_path / "dup.jsonl", dup)
    with pytest.raises(DataError, match="repeated text"):
        read_candidates("a", spec)


def test_candidates_dataset_needs_an_existing_file(tmp_path):
    cfg = _cfg(
        {"r": {"kind": "remote", "remote": {"url": "http://x"}}},
        {"c": {"source": "candidates", "path": str(tmp_path / "no.jsonl")}},
    )
    with pytest.raises(ConfigError, match=r"^config key datasets.c.path: file .* does not exist"):
        validate_config(cfg)
    Path(tmp_path / "no.jsonl").write_text("{}\n")
    assert validate_config(cfg)["datasets"]["c"]["label_column"] == "label"
