"""The request budget of a run (``remote.max_requests``): how many HTTP requests the jobs of one run
may send to one remote target."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ...errors import EndpointError


class RequestBudget:
    """At most ``limit`` HTTP requests per run to one target (retries count; cache hits do not).

    With ``ledger`` (a file shared by the run's jobs, named by ``RAGMI_RUN_ID``) the count is kept
    there under an exclusive lock, so concurrent jobs share one budget; without it, in memory."""

    def __init__(self, limit: int | None, ledger: str | os.PathLike | None, where: str):
        self.limit = limit
        self.ledger = Path(ledger) if ledger else None
        self.where = where
        self.used = 0  # by this process
        self._count = 0
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, limit: int | None, cache_dir: str | None, target: str, where: str) -> RequestBudget:
        run = os.environ.get("RAGMI_RUN_ID")
        ledger = None
        if limit is not None and run and cache_dir:
            ledger = Path(cache_dir).parent / "remote_requests" / f"{target}.{run}.count"
        return cls(limit, ledger, where)

    def take(self) -> None:
        with self._lock:
            if self.limit is None:
                self.used += 1
                return
            if self.ledger is None:
                n = self._count
            else:
                import fcntl

                self.ledger.parent.mkdir(parents=True, exist_ok=True)
                with open(self.ledger, "a+", encoding="utf-8") as fh:
                    fcntl.flock(fh, fcntl.LOCK_EX)
                    fh.seek(0)
                    text = fh.read().strip()
                    n = int(text) if text else 0
                    if n < self.limit:
                        fh.seek(0)
                        fh.truncate()
                        fh.write(str(n + 1))
                        fh.flush()
            if n >= self.limit:
                raise EndpointError(
                    f"the request budget of this run is spent: {self.limit} requests ({self.where}.max_requests); "
                    "the answers obtained are in the response cache, a rerun resumes from them with a fresh budget"
                )
            self._count = n + 1
            self.used += 1
