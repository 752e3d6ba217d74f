"""The request ledger of a run (:class:`RequestBudget`): what the jobs of one run sent to one remote
target and what came back, and the run's request budget (``remote.max_requests``) read from it."""

from __future__ import annotations

import copy
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ...errors import EndpointError

#: the ledger's counts, in the order of its file (docs/remote-targets.md, "The request ledger")
LEDGER_FIELDS = ("sent", "answered", "retries", "timeouts", "http_errors", "network_errors", "session_opens")

_JOBS = itertools.count(1)  # the jobs of this process without a run id: a ledger each


def empty_counts() -> dict:
    """Counts of nothing sent: every field 0, ``http_errors`` (status -> n) empty."""
    return {k: {} if k == "http_errors" else 0 for k in LEDGER_FIELDS}


def add_counts(counts: dict, delta: Mapping) -> None:
    """Add ``delta`` (field -> n; ``http_errors``: status -> n) to ``counts`` in place."""
    for key, value in delta.items():
        if key == "http_errors":
            errors = counts.setdefault("http_errors", {})
            for status, n in value.items():
                errors[str(status)] = errors.get(str(status), 0) + int(n)
        else:
            counts[key] = counts.get(key, 0) + int(value)


class RequestBudget:
    """The request ledger of one run and one remote target, and the run's budget of ``limit`` HTTP
    requests (retries and session opens count; cache hits do not).

    ``ledger`` is a small JSON file shared by the run's jobs (:meth:`for_run`: named by the target and
    ``RAGMI_RUN_ID``); every change is a read-modify-write under an exclusive ``fcntl.flock``, so
    concurrent jobs (and concurrent threads of one job) count exactly.  It holds the counts of
    :data:`LEDGER_FIELDS`: HTTP requests ``sent``, ``answered`` (HTTP 200), ``retries``,
    ``timeouts`` (no answer within ``timeout_s``), ``http_errors`` (by status: 429, 504, …),
    ``network_errors`` (refused, reset, cut off) and ``session_opens``.  The budget reads ``sent``:
    a request is sent only while ``sent < limit``.  Without a ledger file the counts are kept in
    memory.  ``job`` holds this object's own counts (one job's), for its log line."""

    def __init__(self, limit: int | None, ledger: str | os.PathLike | None, where: str):
        self.limit = limit
        self.ledger = Path(ledger) if ledger else None
        self.where = where
        self.job = empty_counts()
        self._run = empty_counts()  # the run's counts when there is no ledger file
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, limit: int | None, cache_dir: str | None, target: str, where: str) -> RequestBudget:
        """The ledger ``<cache_dir parent>/remote_requests/<target>.<RAGMI_RUN_ID>.count``; without
        ``RAGMI_RUN_ID`` one of this job's own (``<target>.job-<unix time>-<pid>-<n>.count``, n
        counting the jobs of this process); in memory without ``cache_dir``."""
        ledger = None
        if cache_dir:
            run = os.environ.get("RAGMI_RUN_ID") or f"job-{int(time.time())}-{os.getpid()}-{next(_JOBS)}"
            ledger = Path(cache_dir).parent / "remote_requests" / f"{target}.{run}.count"
        return cls(limit, ledger, where)

    # ------------------------------------------------------------------ the file

    def _parse(self, text: str) -> dict:
        counts = empty_counts()
        text = text.strip()
        if not text:
            return counts
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise EndpointError(
                f"the request ledger {self.ledger} is not JSON ({e}); it counts this run's requests to "
                f"the remote target ({self.where}.max_requests): remove it to start the count again"
            ) from None
        if isinstance(doc, int):  # a ledger written before the counts: the requests sent
            counts["sent"] = doc
        elif isinstance(doc, dict):
            for key, value in doc.items():
                counts[key] = dict(value) if key == "http_errors" else value
        return counts

    def _update(self, change: Callable[[dict], bool]) -> bool:
        """Apply ``change`` to the run's counts (under the lock; written back when it returns True)
        and return what it returned."""
        with self._lock:
            if self.ledger is None:
                return change(self._run)
            import fcntl

            self.ledger.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.ledger, os.O_RDWR | os.O_CREAT, 0o644)
            with os.fdopen(fd, "r+", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                counts = self._parse(fh.read())
                changed = change(counts)
                if changed:
                    # written over the old text, then cut: the counts only grow, so a crash between
                    # the two leaves no stale tail
                    fh.seek(0)
                    fh.write(json.dumps(counts) + "\n")
                    fh.truncate()
                    fh.flush()
                return changed

    def read(self) -> dict:
        """The run's counts so far (of every job that shares the ledger)."""
        out: dict = {}

        def snapshot(counts: dict) -> bool:
            out.update(copy.deepcopy(counts))
            return False

        self._update(snapshot)
        return out

    # ------------------------------------------------------------------ counting

    def take(self, session_open: bool = False) -> None:
        """Count one HTTP request about to be sent (a session open with ``session_open``); raise
        EndpointError, sending nothing, when the run's budget is spent."""

        def change(counts: dict) -> bool:
            if self.limit is not None and counts["sent"] >= self.limit:
                return False
            add_counts(counts, {"sent": 1, "session_opens": int(session_open)})
            add_counts(self.job, {"sent": 1, "session_opens": int(session_open)})
            return True

        if not self._update(change):
            raise EndpointError(
                f"the request budget of this run is spent: {self.limit} requests ({self.where}.max_requests); "
                "the answers obtained are in the response cache, a rerun resumes from them with a fresh budget"
            )

    def add(self, **delta) -> None:
        """Count what came of a request: ``answered=1``, ``timeouts=1``, ``network_errors=1``,
        ``http_errors={status: 1}``, ``retries=1``."""

        def change(counts: dict) -> bool:
            add_counts(counts, delta)
            add_counts(self.job, delta)
            return True

        self._update(change)

    @property
    def used(self) -> int:
        """HTTP requests this job sent."""
        return self.job["sent"]
