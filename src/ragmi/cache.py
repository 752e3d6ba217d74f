"""Content-addressed caches shared by the jobs of a run.

* :class:`ResponseCache`: (backend, model, messages, sampling parameters) -> response.  Responses are
  appended to packed files, one pack per writing process, under ``<dir>/packs/`` (a pack
  ``<name>.pack`` of records, its index ``<name>.idx`` of fixed-size entries); a run of the paper
  configurations (config/paper/) answers 0.3 to 2 million requests, and one file per response would
  put that many files on a cluster's shared file system (docs/running.md#a-response-cache-shared-by-concurrent-runs).
  No two processes ever write one file, so no lock is needed, on one machine or on a cluster file
  system (Lustre, GPFS, NFS) whose ``flock`` may be missing or local to a node.  Each record carries
  the key it was written under and the request it answers: :meth:`ResponseCache.get` takes an entry
  that does not parse, was written under another key, or whose request does not hash to its key for
  a miss (the request is sent again; said once in the log), never for an answer.  A pack cut short
  by a kill or a crash (a torn last record or index entry) loses only that record.  Entries of the
  earlier layout, one JSON file per key under ``<dir>/<k[:2]>/<k>.json`` (the bare response), stay
  readable.  A rerun, or another attack that sends the same prompt, never queries the model twice.
* :class:`EmbeddingCache`: (embedder, its settings, query text) -> float32 vector, one raw file per
  key under ``<dir>/<k[:2]>/<k>.f32``.  The same attack queries reach every target that shares a
  retriever (defended targets, controls), so only the first generate job of an attack loads the
  embedder (about 6 s of imports and loading per job on a 2-core CPU).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .io import atomic_write_bytes, disk_full_error, is_disk_full, plain_mode

PACKS = "packs"  # the packs' folder under the cache folder
# One index entry: the key's 32 bytes, the record's offset and length in its pack.
INDEX_ENTRY = np.dtype([("key", "V32"), ("offset", "<u8"), ("length", "<u4")])
REFRESH_S = 30.0  # a reader looks for other processes' new entries at most this often
OPEN_PACKS = 32  # pack files a reader keeps open
# The entries a reader holds: the key's first 8 bytes as a number (what it searches), the key, its
# pack (a number into the reader's list of names), offset, length and write order.
LOADED = np.dtype([("h", "<u8"), ("key", "V32"), ("pack", "<u4"), ("offset", "<u8"), ("length", "<u4"), ("seq", "<u8")])


def _head(keys: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each 32-byte key as a big-endian number."""
    raw = np.frombuffer(keys.tobytes(), np.uint8).reshape(-1, 32)[:, :8]
    return np.ascontiguousarray(raw).view(">u8").ravel().astype("<u8")


def request_payload(model_id: str, request: dict) -> dict:
    """What a response's key is the SHA-256 of: the generator's cache identity and the request."""
    return {"model": model_id, **request}


def payload_key(payload: dict) -> str:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_key(model_id: str, request: dict) -> str:
    return payload_key(request_payload(model_id, request))


def key_digest(key: str) -> bytes:
    """The 32 bytes an index entry holds for ``key``: the key itself where it is a SHA-256 hex digest
    (:func:`request_key`), else the SHA-256 of its text (the record says which key it is)."""
    if len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class PackRecord:
    """One index entry of a pack: the key's digest, where its record lies, and the record's bytes as
    read (shorter than ``length`` where the pack was cut short)."""

    digest: bytes
    pack: Path
    offset: int
    length: int
    data: bytes


def read_index(path: Path, start: int = 0) -> tuple[np.ndarray, int]:
    """The whole index entries of ``path`` from byte ``start`` on, and the byte after the last of
    them (a torn last entry is left for a later read)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return np.empty(0, INDEX_ENTRY), start
    n = len(data) // INDEX_ENTRY.itemsize
    return np.frombuffer(data[: n * INDEX_ENTRY.itemsize], INDEX_ENTRY), start + n * INDEX_ENTRY.itemsize


def pack_records(directory: str | os.PathLike) -> Iterator[PackRecord]:
    """Every index entry of every pack under ``directory`` (a response cache folder), in write order
    within a pack, the packs in the order of their names (creation time first)."""
    for idx in sorted(Path(directory, PACKS).glob("*.idx")):
        entries, _ = read_index(idx)
        if not len(entries):
            continue
        with open(idx.with_suffix(".pack"), "rb") as f:
            for e in entries:
                f.seek(int(e["offset"]))
                data = f.read(int(e["length"]))
                yield PackRecord(bytes(e["key"]), idx.with_suffix(".pack"), int(e["offset"]), int(e["length"]), data)


def check_record(data: bytes, key: str) -> tuple[dict | None, str]:
    """The response a pack record holds for ``key``, or None and why it is not an answer: it does not
    parse, it was written under another key, or its request does not hash to the key."""
    try:
        rec = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, "does not parse (a record cut short or overwritten)"
    if not isinstance(rec, dict) or not isinstance(rec.get("response"), dict):
        return None, "holds no response"
    if rec.get("key") != key:
        return None, f"was written under another key ({str(rec.get('key'))[:12]}…)"
    request = rec.get("request")
    if request is not None and payload_key(request) != key:
        return None, f"answers a request whose key is {payload_key(request)[:12]}…"
    return rec["response"], ""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class ResponseCache:
    """The response cache of a run (module docstring).  ``directory`` None: no cache (every get
    misses, puts are dropped).  ``log`` receives the one line said when the first unusable entry is
    met; ``rejected`` counts them all."""

    def __init__(self, directory: str | os.PathLike | None, log: Callable[[str], None] = _stderr):
        self.dir = Path(directory) if directory else None
        self.log = log
        self.hits = 0
        self.misses = 0
        self.rejected = 0
        # the packs' index entries read so far, sorted by the first 8 bytes of the key (a SHA-256, so
        # uniform) and then by write order: a lookup is a binary search, the last match the newest
        # (a Python dict of 2 million entries would take seconds to build in every job)
        self._entries = np.empty(0, LOADED)
        self._pack_names: list[str] = []
        self._read_to: dict[str, int] = {}  # index file name -> bytes read
        self._own: dict[bytes, tuple[str, int, int]] = {}  # this process's puts: digest -> (pack, offset, length)
        self._refreshed = -float("inf")
        self._readers: OrderedDict[str, object] = OrderedDict()
        self._writer: tuple[int, int, int, str] | None = None  # (pid, pack fd, index fd, pack name)
        self._lock = threading.Lock()

    # -------------------------------------------------------------------------------------- reading

    def _legacy_path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def refresh(self) -> None:
        """Read the index entries written since the last look (this process's own are known already)."""
        packs = self.dir / PACKS
        names = sorted(p.name for p in packs.glob("*.idx")) if packs.is_dir() else []
        new = []
        for name in names:
            entries, end = read_index(packs / name, self._read_to.get(name, 0))
            self._read_to[name] = end
            if not len(entries):
                continue
            part = np.empty(len(entries), LOADED)
            part["h"] = _head(entries["key"])
            part["key"], part["offset"], part["length"] = entries["key"], entries["offset"], entries["length"]
            part["pack"] = len(self._pack_names)
            self._pack_names.append(name[: -len(".idx")] + ".pack")
            new.append(part)
        if new:
            both = np.concatenate([self._entries, *new])
            both["seq"] = np.arange(len(both))  # write order: packs by name (creation time), then position
            self._entries = both[np.argsort(both["h"], kind="stable")]
        self._refreshed = time.monotonic()

    def _lookup(self, digest: bytes) -> tuple[str, int, int] | None:
        if digest in self._own:
            return self._own[digest]
        h = self._entries["h"]
        x = np.uint64(int.from_bytes(digest[:8], "big"))
        lo, hi = np.searchsorted(h, x, "left"), np.searchsorted(h, x, "right")
        for i in range(hi - 1, lo - 1, -1):  # the newest first; two keys share 8 bytes once in 2^64
            e = self._entries[i]
            if bytes(e["key"]) == digest:
                return self._pack_names[int(e["pack"])], int(e["offset"]), int(e["length"])
        return None

    def _read(self, pack: str, offset: int, length: int) -> bytes:
        f = self._readers.get(pack)
        if f is None:
            f = open(self.dir / PACKS / pack, "rb")  # noqa: SIM115 - kept open for the next reads
            self._readers[pack] = f
            if len(self._readers) > OPEN_PACKS:
                self._readers.popitem(last=False)[1].close()
        else:
            self._readers.move_to_end(pack)
        f.seek(offset)
        return f.read(length)

    def _reject(self, key: str, where: str, why: str) -> None:
        self.rejected += 1
        if self.rejected == 1:
            self.log(
                f"ragmi: response cache {self.dir}: the entry for key {key[:12]}… in {where} {why}; "
                "taken for a miss (the request is sent again); further such entries are only counted"
            )

    def get(self, key: str) -> dict | None:
        if self.dir is None:
            self.misses += 1
            return None
        with self._lock:
            if time.monotonic() - self._refreshed > REFRESH_S:
                self.refresh()
            where = self._lookup(key_digest(key))
            if where is not None:
                try:
                    data = self._read(*where)
                except OSError as e:
                    data = f"unreadable: {e}".encode()
                value, why = check_record(data, key)
                if value is not None:
                    self.hits += 1
                    return value
                self._reject(key, f"{PACKS}/{where[0]} at byte {where[1]}", why)
        try:
            value = json.loads(self._legacy_path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            value = None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            self._reject(key, str(self._legacy_path(key).relative_to(self.dir)), "does not parse")
            value = None
        if not isinstance(value, dict):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def keys(self) -> set[str]:
        """The keys with an entry (not checked), packs and the earlier layout's files together."""
        if self.dir is None:
            return set()
        with self._lock:
            self.refresh()
            out = {bytes(d).hex() for d in self._entries["key"]} | {d.hex() for d in self._own}
        out.update(p.stem for p in self.dir.glob("*/*.json") if p.parent.name != PACKS)
        return out

    # -------------------------------------------------------------------------------------- writing

    def _open_writer(self) -> tuple[int, int, int, str]:
        """This process's own pack and index, created new (``O_EXCL``: a name no other process has)."""
        packs = self.dir / PACKS
        packs.mkdir(parents=True, exist_ok=True)
        host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:40]
        name = f"{time.time_ns():020d}-{host}-{os.getpid()}-{secrets.token_hex(4)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        pack_fd = os.open(packs / f"{name}.pack", flags, plain_mode())
        idx_fd = os.open(packs / f"{name}.idx", flags, plain_mode())
        return os.getpid(), pack_fd, idx_fd, f"{name}.pack"

    @staticmethod
    def _write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    def put(self, key: str, value: dict, request: dict | None = None) -> None:
        """Append ``value`` under ``key`` to this process's pack; ``request``: the payload ``key`` is
        the SHA-256 of (:func:`request_payload`), kept with it so that a reader can check the pair.
        The record is written before its index entry: an entry never points past what was written
        by a process that was killed between the two."""
        if self.dir is None:
            return
        record = {"key": key, "request": request, "response": value}
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._writer is None or self._writer[0] != os.getpid():  # none yet, or a forked child
                try:
                    self._writer = self._open_writer()
                except OSError as e:
                    if is_disk_full(e):
                        raise disk_full_error(e, self.dir / PACKS) from None
                    raise
            _, pack_fd, idx_fd, pack = self._writer
            try:
                offset = os.lseek(pack_fd, 0, os.SEEK_END)
                self._write_all(pack_fd, data)
                entry = np.array([(key_digest(key), offset, len(data))], INDEX_ENTRY).tobytes()
                self._write_all(idx_fd, entry)
            except BaseException as e:
                # a write cut short (a full disk) may leave part of an index entry: this pack takes
                # no more, so that every later entry of its index stays whole; the next put opens a new one
                os.close(pack_fd)
                os.close(idx_fd)
                self._writer = None
                if is_disk_full(e):  # one sentence naming the pack, the file system and the space left
                    raise disk_full_error(e, self.dir / PACKS / pack) from None
                raise
            self._own[key_digest(key)] = (pack, offset, len(data))

    def close(self) -> None:
        with self._lock:
            if self._writer is not None and self._writer[0] == os.getpid():
                os.close(self._writer[1])
                os.close(self._writer[2])
            self._writer = None
            for f in self._readers.values():
                f.close()
            self._readers.clear()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


CLAIMS = "claims"  # the claims' folder under the cache folder
CLAIM_STALE_S = 180.0  # a claim not renewed for this long counts as abandoned (its holder renews every CLAIM_RENEW_S)
CLAIM_RENEW_S = 30.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class Claims:
    """Which job answers a request that several jobs sharing one cache need at the same time (two runs
    of one configuration started together, say): before it sends a request, a job claims its key, a
    symbolic link ``<cache dir>/claims/<key>`` whose target names its machine, process and start
    (creating it is atomic and exclusive, so exactly one job gets it, on one machine or on a shared
    file system); it removes the
    file once the answer is in the cache or when it stops.  A job that finds a key claimed waits for
    the answer in the cache instead of sending the request again: each request is answered once, and
    every job that needs it reads the same answer (vLLM's answers differ in the last digits with the
    batch they are computed in, so two jobs answering one request could disagree).  Its holder renews
    its claims every :data:`CLAIM_RENEW_S` (a thread); a claim is abandoned, and taken over, when its
    process is gone (same machine) or it has not been renewed for :data:`CLAIM_STALE_S` (a job killed
    on another node of a cluster).  Only requests in flight have a claim."""

    def __init__(self, directory: str | os.PathLike, stale_s: float | None = None):
        self.dir = Path(directory) / CLAIMS
        self.stale_s = CLAIM_STALE_S if stale_s is None else float(stale_s)
        self.host = socket.gethostname()
        self.held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _renew(self) -> None:
        while not self._stop.wait(CLAIM_RENEW_S):
            with self._lock:
                held = list(self.held)
            for key in held:
                with contextlib.suppress(OSError):
                    os.utime(self._path(key), follow_symlinks=False)

    def _path(self, key: str) -> Path:
        return self.dir / key

    def abandoned(self, key: str) -> bool:
        """The claim on ``key`` is gone, or its holder is (module docstring)."""
        path = self._path(key)
        try:
            text = os.readlink(path)
            age = time.time() - path.lstat().st_mtime
        except FileNotFoundError:
            return True
        except OSError:
            return False
        host, _, pid = text.partition(" ")
        pid = pid.split(" ", 1)[0]
        if host == self.host and pid.isdigit() and not _alive(int(pid)):
            return True
        return age > self.stale_s

    def take(self, keys: list[str]) -> set[str]:
        """Claim ``keys``; the ones this process now holds (the others another job holds; an abandoned
        claim is taken over)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        mine: set[str] = set()
        stamp = f"{self.host} {os.getpid()} {time.time():.0f}"
        for key in keys:
            for attempt in (0, 1):
                try:
                    # a symbolic link whose target is the holder: created atomically and exclusively
                    # (local and network file systems alike), and its few bytes need no data block
                    os.symlink(stamp, self._path(key))
                except FileExistsError:
                    if attempt == 0 and self.abandoned(key):
                        with contextlib.suppress(FileNotFoundError):
                            self._path(key).unlink()
                        continue
                    break
                except OSError as e:
                    if is_disk_full(e):
                        raise disk_full_error(e, self._path(key)) from None
                    raise
                with self._lock:
                    self.held.add(key)
                mine.add(key)
                break
        if mine and self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, name="ragmi-claims", daemon=True)
            self._renewer.start()
        return mine

    def release(self, keys) -> None:
        for key in list(keys):
            with self._lock:
                if key not in self.held:
                    continue
                self.held.discard(key)
            with contextlib.suppress(FileNotFoundError):
                self._path(key).unlink()

    def release_all(self) -> None:
        """Release every claim held, and stop renewing."""
        self._stop.set()
        with self._lock:
            held = list(self.held)
        self.release(held)


class EmbeddingCache:
    """Query embeddings of one embedder setting (``setting``: the embedder name, its maximum sequence
    length and whether vectors are normalised), stored as raw little-endian float32."""

    def __init__(self, directory: str | os.PathLike, setting: dict):
        self.dir = Path(directory)
        self.setting = json.dumps(setting, sort_keys=True)
        self.hits = 0
        self.misses = 0

    def _path(self, text: str) -> Path:
        key = hashlib.sha256(f"{self.setting}\n{text}".encode()).hexdigest()
        return self.dir / key[:2] / f"{key}.f32"

    def get(self, text: str) -> np.ndarray | None:
        try:
            vec = np.frombuffer(self._path(text).read_bytes(), dtype="<f4")
        except FileNotFoundError:
            self.misses += 1
            return None
        self.hits += 1
        return vec

    def put(self, text: str, vec: np.ndarray) -> None:
        atomic_write_bytes(np.asarray(vec, dtype="<f4").tobytes(), self._path(text))
