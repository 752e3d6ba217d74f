"""The store interface and the membership game's manifest (docs/vector-stores.md).

The game writes into the user's collection, so everything here is about leaving it exactly as it was
found:

- every id ragmi inserts is ``<id_prefix><run key>-<doc_id>``: the run key is a hash of the store,
  collection, target, dataset, seed and the member ids, so it cannot be one of the user's ids by
  accident, and inserting refuses when any of these ids already exists (a crashed run not yet
  cleaned up, or a user id that happens to match);
- the manifest (``results/stores/<store>/<target>/manifest.json``) is written, atomically, BEFORE the
  first write to the store, with every id that will be inserted, the collection's count and a hash of
  its sorted ids; it is rewritten after each inserted batch (``inserted``: the ids known to be in);
- cleanup deletes exactly the manifest's planned ids (never anything else), then checks that the
  count and the ids' hash equal the manifest's 'before' state, and records the outcome in
  ``cleanup.json`` beside it; ``python -m ragmi store-cleanup`` runs it for every manifest not yet
  cleaned (after a SIGKILL, when no handler of ragmi's could run).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..io import write_json

MANIFEST_VERSION = 1
INSERTED_MARKER = "inserted.json"  # rule store_insert's output (temp)


class Store:
    """One collection of a vector store. Subclasses connect in ``__init__`` and implement the six
    primitive operations; ``embedder_name`` says which embedder wrote the collection."""

    kind = ""

    def __init__(self, name: str, spec: Mapping):
        self.name = name
        self.spec = dict(spec)

    def where(self) -> str:
        """Where the collection is, for messages and the manifest (no credentials)."""
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def all_ids(self) -> list[str]:
        raise NotImplementedError

    def existing(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` that are in the collection."""
        raise NotImplementedError

    def add(self, ids: list[str], texts: list[str], embeddings: np.ndarray, metadatas: list[dict]) -> None:
        raise NotImplementedError

    def delete(self, ids: list[str]) -> None:
        raise NotImplementedError

    def embedder_name(self) -> str:
        """The embedder of the collection: ``stores.<s>.embedder``, else what the collection records."""
        raise NotImplementedError

    def check_dimension(self, dim: int) -> None:
        """Raise ConfigError when the collection cannot hold ``dim``-dimensional vectors (checked before
        the manifest is written; a store that records no dimension accepts any)."""

    def manifest_spec(self) -> dict:
        """The keys of ``stores.<s>`` that the manifest keeps to reconnect after a crash
        (``python -m ragmi store-cleanup``): never a credential, at most the name of the environment
        variable that holds one."""
        return {k: self.spec[k] for k in ("kind", "host", "port", "collection", "id_prefix")}


def ids_hash(ids: Iterable[str]) -> str:
    """sha256 of the sorted ids, one per line."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def state(store: Store) -> dict:
    ids = store.all_ids()
    return {"count": store.count(), "n_ids": len(ids), "ids_sha256": ids_hash(ids)}


def run_key(
    store: str,
    collection: str,
    target: str,
    dataset: str,
    seed: int,
    doc_ids: Iterable[str],
    canary_ids: Iterable[str] = (),
) -> str:
    parts = [store, collection, target, dataset, seed, sorted(doc_ids)]
    canary_ids = sorted(canary_ids)
    if canary_ids:  # a game without canaries keeps the key it always had
        parts.append(canary_ids)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def game_ids(prefix: str, key: str, doc_ids: Iterable[str]) -> list[str]:
    return [f"{prefix}{key}-{d}" for d in doc_ids]


def store_texts(docs) -> list[str]:
    """What is written to the store per document: ``<title>\n<text>`` where it has a title (as ragmi's
    own titled index), else the text."""
    titles = docs["title"] if "title" in docs else [""] * len(docs)
    return [f"{t}\n{x}" if isinstance(t, str) and t else str(x) for t, x in zip(titles, docs["text"])]


def _write(manifest: dict, path: Path) -> None:
    manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(manifest, path)


def insert_members(
    store: Store,
    docs,
    manifest_path: str | Path,
    *,
    target: str,
    dataset: str,
    seed: int,
    embed: Callable[[list[str]], np.ndarray],
    batch_size: int,
    log: Callable = print,
    canaries=None,
) -> dict:
    """Insert the documents of ``docs`` (a frame: doc_id, text[, title]) into ``store``, the manifest
    first, then the audit's canary documents ``canaries`` (the same columns; None: none) into the same
    manifest. Refuses (DataError, nothing written to the store) when an id of the game already exists."""
    path = Path(manifest_path)
    doc_ids = [str(d) for d in docs["doc_id"]]
    canary_doc_ids = [] if canaries is None else [str(d) for d in canaries["doc_id"]]
    spec = store.spec
    key = run_key(store.name, spec["collection"], target, dataset, seed, doc_ids, canary_doc_ids)
    member_ids = game_ids(spec["id_prefix"], key, doc_ids)
    canary_ids = game_ids(spec["id_prefix"], f"{key}-canary", canary_doc_ids)
    ids = member_ids + canary_ids
    _refuse_game_in_place(store, path, target, ids)
    before = state(store)
    manifest = {
        "version": MANIFEST_VERSION,
        "store": store.name,
        "kind": store.kind,
        "spec": store.manifest_spec(),
        "where": store.where(),
        "target": target,
        "dataset": dataset,
        "run_key": key,
        "before": before,
        "planned": ids,
        "doc_ids": doc_ids,  # the members', in the order of the first len(doc_ids) planned ids
        "canaries": canary_ids,
        "canary_doc_ids": canary_doc_ids,
        "inserted": [],
        "status": "inserting",
    }
    _write(manifest, path)  # before the first write to the store
    texts = store_texts(docs) + ([] if canaries is None else store_texts(canaries))
    try:
        _add_batches(store, manifest, path, texts, embed, batch_size)
    except BaseException:
        log("the insert failed: removing what was inserted (none of these ids existed before)")
        cleanup(store, path, log=log)
        raise
    after = state(store)
    if after["count"] != before["count"] + len(ids):
        manifest["status"] = "inserted-mismatch"
        _write(manifest, path)
        raise DataError(
            f"store {store.name!r}: {len(ids)} documents inserted but the count went from {before['count']} to "
            f"{after['count']}; run python -m ragmi store-cleanup"
        )
    manifest["status"] = "inserted"
    manifest["after_insert"] = after
    _write(manifest, path)
    what = f"{len(member_ids)} member documents" + (f" and {len(canary_ids)} canary documents" if canary_ids else "")
    log(f"inserted {what} into {store.where()} (count {before['count']} -> {after['count']})")
    return manifest


def _refuse_game_in_place(store: Store, path: Path, target: str, ids: list[str]) -> None:
    """DataError when the manifest at ``path`` records a game not cleaned up, or when ``store`` already
    holds one of ``ids``."""
    if path.exists():
        old = json.loads(path.read_text())
        if old["status"] != "cleaned":
            raise DataError(
                f"{path}: a membership game of target {target!r} is still in store {store.name!r} "
                f"({old['status']}); remove it first with: python -m ragmi store-cleanup --results {path.parents[3]}"
            )
    clash = store.existing(ids)
    if clash:
        raise DataError(
            f"store {store.name!r} ({store.where()}) already holds {len(clash)} of the ids the game would insert "
            f"(e.g. {clash[0]!r}); nothing was inserted. If a crashed run left them: python -m ragmi store-cleanup"
        )


def _add_batches(
    store: Store,
    manifest: dict,
    path: Path,
    texts: list[str],
    embed: Callable[[list[str]], np.ndarray],
    batch_size: int,
) -> None:
    """Add the manifest's planned ids (members, then canaries) with ``texts`` in batches, recording in the
    manifest after each batch what is in the store."""
    ids, key = manifest["planned"], manifest["run_key"]
    doc_ids, canary_doc_ids = manifest["doc_ids"], manifest["canary_doc_ids"]
    kinds = ["member"] * len(doc_ids) + ["canary"] * len(canary_doc_ids)
    all_doc_ids = doc_ids + canary_doc_ids
    for lo in range(0, len(ids), batch_size):
        b_ids, b_texts = ids[lo : lo + batch_size], texts[lo : lo + batch_size]
        metas = [
            {"ragmi_game": key, "ragmi_doc_id": d, "ragmi_role": r}
            for d, r in zip(all_doc_ids[lo : lo + batch_size], kinds[lo : lo + batch_size])
        ]
        store.add(b_ids, b_texts, embed(b_texts), metas)
        manifest["inserted"] = ids[: lo + len(b_ids)]
        _write(manifest, path)


def cleanup(store: Store, manifest_path: str | Path, record_path: str | Path | None = None, log=print) -> dict:
    """Delete exactly the manifest's planned ids, verify the 'before' state, write the cleanup record
    (``cleanup.json`` beside the manifest unless ``record_path``). Raises DataError when the collection
    does not match its 'before' state afterwards (the record says so too)."""
    path = Path(manifest_path)
    manifest = json.loads(path.read_text())
    planned = manifest["planned"]
    present = store.existing(planned)
    for lo in range(0, len(present), 500):
        store.delete(present[lo : lo + 500])
    after = state(store)
    before = manifest["before"]
    ok = after["count"] == before["count"] and after["ids_sha256"] == before["ids_sha256"]
    record = {
        "store": manifest["store"],
        "target": manifest["target"],
        "where": manifest["where"],
        "deleted": len(present),
        "planned": len(planned),
        "before": before,
        "after": after,
        "restored": ok,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json(record, Path(record_path) if record_path else path.with_name("cleanup.json"))
    manifest["status"] = "cleaned" if ok else "cleanup-mismatch"
    _write(manifest, path)
    # the insert rule's marker: once it is gone, a rerun inserts again instead of querying a store
    # that no longer holds the members
    path.with_name(INSERTED_MARKER).unlink(missing_ok=True)
    if not ok:
        raise DataError(
            f"store {manifest['store']!r} ({manifest['where']}): after deleting the game's {len(present)} documents "
            f"the collection holds {after['count']} documents (before: {before['count']}) and its ids "
            f"{'match' if after['ids_sha256'] == before['ids_sha256'] else 'differ from'} the ones before the game; "
            "the service or someone else wrote to it during the run (record: "
            f"{path.with_name('cleanup.json')})"
        )
    log(f"removed {len(present)} game documents from {manifest['where']}; count {after['count']} = before")
    return record


def pending_manifests(results: str | Path) -> list[Path]:
    """The manifests under ``<results>/stores`` whose game is not cleaned up."""
    out = []
    for p in sorted(Path(results, "stores").glob("*/*/manifest.json")):
        if json.loads(p.read_text())["status"] != "cleaned":
            out.append(p)
    return out
