"""PostgreSQL with pgvector (https://github.com/pgvector/pgvector), reached with psycopg 3 at
``stores.<s>.host:port`` (``host`` may be a unix-socket folder, a path starting with ``/``).

- Layout: one table holds the documents (``table``; columns ``id_column``, ``text_column``,
  ``embedding_column`` of type ``vector``, ``metadata_column`` of type json/jsonb or null for none). The
  defaults are LangChain's ``PGVector`` layout (the langchain-postgres package): table
  ``langchain_pg_embedding`` (``id``, ``document``, ``embedding``, ``cmetadata``), whose rows belong to the
  collection named ``collection`` through ``collection_id`` = the ``uuid`` of that name in
  ``langchain_pg_collection``. With ``collection_table: null`` the whole table is the collection.
- Ids: a text/varchar id column holds ragmi's ids as they are; a uuid id column holds the name-based
  ``uuid5`` of each (as the Qdrant adapter does), and the metadata keeps the id under ``ragmi_id``.
  Count, ids (the id column as text) and the before/after hash are of the collection's rows; the check
  that no id of the game exists yet reads the whole table (its primary key spans every collection).
  Deletes name the collection too, so no row of another collection is ever touched.
- Each batch is written in one transaction: a SIGKILL leaves whole batches, and the manifest lists them.
- Embedder: ``stores.<s>.embedder``, else the key ``ragmi:embedder`` of the collection's ``cmetadata``
  (LangChain's collection table), else one ConfigError. The embedder's dimension must equal the
  column's (``vector(n)``) or, for an untyped ``vector`` column, that of the collection's rows.
- Password: from the environment variable that ``password_env`` names, never from the config, and
  never written to the manifest, the results or a log.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import numpy as np

from ..errors import ConfigError, DataError
from .base import Store
from .qdrant import point_id

METADATA_EMBEDDER_KEY = "ragmi:embedder"
ID_TYPES = ("text", "character varying", "uuid")


def password(name: str, spec: Mapping) -> str | None:
    var = spec.get("password_env")
    if not var:
        return None
    if os.environ.get(var) is None:
        raise ConfigError(f"config key stores.{name}.password_env: environment variable {var} is not set")
    return os.environ[var]


class PgvectorStore(Store):
    kind = "pgvector"

    def __init__(self, name: str, spec: Mapping):
        super().__init__(name, spec)
        try:
            import psycopg
            from psycopg import sql
        except ImportError:
            raise ConfigError(
                f"config key stores.{name}.kind: pgvector needs psycopg (pip install -r requirements/stores.txt)"
            ) from None
        self.sql = sql
        pw = password(name, spec)
        try:
            self.conn = psycopg.connect(
                host=spec["host"],
                port=spec["port"],
                dbname=spec["dbname"],
                user=spec["user"],
                password=pw,
                connect_timeout=10,
                autocommit=True,
            )
            self._inspect()
        except (ConfigError, DataError):
            raise
        except Exception as e:  # noqa: BLE001 - unreachable, refused, no such table: one sentence
            raise DataError(f"store {name!r} ({self.where()}): {type(e).__name__}: {str(e).strip()}") from None

    # -- the table ---------------------------------------------------------------------------------
    def _ident(self, dotted: str):
        return self.sql.Identifier(*dotted.split("."))

    def _columns(self, table: str) -> dict[str, str]:
        qualified = self._ident(table).as_string(self.conn)
        if self.conn.execute("SELECT to_regclass(%s)", [qualified]).fetchone()[0] is None:
            raise DataError(f"store {self.name!r} ({self.where()}): table {table!r} does not exist")
        rows = self.conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [qualified],
        ).fetchall()
        return dict(rows)

    def _inspect(self) -> None:
        s = self.spec
        cols = self._columns(s["table"])
        need = {"id_column": s["id_column"], "text_column": s["text_column"], "embedding_column": s["embedding_column"]}
        if s["metadata_column"]:
            need["metadata_column"] = s["metadata_column"]
        if s["collection_table"]:
            need["collection_id_column"] = s["collection_id_column"]
        for key, col in need.items():
            if col not in cols:
                raise ConfigError(
                    f"config key stores.{self.name}.{key}: table {s['table']!r} has no column {col!r} "
                    f"(columns: {', '.join(sorted(cols))})"
                )
        self.id_type = cols[s["id_column"]]
        if self.id_type not in ID_TYPES:
            raise ConfigError(
                f"config key stores.{self.name}.id_column: column {s['id_column']!r} is of type {self.id_type}; "
                f"ragmi writes ids into a column of type {', '.join(ID_TYPES)}"
            )
        emb = cols[s["embedding_column"]]
        m = re.fullmatch(r"vector(?:\((\d+)\))?", emb)
        if m is None:
            raise ConfigError(
                f"config key stores.{self.name}.embedding_column: column {s['embedding_column']!r} is of type "
                f"{emb}, not pgvector's vector"
            )
        self.dim = int(m.group(1)) if m.group(1) else None
        if s["metadata_column"] and cols[s["metadata_column"]] not in ("json", "jsonb"):
            raise ConfigError(
                f"config key stores.{self.name}.metadata_column: column {s['metadata_column']!r} is of type "
                f"{cols[s['metadata_column']]}, not json or jsonb (or set it to null)"
            )
        self.collection_uuid = None
        self.collection_meta: dict = {}
        if s["collection_table"]:
            ct = self._columns(s["collection_table"])
            if not {"uuid", "name"} <= set(ct):
                raise ConfigError(
                    f"config key stores.{self.name}.collection_table: {s['collection_table']!r} has no columns "
                    "uuid and name (LangChain's langchain_pg_collection)"
                )
            meta = self.sql.SQL(", cmetadata" if "cmetadata" in ct else ", NULL")
            row = self.conn.execute(
                self.sql.SQL("SELECT uuid{} FROM {} WHERE name = %s").format(meta, self._ident(s["collection_table"])),
                [s["collection"]],
            ).fetchone()
            if row is None:
                raise DataError(
                    f"store {self.name!r} ({self.where()}): no collection named {s['collection']!r} in "
                    f"{s['collection_table']!r}"
                )
            self.collection_uuid, self.collection_meta = row[0], row[1] or {}

    def _scope(self):
        """`` AND <collection_id> = %s`` and its parameter, or nothing for a table without collections."""
        if self.collection_uuid is None:
            return self.sql.SQL(""), []
        return self.sql.SQL(" AND {} = %s").format(self._ident(self.spec["collection_id_column"])), [
            self.collection_uuid
        ]

    def _key(self, ragmi_id: str):
        """The value of the id column for one of ragmi's ids."""
        return point_id(ragmi_id) if self.id_type == "uuid" else ragmi_id

    def _q(self, template: str, **idents):
        return self.sql.SQL(template).format(
            table=self._ident(self.spec["table"]),
            **{k: self.sql.Identifier(v) for k, v in idents.items()},
        )

    # -- Store -------------------------------------------------------------------------------------
    def where(self) -> str:
        s = self.spec
        coll = f" collection {s['collection']}" if s.get("collection_table") else ""
        return f"pgvector postgresql://{s['user']}@{s['host']}:{s['port']}/{s['dbname']} table {s['table']}{coll}"

    def manifest_spec(self) -> dict:
        keys = (
            "kind", "host", "port", "dbname", "user", "password_env", "collection", "table", "id_column",
            "text_column", "embedding_column", "metadata_column", "collection_table", "collection_id_column",
            "id_prefix",
        )  # fmt: skip
        return {k: self.spec.get(k) for k in keys}

    def count(self) -> int:
        scope, args = self._scope()
        q = self._q("SELECT count(*) FROM {table} WHERE TRUE") + scope
        return int(self.conn.execute(q, args).fetchone()[0])

    def all_ids(self) -> list[str]:
        scope, args = self._scope()
        q = self._q("SELECT {id}::text FROM {table} WHERE TRUE", id=self.spec["id_column"]) + scope
        return [r[0] for r in self.conn.execute(q, args)]

    def existing(self, ids: list[str]) -> list[str]:
        found: set[str] = set()
        q = self._q("SELECT {id}::text FROM {table} WHERE {id}::text = ANY(%s)", id=self.spec["id_column"])
        for lo in range(0, len(ids), 500):
            keys = [str(self._key(i)) for i in ids[lo : lo + 500]]
            found |= {r[0] for r in self.conn.execute(q, [keys])}
        return [i for i in ids if str(self._key(i)) in found]

    def add(self, ids, texts, embeddings: np.ndarray, metadatas) -> None:
        from psycopg.types.json import Jsonb

        s = self.spec
        vecs = np.asarray(embeddings, dtype=np.float32)
        self.check_dimension(vecs.shape[1])
        cols = [s["id_column"], s["text_column"], s["embedding_column"]]
        casts = ["%s", "%s", "%s::vector"]
        if s["metadata_column"]:
            cols.append(s["metadata_column"])
            casts.append("%s")
        if self.collection_uuid is not None:
            cols.append(s["collection_id_column"])
            casts.append("%s")
        q = self.sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self._ident(s["table"]),
            self.sql.SQL(", ").join(self.sql.Identifier(c) for c in cols),
            self.sql.SQL(", ".join(casts)),
        )
        rows = []
        for i, t, v, m in zip(ids, texts, vecs, metadatas):
            row = [self._key(i), t, "[" + ",".join(repr(float(x)) for x in v) + "]"]
            if s["metadata_column"]:
                row.append(Jsonb({**m, "ragmi_id": i}))
            if self.collection_uuid is not None:
                row.append(self.collection_uuid)
            rows.append(row)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(q, rows)

    def delete(self, ids) -> None:
        scope, args = self._scope()
        q = self._q("DELETE FROM {table} WHERE {id}::text = ANY(%s)", id=self.spec["id_column"]) + scope
        with self.conn.transaction():
            self.conn.execute(q, [[str(self._key(i)) for i in ids], *args])

    def embedder_name(self) -> str:
        if self.spec.get("embedder"):
            return self.spec["embedder"]
        if METADATA_EMBEDDER_KEY in self.collection_meta:
            return str(self.collection_meta[METADATA_EMBEDDER_KEY])
        raise ConfigError(
            f"config key stores.{self.name}.embedder: a pgvector table records no embedding model"
            + (
                f" and collection {self.spec['collection']!r} has no cmetadata key {METADATA_EMBEDDER_KEY!r}"
                if self.spec.get("collection_table")
                else ""
            )
            + "; name the embedder that wrote it"
        )

    def check_dimension(self, dim: int) -> None:
        have, where = self.dim, f"column {self.spec['embedding_column']!r} is vector({self.dim})"
        if have is None:
            scope, args = self._scope()
            q = self._q("SELECT vector_dims({e}) FROM {table} WHERE TRUE", e=self.spec["embedding_column"]) + scope
            row = self.conn.execute(q + self.sql.SQL(" LIMIT 1"), args).fetchone()
            if row is None:
                return  # an untyped column and no row yet: any dimension fits
            have, where = int(row[0]), "the collection's rows hold vectors of that dimension"
        if dim != have:
            raise ConfigError(
                f"config key stores.{self.name}.embedder: the embedder writes {dim}-dimensional vectors but "
                f"table {self.spec['table']!r} holds {have}-dimensional ones ({where})"
            )

    def close(self) -> None:
        self.conn.close()
