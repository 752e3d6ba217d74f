"""Atomic writers: complete files only, and nothing left behind when a write fails."""

import json
import os
import stat

import pandas as pd
import pytest

from ragmi import io


def _listing(d):
    return sorted(p.name for p in d.iterdir())


def test_writers_write_exact_bytes(tmp_path):
    io.atomic_write_text("a\r\nb é\n", tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_bytes() == "a\r\nb é\n".encode()  # line endings kept
    io.atomic_write_bytes(b"\x00\x01", tmp_path / "sub" / "b.bin")  # parent folders are created
    assert (tmp_path / "sub" / "b.bin").read_bytes() == b"\x00\x01"
    io.write_json({"b": 1, "a": [1, 2], "p": tmp_path}, tmp_path / "j.json")
    text = (tmp_path / "j.json").read_text()
    assert text.endswith("}\n") and text.index('"a"') < text.index('"b"')
    assert json.loads(text) == {"a": [1, 2], "b": 1, "p": str(tmp_path)}
    df = pd.DataFrame({"doc_id": ["x", "y"], "n": [1, 2]})
    io.atomic_write_parquet(df, tmp_path / "f.parquet")
    df.to_parquet(tmp_path / "direct.parquet", index=False)
    assert (tmp_path / "f.parquet").read_bytes() == (tmp_path / "direct.parquet").read_bytes()
    assert _listing(tmp_path) == ["direct.parquet", "f.parquet", "j.json", "sub", "t.txt"]


@pytest.mark.parametrize(
    "write",
    [
        lambda p: io.atomic_write_text("new", p),
        lambda p: io.atomic_write_bytes(b"new", p),
        lambda p: io.write_json({"new": 1}, p),
        lambda p: io.atomic_write_parquet(pd.DataFrame({"a": [1]}), p),
    ],
)
def test_failed_replace_leaves_old_file_and_no_temp(tmp_path, monkeypatch, write):
    out = tmp_path / "out"
    out.write_text("old")

    def fail(*a):
        raise OSError("disk full")

    monkeypatch.setattr(io.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write(out)
    assert _listing(tmp_path) == ["out"] and out.read_text() == "old"


def test_failed_serialisation_leaves_no_file(tmp_path):
    with pytest.raises(ValueError):  # pyarrow's ArrowInvalid
        io.atomic_write_parquet(pd.DataFrame({"a": [1, "mixed"]}), tmp_path / "f.parquet")
    with pytest.raises(TypeError):
        io.atomic_write_bytes("not bytes", tmp_path / "b.bin")
    assert _listing(tmp_path) == []


def test_atomic_dir_replaces_whole_folder(tmp_path):
    out = tmp_path / "idx"
    out.mkdir()
    (out / "stale").write_text("x")
    with io.atomic_dir(out) as tmp:
        assert tmp.parent == tmp_path and tmp != out
        (tmp / "fresh").write_text("y")
        assert (out / "stale").exists()  # the old folder stays until the new one is complete
    assert _listing(out) == ["fresh"] and _listing(tmp_path) == ["idx"]


def test_atomic_dir_failure_keeps_old_folder_and_no_temp(tmp_path):
    out = tmp_path / "idx"
    out.mkdir()
    (out / "old").write_text("x")
    with pytest.raises(RuntimeError):
        with io.atomic_dir(out) as tmp:
            (tmp / "half").write_text("y")
            raise RuntimeError("crash while building")
    assert _listing(tmp_path) == ["idx"] and _listing(out) == ["old"]
    with pytest.raises(RuntimeError):
        with io.atomic_dir(tmp_path / "new") as tmp:
            raise RuntimeError("crash")
    assert _listing(tmp_path) == ["idx"]


def test_the_io_writers_are_imported_from_ragmi_io_only():
    from ragmi import workflow

    for name in ("atomic_write_parquet", "atomic_write_text", "write_json"):
        assert not hasattr(workflow, name) and name not in workflow.__all__


WRITERS = {
    "text": lambda p: io.atomic_write_text("x", p),
    "bytes": lambda p: io.atomic_write_bytes(b"x", p),
    "json": lambda p: io.write_json({"x": 1}, p),
    "parquet": lambda p: io.atomic_write_parquet(pd.DataFrame({"a": [1]}), p),
    "atomic_path": lambda p: _through_atomic_path(p),  # the figures' writer (report/plots.py)
}


def _through_atomic_path(p):
    with io.atomic_path(p) as tmp:
        tmp.write_bytes(b"png")


@pytest.fixture
def umask():
    """Set the process's umask for the test, restored after it."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize(
    "mask, mode, folder_mode",
    [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750), (0o077, 0o600, 0o700)],
    ids=["umask022", "umask027", "umask077"],
)
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_written_files_have_the_mode_of_a_plain_open(tmp_path, umask, mask, mode, folder_mode, writer):
    # mkstemp creates 0600: 129 result files of a user's first run were readable by their owner only
    umask(mask)
    assert io.current_umask() == mask
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert stat.S_IMODE(plain.stat().st_mode) == mode  # what open(..., "w") gives
    out = tmp_path / "sub" / "out"
    WRITERS[writer](out)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "sub").stat().st_mode) == folder_mode  # a parent it created
    out.chmod(0o600)  # a file an earlier ragmi wrote 0600 gets the plain mode when rewritten
    WRITERS[writer](out)
    assert stat.S_IMODE(out.stat().st_mode) == mode


@pytest.mark.parametrize("mask, folder_mode", [(0o022, 0o755), (0o027, 0o750)], ids=["umask022", "umask027"])
def test_atomic_dir_has_the_mode_of_a_plain_mkdir(tmp_path, umask, mask, folder_mode):
    umask(mask)
    with io.atomic_dir(tmp_path / "idx") as tmp:
        (tmp / "f").write_text("x")
    assert stat.S_IMODE((tmp_path / "idx").stat().st_mode) == folder_mode


def test_umask_without_proc(monkeypatch, umask):
    # where /proc/self/status is not there (macOS), the umask is read by setting and restoring it
    umask(0o027)
    real_open = open

    def no_proc(path, *a, **k):
        if str(path) == "/proc/self/status":
            raise FileNotFoundError(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_proc)
    assert io.current_umask() == 0o027
    assert io.current_umask() == 0o027  # and it is left as it was
