"""Atomic writers: every artifact is written to a hidden temp file (or folder) beside its destination
and moved into place with ``os.replace``.  A failed write removes the temp and leaves the destination
as it was, so an interrupted job never leaves a truncated artifact or a stray temp file behind.
What is moved into place has the mode a plain ``open(path, "w")`` (``os.mkdir`` for a folder) would
give it under the process's umask, 0644 (0755) under umask 022, not the 0600 (0700) that ``tempfile``
creates its temp files (folders) with: the results are readable by whoever could read a file the user
wrote by hand.

A full disk (``ENOSPC``) or a spent quota (``EDQUOT``) met by any of these writers becomes a
:class:`~ragmi.errors.DiskFullError` whose one sentence names the file system, the file being written and
the space left (:func:`disk_full_error`); the temp is removed first, so the space it took is free again
and nothing truncated is left.  :func:`ragmi.workflow.run_step` prints that sentence and exits non-zero.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DiskFullError

if TYPE_CHECKING:
    import pandas as pd

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no space (``ENOSPC``) or a spent quota (``EDQUOT``); pyarrow's
    errors carry the errno too."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def human_bytes(n: int) -> str:
    """``n`` bytes in binary units with one decimal: ``512 B``, ``8.0 KiB``, ``1.5 GiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def mount_of(path: str | os.PathLike) -> tuple[str, str]:
    """(mount point, device) of the file system that holds ``path`` (or its nearest existing parent);
    the device from ``/proc/self/mounts`` where Linux has it, else ``""``."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    p = Path(os.path.realpath(p))
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    device = ""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                # spaces in a mount point are written as \040
                if len(fields) >= 2 and fields[1].replace("\\040", " ") == str(p):
                    device = fields[0]  # the last entry for a mount point is the one on top
    except OSError:
        pass
    return str(p), device


def disk_full_error(exc: OSError, path: str | os.PathLike) -> DiskFullError:
    """The :class:`~ragmi.errors.DiskFullError` of ``exc`` (a disk-full ``OSError``) met writing ``path``:
    one sentence naming the file system, the file, the space left and what to do."""
    mount, device = mount_of(path)
    where = f"{device} mounted at {mount}" if device and device != mount else mount
    free = total = None
    try:
        st = os.statvfs(mount)
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        space = f"{human_bytes(free)} free of {human_bytes(total)}"
    except OSError:
        space = "free space unknown"
    what = "disk quota exceeded" if exc.errno == errno.EDQUOT else "no space left"
    then = "raise the quota or free space" if exc.errno == errno.EDQUOT else "free space"
    msg = (
        f"{what} on {where} writing {os.path.abspath(path)}: {space}; {then} and rerun the same command: "
        "finished steps and cached answers are kept"
    )
    return DiskFullError(msg, path=str(path), free=free, total=total)


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
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        yield tmp
        os.chmod(tmp, plain_mode())  # mkstemp's 0600 otherwise
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        if is_disk_full(e):  # the temp's space is free again when the message reads the free space
            raise disk_full_error(e, path) from e
        raise


@contextlib.contextmanager
def atomic_dir(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp folder beside ``out``; on success it replaces ``out`` (and whatever was there)."""
    out = Path(out)
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        yield tmp
        os.chmod(tmp, plain_mode(folder=True))  # mkdtemp's 0700 otherwise
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.exists() or out.is_symlink():
            out.unlink()
        os.replace(tmp, out)
    except BaseException as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(e):
            raise disk_full_error(e, out) from e
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
