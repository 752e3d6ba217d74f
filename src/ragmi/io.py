"""Atomic writers: every artifact is written to a hidden temp file (or folder) beside its destination
and moved into place with ``os.replace``.  A failed write removes the temp and leaves the destination
as it was, so an interrupted job never leaves a truncated artifact or a stray temp file behind.
What is moved into place has the mode a plain ``open(path, "w")`` (``os.mkdir`` for a folder) would
give it under the process's umask, 0644 (0755) under umask 022, not the 0600 (0700) that ``tempfile``
creates its temp files (folders) with: the results are readable by whoever could read a file the user
wrote by hand.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc/self/status``,
    kernel 4.7+); elsewhere set and restored at once, under a lock (``os.umask`` is the only way)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def plain_mode(folder: bool = False) -> int:
    """The mode ``open(path, "w")`` (``folder``: ``os.mkdir``) gives a new file under the current umask."""
    return (0o777 if folder else 0o666) & ~current_umask()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp file path beside ``path``; on success it replaces ``path``, on failure it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, plain_mode())  # mkstemp's 0600 otherwise
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside ``out``; on success it replaces ``out`` (and whatever was there)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, plain_mode(folder=True))  # mkdtemp's 0700 otherwise
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_bytes(data: bytes, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` as UTF-8, line endings unchanged."""
    atomic_write_bytes(text.encode("utf-8"), path)


def atomic_write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def read_project_yaml(path: str | os.PathLike):
    """A YAML file that ships with ragmi (schema, published numbers), parsed with libyaml when PyYAML
    has it: 0.013 s instead of 0.092 s for config/schema.yaml here, paid by every job that validates
    a plug-in; the same mapping (tests/test_config.py).  Users' config files keep ``yaml.safe_load``,
    whose syntax errors ragmi reports with their line."""
    import yaml

    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def write_json(obj, path: str | os.PathLike) -> None:
    """Indented, key-sorted JSON with a final newline (values JSON cannot hold are written as ``str``)."""
    atomic_write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)
