"""Glue for the small entry points in ``workflow_scripts/`` (called by Snakemake's ``script:``).

:func:`run_step` sends log lines to the rule's ``log:`` file and to stderr, turns a
:class:`~ragmi.errors.RagmiError` into one clear message (no traceback), removes any partial output
and exits non-zero.  :func:`atomic_write_parquet` / :func:`atomic_write_text` write through a temp
file so an interrupted job never leaves a truncated artifact behind.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pandas as pd

from .errors import RagmiError


class StepLog:
    def __init__(self, path: str | None):
        self.path = path
        self.fh = open(path, "a", encoding="utf-8") if path else None
        self.t0 = time.time()

    def __call__(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')} +{time.time() - self.t0:6.1f}s] {msg}"
        print(line, file=sys.stderr, flush=True)
        if self.fh:
            self.fh.write(line + "\n")
            self.fh.flush()


def _remove(paths):
    for p in paths:
        p = Path(p)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


def run_step(smk, fn) -> None:
    """Run ``fn(smk, log)``; on failure remove ``smk.output`` and exit 1 with one message."""
    log = StepLog(smk.log[0] if len(smk.log) else None)
    threads = getattr(smk, "threads", None)
    if threads:
        # Bound the math libraries to the job's threads without importing torch in light jobs.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(int(threads))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
    try:
        fn(smk, log)
    except RagmiError as e:
        _remove(smk.output)
        log(f"ERROR: {e}")
        print(f"\nragmi: {e}\n", file=sys.stderr, flush=True)
        sys.exit(1)
    except BaseException:
        _remove(smk.output)
        log("unexpected failure:\n" + traceback.format_exc())
        raise


def atomic_write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(text: str, path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(obj, path) -> None:
    atomic_write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)
