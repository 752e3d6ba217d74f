"""The API shapes of deployed RAG services (``targets.<t>.remote``): streamed answers (OpenAI's
chat-completion chunks and plain server-sent events), the sources a service reports (``sources_path``
matched to the candidates by ``sources_match``), and the Dify and MaxKB presets, each against a
stand-in endpoint on 127.0.0.1 that speaks the format as the platform's documentation describes it
(docs/provenance.md#remote-presets).  No network, no model."""

from __future__ import annotations

import hashlib

import pandas as pd
import pytest
from stand_in import SSE_HEADERS, MaxKB, StandIn, openai_body, openai_chunks, sse

from ragmi.config import apply_remote_preset, validate_config
from ragmi.errors import ConfigError, EndpointError
from ragmi.rag.factory import TargetSpec
from ragmi.rag.remote import (
    RemoteClient,
    RequestBudget,
    SourceMatcher,
    remote_target,
    resolve_dots,
    sources_at,
    sse_events,
)
from ragmi.schema import section_params

SECRET = "app-test-SECRET-42"


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


def remote_entry(remote: dict) -> dict:
    """A ``remote`` block as validation leaves it: its preset's keys, then the schema's defaults."""
    r = apply_remote_preset({"backoff_s": 0.0, **remote}, "targets.r.remote")
    return section_params("targets", {"kind": "remote", "remote": r})["remote"]


def spec_of(remote: dict, cache_dir) -> TargetSpec:
    return TargetSpec(
        name="svc",
        target=section_params("targets", {"kind": "remote", "remote": remote}),
        retriever={},
        generator={},
        index_dir="",
        model_dir=None,
        cache_dir=str(cache_dir),
        threads=1,
        server_log="",
        seed=0,
        temperature=0.0,
    )


def request(text="Is it?", top=0):
    return {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 4,
        "top_logprobs": top,
        "temperature": 0.0,
        "seed": 0,
    }


DOCS = pd.DataFrame(
    {
        "doc_id": ["d1", "d2", "d3"],
        "title": ["Visit of Mr Smith", "Lab results", ""],
        "text": [
            "Mr Smith came in with a persistent cough and a mild fever for three days.",
            "The blood panel shows elevated white cells and low iron; follow up in two weeks.",
            "A note without a title about knee pain after running a marathon in the rain.",
        ],
    }
)


# ------------------------------------------------------------------ server-sent events


def test_sse_events_follow_the_event_stream_format():
    text = ': comment\nevent: message\ndata: {"a": 1}\n\ndata: line one\ndata: line two\r\n\r\nevent: end\ndata: x'
    assert sse_events(text) == [("message", '{"a": 1}'), ("message", "line one\nline two"), ("end", "x")]


def test_openai_stream_concatenates_the_deltas_and_reads_logprobs(stand_in):
    steps = [
        [{"token": "Ye", "logprob": -0.5, "top_logprobs": [{"token": "Ye", "logprob": -0.5}]}],
        [{"token": "s", "logprob": -0.25, "top_logprobs": [{"token": "s", "logprob": -0.25}]}],
        [{"token": ".", "logprob": -0.125, "top_logprobs": [{"token": ".", "logprob": -0.125}]}],
    ]
    s = stand_in(lambda n, p, b, h: (200, openai_chunks(["Ye", "s", "."], steps), SSE_HEADERS))
    client = RemoteClient(remote_entry({"url": s.url + "/v1", "stream": True, "logprobs": True}), "targets.r.remote")
    out = client.generate([request(top=1)])[0]
    assert s.requests[0]["body"]["stream"] is True
    assert out["response_text"] == "Yes."
    assert out["token_logprobs"] == [-0.5, -0.25, -0.125]
    assert out["first_token_logprobs"] == [{"token": "Ye", "logprob": -0.5}]
    assert (out["prompt_tokens"], out["completion_tokens"]) == (7, 2)


def test_a_cut_off_openai_stream_is_retried_then_an_error(stand_in):
    s = stand_in(lambda n, p, b, h: (200, openai_chunks(["Half an ans"], done=False), SSE_HEADERS))
    client = RemoteClient(remote_entry({"url": s.url + "/v1", "stream": True, "max_retries": 2}), "targets.r.remote")
    with pytest.raises(EndpointError) as e:
        client.generate([request()])
    msg = str(e.value)
    assert "failed after 3 attempt(s)" in msg and "ended before its 'data: [DONE]' line" in msg
    assert "\n" not in msg and len(s.requests) == 3


def test_a_stream_cut_off_once_is_answered_by_the_retry(stand_in):
    def reply(n, p, b, h):
        return 200, openai_chunks(["Ok"], done=n > 1), SSE_HEADERS

    s = stand_in(reply)
    client = RemoteClient(remote_entry({"url": s.url + "/v1", "stream": True}), "targets.r.remote")
    assert client.generate([request()])[0]["response_text"] == "Ok"
    assert len(s.requests) == 2 and client.stats["retried"] == 1


def test_plain_sse_reads_pieces_of_the_named_events_until_the_end_event(stand_in):
    events = [
        ("message", {"text": "Hel"}),
        ("ping", {}),
        ("thought", {"text": "(hidden)"}),
        ("message", {"text": "lo"}),
        ("done", {"n": {"in": 9, "out": 2}, "src": ["d2"]}),
        ("message", {"text": " after the end"}),
    ]
    s = stand_in(lambda n, p, b, h: (200, sse(events), SSE_HEADERS))
    cfg = remote_entry(
        {
            "url": s.url + "/ask",
            "api": "json",
            "body": {"q": "{query}", "stream": True},
            "answer_path": "text",
            "stream": True,
            "stream_path": "text",
            "stream_text_events": ["message"],
            "stream_end_event": "done",
            "prompt_tokens_path": "n.in",
            "completion_tokens_path": "n.out",
            "sources_path": "src",
        }
    )
    out = RemoteClient(cfg, "targets.r.remote").generate([request("hi")])[0]
    assert s.requests[0]["body"] == {"q": "hi", "stream": True}
    assert out["response_text"] == "Hello"
    assert (out["prompt_tokens"], out["completion_tokens"]) == (9, 2)
    assert out["sources"] == ["d2"]


# ------------------------------------------------------------------ sources


def test_sources_at_reads_a_field_of_every_listed_item_or_a_list_of_strings():
    doc = {"meta": {"res": [{"name": "a", "id": 1}, {"name": "b"}, {"id": 3}]}, "ids": ["x", "y"]}
    assert sources_at(doc, "meta.res.*.name") == ["a", "b"]
    assert sources_at(doc, "meta.res.*.id") == ["1", "3"]
    assert sources_at(doc, "ids") == ["x", "y"]
    assert sources_at(doc, "meta.none.*.name") == [] and sources_at({"meta": {"res": None}}, "meta.res.*.name") == []


@pytest.mark.parametrize(
    ("how", "value", "expected"),
    [
        ("id", "d2", ["d2"]),
        ("id", "seg-77", ["remote:seg-77"]),
        ("title", "  visit of  MR SMITH ", ["d1"]),
        ("text_sha256", hashlib.sha256(DOCS["text"][2].encode()).hexdigest().upper(), ["d3"]),
        ("text", "elevated   white cells and LOW iron; follow up", ["d2"]),
        ("text", "white cells", ["remote:white cells"]),  # shorter than a passage: no match
    ],
)
def test_source_matcher_names_the_candidate(how, value, expected):
    assert SourceMatcher(DOCS, how).retrieved_ids([value]) == expected


def test_source_matcher_keeps_the_order_and_drops_repeats():
    assert SourceMatcher(DOCS, "id").retrieved_ids(["d3", "d1", "d3", "zz"]) == ["d3", "d1", "remote:zz"]


# ------------------------------------------------------------------ Dify (POST /v1/chat-messages)


def dify_resource(title, position=1):
    # the fields of one metadata.retriever_resources entry, as Dify's API reference lists them
    return {
        "position": position,
        "dataset_id": "ds-1",
        "dataset_name": "records",
        "document_id": f"doc-{position}",
        "document_name": title,
        "segment_id": f"seg-{position}",
        "score": 0.8,
        "content": "…",
    }


def dify_message_end(resources):
    return {
        "event": "message_end",
        "task_id": "t-1",
        "id": "m-1",
        "message_id": "m-1",
        "conversation_id": "c-1",
        "metadata": {
            "usage": {"prompt_tokens": 120, "completion_tokens": 3, "total_tokens": 123},
            "retriever_resources": resources,
        },
    }


def dify_stand_in(stand_in, resources, cut=False, error=False, replace=None):
    """``replace``: (answer, pieces after it): a message_replace event (Dify's output moderation)
    after the message pieces, with the fields Dify's API reference lists, then those pieces."""

    def reply(n, path, body, headers):
        if path != "/v1/chat-messages":
            return 404, {"code": "not_found", "message": "no such route", "status": 404}, None
        if headers.get("Authorization") != f"Bearer {SECRET}":
            return 401, {"code": "unauthorized", "message": "Access token is invalid", "status": 401}, None
        answer = f"Answer to: {body['query']}"
        if body["response_mode"] == "blocking":
            doc = dify_message_end(resources)
            doc.update(event="message", mode="chat", answer=answer)
            return 200, doc, None
        base = {"task_id": "t-1", "message_id": "m-1", "conversation_id": "c-1"}
        events = [{"event": "message", "answer": answer[:6], **base}, {"event": "ping"}]
        if error:
            events.append({"event": "error", "status": 400, "code": "invalid_param", "message": "quota\nexceeded"})
        events.append({"event": "message", "answer": answer[6:], **base})
        if replace is not None:
            events.append({"event": "message_replace", "answer": replace[0], "created_at": 1705395332, **base})
            events += [{"event": "message", "answer": p, **base} for p in replace[1]]
        if not cut:
            events.append(dify_message_end(resources))
        return 200, sse(events), SSE_HEADERS

    return stand_in(reply)


@pytest.mark.parametrize("stream", [False, True])
def test_dify_preset_asks_a_new_conversation_and_maps_the_sources(stand_in, tmp_path, monkeypatch, stream):
    monkeypatch.setenv("DIFY_API_KEY", SECRET)
    s = dify_stand_in(stand_in, [dify_resource("Lab results", 1), dify_resource("Not a candidate", 2)])
    remote = remote_entry({"preset": "dify", "url": s.url + "/v1", "stream": stream})
    with remote_target(spec_of(remote, tmp_path), log=lambda m: None, documents=DOCS) as t:
        out = t.answer(["What was found?"], [8], [0], ["q0"])[0]
    body = s.requests[0]["body"]
    assert body == {
        "inputs": {},
        "query": "What was found?",
        "response_mode": "streaming" if stream else "blocking",
        "user": "ragmi-audit",
        "conversation_id": "",
    }
    assert out["response_text"] == "Answer to: What was found?"
    assert out["retrieved_ids"] == ["d2", "remote:Not a candidate"]
    assert (out["prompt_tokens"], out["completion_tokens"]) == (120, 3)
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace")


@pytest.mark.parametrize(
    ("replace", "expected", "flag"),
    [
        (None, "Answer to: Is it?", False),
        (("This answer was withheld.", []), "This answer was withheld.", True),
        (("Withheld", [": ", "see the policy."]), "Withheld: see the policy.", True),
    ],
)
def test_dify_message_replace_replaces_the_answer_so_far(stand_in, tmp_path, monkeypatch, replace, expected, flag):
    monkeypatch.setenv("DIFY_API_KEY", SECRET)
    s = dify_stand_in(stand_in, [], replace=replace)
    remote = remote_entry({"preset": "dify", "url": s.url + "/v1", "stream": True})
    assert remote["stream_replace_event"] == "message_replace"
    with remote_target(spec_of(remote, tmp_path), log=lambda m: None, documents=DOCS) as t:
        out = t.answer(["Is it?"], [8], [0], ["q0"])[0]
    assert out["response_text"] == expected and out["answer_replaced"] is flag


def test_answer_replaced_is_unknown_without_a_replace_event(stand_in, monkeypatch):
    monkeypatch.setenv("DIFY_API_KEY", SECRET)
    s = dify_stand_in(stand_in, [], replace=("Withheld", []))
    blocking = RemoteClient(remote_entry({"preset": "dify", "url": s.url + "/v1"}), "w")
    assert blocking.generate([request()])[0]["answer_replaced"] is None  # a blocking answer cannot say
    plain = remote_entry({"preset": "dify", "url": s.url + "/v1", "stream": True})
    del plain["stream_replace_event"]
    out = RemoteClient(plain, "w").generate([request()])[0]
    assert out["answer_replaced"] is None and out["response_text"] == "Answer to: Is it?"  # the event is not read


def test_every_target_kind_writes_the_answer_replaced_column():
    from ragmi.workflow import RESPONSE_FILE_COLUMNS

    assert RESPONSE_FILE_COLUMNS[-1] == "answer_replaced"


def test_dify_stream_cut_before_message_end_is_an_error(stand_in, monkeypatch):
    monkeypatch.setenv("DIFY_API_KEY", SECRET)
    s = dify_stand_in(stand_in, [], cut=True)
    client = RemoteClient(remote_entry({"preset": "dify", "url": s.url + "/v1", "stream": True, "max_retries": 1}), "w")
    with pytest.raises(EndpointError, match="ended before its 'message_end' event"):
        client.generate([request()])
    assert len(s.requests) == 2


def test_dify_error_event_is_one_line_with_its_message(stand_in, monkeypatch):
    monkeypatch.setenv("DIFY_API_KEY", SECRET)
    s = dify_stand_in(stand_in, [], error=True)
    client = RemoteClient(remote_entry({"preset": "dify", "url": s.url + "/v1", "stream": True}), "targets.svc.remote")
    with pytest.raises(EndpointError) as e:
        client.generate([request()])
    assert "streamed an error event (targets.svc.remote): quota exceeded" in str(e.value)
    assert len(s.requests) == 1  # an error event is the service's answer: not retried


def test_dify_without_the_key_stops_before_any_request(stand_in, monkeypatch):
    monkeypatch.delenv("DIFY_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable DIFY_API_KEY"):
        RemoteClient(remote_entry({"preset": "dify", "url": "http://127.0.0.1:9/v1"}), "targets.svc.remote")


# ------------------------------------------------------------------ MaxKB


@pytest.fixture
def maxkb(monkeypatch):
    made = []

    def make(version=2, fail_first=0):
        monkeypatch.setenv("MAXKB_API_KEY", SECRET)
        m = MaxKB(SECRET, "0196b4c2-3fdf-7941-a6f4-0572478f57f6", version, fail_first)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def maxkb_client(m, where="targets.kb.remote", **keys):
    preset = "maxkb" if m.version == 2 else "maxkb_v1"
    return RemoteClient(remote_entry({"preset": preset, "url": m.url, **keys}), where)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("stream", [False, True])
def test_maxkb_opens_a_fresh_chat_for_every_query(maxkb, tmp_path, version, stream):
    m = maxkb(version)
    preset = "maxkb" if version == 2 else "maxkb_v1"
    remote = remote_entry({"preset": preset, "url": m.url, "stream": stream, "concurrency": 2})
    logs = []
    with remote_target(spec_of(remote, tmp_path), log=logs.append) as t:
        out = t.answer(["first?", "second?", "third?"], [8] * 3, [0] * 3, ["q0", "q1", "q2"])
    # every query answered in a chat of its own: no "(after N earlier)"
    assert [r["response_text"] for r in out] == ["MaxKB says: first?", "MaxKB says: second?", "MaxKB says: third?"]
    assert (out[0]["prompt_tokens"], out[0]["completion_tokens"]) == (11, 3)
    assert all(r["answer_replaced"] is None for r in out)
    # the documented calls: one GET open and one POST message per query, 2 requests per query
    opens = [r for r in m.requests if r["method"] == "GET"]
    posts = [r for r in m.requests if r["method"] == "POST"]
    assert len(opens) == 3 and len(posts) == 3 and len(m.requests) == 6
    assert {r["path"] for r in opens} == {m.open_path}
    assert sorted(r["path"] for r in posts) == sorted(m.message_prefix + c for c in m.chats)
    assert all(len(msgs) == 1 for msgs in m.chats.values()) and len(m.chats) == 3
    assert all(r["body"] == {"message": r["body"]["message"], "re_chat": False, "stream": stream} for r in posts)
    auth = f"Bearer {SECRET}" if version == 2 else SECRET
    assert all(r["headers"]["Authorization"] == auth for r in m.requests)
    assert any("6 HTTP requests (0 retries, 3 of them session opens)" in line for line in logs)
    # neither the key nor a chat id is cached or logged
    cached = "".join(f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file())
    for secret in (SECRET, *m.chats):
        assert secret not in cached and not any(secret in line for line in logs)


def test_maxkb_cached_answers_send_nothing(maxkb, tmp_path):
    m = maxkb()
    remote = remote_entry({"preset": "maxkb", "url": m.url})
    for _ in range(2):
        with remote_target(spec_of(remote, tmp_path), log=lambda x: None) as t:
            assert t.answer(["again?"], [8], [0], ["q0"])[0]["response_text"] == "MaxKB says: again?"
    assert len(m.requests) == 2  # the second run's answer came from the cache: no open, no message


def test_maxkb_per_worker_reuses_its_chat_and_the_answers_see_the_history(maxkb):
    m = maxkb()
    client = maxkb_client(m, session="per_worker", concurrency=1)
    out = client.generate([request("a?"), request("b?"), request("c?")])
    assert [r["response_text"] for r in out] == [
        "MaxKB says: a?",
        "MaxKB says: b? (after 1 earlier)",
        "MaxKB says: c? (after 2 earlier)",
    ]
    assert [r["method"] for r in m.requests] == ["GET", "POST", "POST", "POST"]  # 1 open for 3 queries
    assert client.stats == {"sent": 4, "retried": 0, "sessions": 1}


def test_a_retried_message_goes_to_a_fresh_chat(maxkb):
    m = maxkb(fail_first=1)  # the first message is recorded in its chat, then answered 502
    client = maxkb_client(m)
    out = client.generate([request("once?")])[0]
    assert out["response_text"] == "MaxKB says: once?"  # not "(after 1 earlier)"
    assert [r["method"] for r in m.requests] == ["GET", "POST", "GET", "POST"]
    assert client.stats == {"sent": 4, "retried": 1, "sessions": 2}


def test_per_worker_drops_its_chat_after_a_failed_attempt(maxkb):
    m = maxkb(fail_first=1)
    client = maxkb_client(m, session="per_worker", concurrency=1)
    out = client.generate([request("x?"), request("y?")])
    assert [r["response_text"] for r in out] == ["MaxKB says: x?", "MaxKB says: y? (after 1 earlier)"]
    assert client.stats["sessions"] == 2 and len(m.chats) == 2


def test_a_fixed_session_id_opens_none(maxkb):
    m = maxkb()
    chat_id = maxkb_client(m).open_session()
    client = RemoteClient(
        remote_entry({"preset": "maxkb", "url": m.url, "session_id": chat_id, "concurrency": 1}),
        "targets.kb.remote",
    )
    out = client.generate([request("p?"), request("q?")])
    assert [r["response_text"] for r in out] == ["MaxKB says: p?", "MaxKB says: q? (after 1 earlier)"]
    assert [r["method"] for r in m.requests] == ["GET", "POST", "POST"] and len(m.chats[chat_id]) == 2


def test_the_stand_in_rejects_a_message_to_a_chat_never_opened(maxkb):
    m = maxkb()
    client = RemoteClient(
        remote_entry({"preset": "maxkb", "url": m.url, "session_id": "0196-never-opened", "max_retries": 1}),
        "targets.kb.remote",
    )
    with pytest.raises(EndpointError) as e:
        client.generate([request("lost?")])
    assert "HTTP 500: Conversation does not exist" in str(e.value) and m.messages == 0


@pytest.mark.parametrize("version", [1, 2])
def test_a_rejected_key_fails_the_open_in_one_line_without_the_key(maxkb, monkeypatch, version):
    m = maxkb(version)
    monkeypatch.setenv("MAXKB_API_KEY", "application-wrong-key-0000")
    with pytest.raises(EndpointError) as e:
        maxkb_client(m).generate([request()])
    msg = str(e.value)
    assert msg.startswith(f"the remote endpoint {m.server.url}{m.open_path} could not open a session: HTTP 401")
    assert "(targets.kb.remote.api_key_env)" in msg and "illegal user" in msg
    assert "\n" not in msg and "wrong-key" not in msg and SECRET not in msg
    assert [r["method"] for r in m.requests] == ["GET"]  # 401 is not retried, and no message is sent


def test_an_unknown_application_fails_the_open_with_the_servers_message(maxkb):
    m = maxkb(version=1)
    url = m.url.replace(m.app_id, "0196b4c2-0000-0000-0000-000000000000")
    client = RemoteClient(remote_entry({"preset": "maxkb_v1", "url": url}), "targets.kb.remote")
    with pytest.raises(EndpointError) as e:
        client.generate([request()])
    assert "answered no session id at 'data' (targets.kb.remote.session_id_path): Application does not exist" in str(
        e.value
    )
    assert len(m.requests) == 1


def test_an_open_answered_5xx_is_retried_then_one_line(stand_in, monkeypatch):
    monkeypatch.setenv("MAXKB_API_KEY", SECRET)
    s = stand_in(lambda n, p, b, h: (503, {"code": 503, "message": f"busy, key {SECRET}"}, None))
    client = RemoteClient(
        remote_entry({"preset": "maxkb", "url": s.url + "/chat/api/app-1", "max_retries": 2}), "targets.kb.remote"
    )
    with pytest.raises(EndpointError) as e:
        client.generate([request()])
    msg = str(e.value)
    assert "could not open a session after 3 attempt(s) (targets.kb.remote.max_retries): HTTP 503: busy" in msg
    assert SECRET not in msg and "***" in msg and len(s.requests) == 3
    assert all(r["method"] == "GET" and r["path"] == "/chat/api/open" for r in s.requests)


def test_maxkb_openai_preset_posts_to_the_application_chat_completions(stand_in, monkeypatch):
    monkeypatch.setenv("MAXKB_API_KEY", SECRET)

    def reply(n, path, body, headers):
        assert headers.get("Authorization") == f"Bearer {SECRET}"
        if path != "/chat/api/app-1/chat/completions":
            return 404, {"message": "not found"}, None
        return 200, openai_body("MaxKB says: " + body["messages"][-1]["content"]), None

    s = stand_in(reply)
    client = RemoteClient(remote_entry({"preset": "maxkb_openai", "url": s.url + "/chat/api/app-1"}), "w")
    assert client.generate([request("hello")])[0]["response_text"] == "MaxKB says: hello"
    assert s.requests[0]["body"]["model"] == "gpt-3.5-turbo" and len(s.requests) == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://h/chat/api/app-1/../open", "https://h/chat/api/open"),
        (
            "https://h/api/application/app-1/../chat_message/{session_id}",
            "https://h/api/application/chat_message/{session_id}",
        ),
        ("https://h/a/./b/../../c?x=1", "https://h/c?x=1"),
        ("https://h/../x", "https://h/x"),
        ("https://h/a/..", "https://h/"),
        ("https://h/v1/chat-messages", "https://h/v1/chat-messages"),
    ],
)
def test_resolve_dots(url, expected):
    assert resolve_dots(url) == expected


# ------------------------------------------------------------------ errors and config


def test_http_400_is_one_line_naming_the_target_and_the_servers_message(stand_in):
    msg = (
        "This model's maximum context length is 2048 tokens. However, you requested 70213 tokens "
        "(70207 in the messages, 6 in the completion).\nPlease reduce the length of the messages."
    )
    s = stand_in(
        lambda n, p, b, h: (400, {"object": "error", "message": msg, "type": "BadRequestError", "code": 400}, None)
    )
    client = RemoteClient(remote_entry({"url": s.url + "/v1"}), "targets.prod-rag.remote")
    with pytest.raises(EndpointError) as e:
        client.generate([request()])
    text = str(e.value)
    assert "\n" not in text and "(targets.prod-rag.remote)" in text
    assert "answered HTTP 400: This model's maximum context length is 2048 tokens." in text
    assert len(s.requests) == 1


def test_keys_set_on_the_target_override_the_preset():
    r = remote_entry(
        {"preset": "dify", "url": "http://127.0.0.1:9/v1", "api_key_env": "MY_DIFY", "sources_match": "id"}
    )
    assert r["api_key_env"] == "MY_DIFY" and r["sources_match"] == "id" and r["path"] == "/chat-messages"
    assert r["body"]["response_mode"] == "blocking" and "stream_path" not in r
    s = remote_entry({"preset": "dify", "url": "http://127.0.0.1:9/v1", "stream": True, "stream_end_event": "fin"})
    assert s["stream_end_event"] == "fin" and s["stream_path"] == "answer"


def config_with(remote):
    return {
        "datasets": {"d": {"source": "synthetic"}},
        "targets": {"svc": {"kind": "remote", "remote": remote}},
        "attacks": {"rag_mia": {}},
    }


def test_validate_config_applies_the_preset_and_checks_the_stream_keys():
    cfg = validate_config(config_with({"preset": "dify", "url": "http://127.0.0.1:9/v1", "stream": True}))
    assert cfg["targets"]["svc"]["remote"]["stream_end_event"] == "message_end"
    with pytest.raises(ConfigError, match=r"targets\.svc\.remote\.preset"):
        validate_config(config_with({"preset": "ragflow", "url": "http://127.0.0.1:9/v1"}))
    with pytest.raises(ConfigError, match=r"targets\.svc\.remote\.stream_path: required"):
        validate_config(
            config_with({"api": "json", "url": "http://x/a", "body": {}, "answer_path": "a", "stream": True})
        )
    with pytest.raises(ConfigError, match=r"targets\.svc\.remote\.stream_end_event: only used with stream: true"):
        validate_config(
            config_with({"api": "json", "url": "http://x/a", "body": {}, "answer_path": "a", "stream_end_event": "e"})
        )
    with pytest.raises(ConfigError, match=r"targets\.svc\.remote\.path: only used with api 'json'"):
        validate_config(config_with({"url": "http://x/v1", "path": "/chat"}))


def test_validate_config_checks_the_session_keys():
    cfg = validate_config(config_with({"preset": "maxkb", "url": "http://127.0.0.1:9/chat/api/app-1", "stream": True}))
    r = cfg["targets"]["svc"]["remote"]
    assert (r["session_open_path"], r["path"], r["stream_end_event"]) == (
        "/../open",
        "/../chat_message/{session_id}",
        "true",
    )
    fixed = validate_config(config_with({"preset": "maxkb", "url": "http://h/chat/api/a", "session_id": "c-1"}))
    assert "session_open_path" not in fixed["targets"]["svc"]["remote"]
    json_api = {"api": "json", "url": "http://x/a", "body": {"q": "{query}"}, "answer_path": "a"}
    bad = [
        ({"url": "http://x/v1", "session_id": "c"}, r"remote\.session_id: only used with api 'json'"),
        ({**json_api, "session_open_path": "/open", "path": "/{session_id}"}, r"session_id_path: required"),
        ({**json_api, "session": "per_worker"}, r"remote\.session: only used with session_open_path"),
        ({**json_api, "session_open_path": "/o", "session_id_path": "d"}, r"remote\.path: a session is used but"),
        (
            {**json_api, "session_id": "c", "session_open_path": "/o", "session_id_path": "d", "path": "/{session_id}"},
            r"remote\.session_id: a fixed session opens none",
        ),
        (
            {**json_api, "session_id": "c", "session": "per_query", "path": "/{session_id}"},
            r"remote\.session: only used",
        ),
        ({"preset": "maxkb", "url": "http://h/chat/api/a", "session": "per_call"}, r"remote\.session"),
    ]
    for remote, pattern in bad:
        with pytest.raises(ConfigError, match=pattern):
            validate_config(config_with(remote))
    ok = {
        **json_api,
        "body": {"q": "{query}", "chat": "{session_id}"},
        "session_open_path": "/o",
        "session_id_path": "d",
    }
    assert validate_config(config_with(ok))["targets"]["svc"]["remote"]["session_id_path"] == "d"


def test_timeout_s_bounds_the_whole_stream_not_each_read():
    """A stream whose events each come within the per-read timeout but that goes on for longer than
    timeout_s is cut off: one line naming the key, after the retries."""
    import http.server
    import json
    import threading
    import time

    class Trickle(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for i in range(40):
                    chunk = {"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.1)
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        client = RemoteClient(
            remote_entry({"url": url, "stream": True, "timeout_s": 1.0, "max_retries": 0}), "targets.r.remote"
        )
        t0 = time.perf_counter()
        with pytest.raises(EndpointError, match=r"no answer within 1.0 s \(targets\.r\.remote\.timeout_s\)"):
            client.generate([request()])
        assert time.perf_counter() - t0 < 3.0
    finally:
        server.shutdown()
        server.server_close()


def test_a_session_id_can_go_into_the_body_of_any_json_api(stand_in):
    def reply(n, path, body, headers):
        if body is None:
            return (200, {"session": {"id": f"s-{n}"}}, None) if path == "/api/sessions/new" else (404, {}, None)
        return 200, {"answer": f"{body['conversation']}: {body['q']}"}, None

    s = stand_in(reply)
    cfg = remote_entry(
        {
            "api": "json",
            "url": s.url + "/api/ask",
            "body": {"q": "{query}", "conversation": "{session_id}"},
            "answer_path": "answer",
            "session_open_path": "/../sessions/new",
            "session_id_path": "session.id",
        }
    )
    out = RemoteClient(cfg, "w").generate([request("what is {session_id}?")])[0]
    assert out["response_text"] == "s-1: what is {session_id}?"  # the query's own text is left as it is
    assert [(r["method"], r["path"]) for r in s.requests] == [("GET", "/api/sessions/new"), ("POST", "/api/ask")]


def test_session_opens_count_against_the_request_budget(maxkb):
    m = maxkb()
    cfg = remote_entry({"preset": "maxkb", "url": m.url, "concurrency": 1})
    client = RemoteClient(cfg, "targets.kb.remote", RequestBudget(3, None, "targets.kb.remote"))
    with pytest.raises(EndpointError, match=r"request budget of this run is spent: 3 requests"):
        client.generate([request("one?"), request("two?")])
    # query one: open + message; query two: its open is the third request, its message is refused
    assert [r["method"] for r in m.requests] == ["GET", "POST", "GET"] and client.stats["sent"] == 3
