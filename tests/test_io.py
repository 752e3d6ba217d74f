"""Atomic writers: complete files only, and nothing left behind when a write fails."""

import errno
import json
import os
import stat
import subprocess
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragmi import io
from ragmi.errors import DiskFullError


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


# --- a full disk ---------------------------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path):
    """A 64 KiB tmpfs (a real ENOSPC), unmounted after the test; skipped where mounting is not permitted
    (CI without root): the tests below with an injected ``OSError(ENOSPC)`` cover the same code there."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): the injected-ENOSPC tests stand in")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)]).returncode != 0:  # a file still open there: detach it
            subprocess.run(["umount", "--lazy", str(mnt)], check=True)


def _fill(d, leave=0):
    """Fill the file system of folder ``d`` up to ``leave`` bytes (a ballast file)."""
    st = os.statvfs(d)
    (d / "ballast").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - leave))


def _enospc_after_partial_write(monkeypatch, errno_=errno.ENOSPC):
    """Every write of a ``.tmp`` file writes half its bytes and then fails as a full disk does."""
    real = Path.write_bytes

    def write_bytes(self, data):
        if self.name.endswith(".tmp"):
            with open(self, "wb") as f:
                f.write(data[: len(data) // 2])
            raise OSError(errno_, os.strerror(errno_))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_human_bytes():
    assert [io.human_bytes(n) for n in (0, 1023, 1024, 1536, 64 * 1024, 3 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "64.0 KiB",
        "3.0 GiB",
    ]


@pytest.mark.parametrize(
    "write",
    [
        lambda p: io.atomic_write_text("x" * 200_000, p),
        lambda p: io.write_json({"x": "y" * 200_000}, p),
        lambda p: io.atomic_write_parquet(pd.DataFrame({"a": np.random.default_rng(0).random(40_000)}), p),
    ],
    ids=["text", "json", "parquet"],
)
def test_a_real_full_disk_names_the_file_and_the_space_left(small_fs, write):
    out = small_fs / "sub" / "out"
    out.parent.mkdir()
    out.write_text("old")
    with pytest.raises(DiskFullError) as ei:
        write(out)
    msg = str(ei.value)
    free = os.statvfs(small_fs).f_bavail * 4096
    assert msg.startswith(f"no space left on tmpfs mounted at {small_fs} writing {out}: ")
    assert f": {io.human_bytes(free)} free of 64.0 KiB; free space and rerun the same command" in msg
    assert free > 0  # the half-written temp was removed before the space was read
    assert ei.value.path == str(out) and ei.value.total == 64 * 1024
    assert _listing(out.parent) == ["out"] and out.read_text() == "old"  # nothing truncated, no temp


def test_a_real_full_disk_in_a_new_cache_entry_leaves_nothing(small_fs):
    from ragmi.cache import ResponseCache, pack_records

    cache = ResponseCache(small_fs / "cache")
    cache.put("ab" + "0" * 62, {"text": "fits"})
    _fill(small_fs, leave=4096)
    with pytest.raises(
        DiskFullError, match=r"writing .*/cache/packs/[^ ]+\.pack: \d+(\.\d)? (B|KiB) free of 64\.0 KiB"
    ):
        cache.put("cd" + "0" * 62, {"text": "z" * 10_000})
    # the pack's index holds the whole first entry only: the record cut short is never read
    records = list(pack_records(small_fs / "cache"))
    assert [r.digest.hex() for r in records] == ["ab" + "0" * 62] and len(records[0].data) == records[0].length
    fresh = ResponseCache(small_fs / "cache")
    assert fresh.get("ab" + "0" * 62) == {"text": "fits"} and fresh.get("cd" + "0" * 62) is None


@pytest.mark.parametrize(
    "errno_, start",
    [(errno.ENOSPC, "no space left on "), (errno.EDQUOT, "disk quota exceeded on ")],
    ids=["ENOSPC", "EDQUOT"],
)
def test_an_injected_full_disk_leaves_no_temp_and_names_the_space(tmp_path, monkeypatch, errno_, start):
    # where no tmpfs can be mounted (CI): the write fails half-way, as on a full disk
    _enospc_after_partial_write(monkeypatch, errno_)
    out = tmp_path / "out.json"
    out.write_text("{}")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DiskFullError) as ei:
        io.write_json({"a": 1}, "out.json")  # a relative path: the message gives it whole
    mount, _ = io.mount_of(tmp_path)
    st = os.statvfs(mount)
    msg = str(ei.value)
    assert msg.startswith(start) and f" writing {out}: " in msg
    assert f" free of {io.human_bytes(st.f_blocks * st.f_frsize)}; " in msg
    assert msg.endswith("and rerun the same command: finished steps and cached answers are kept")
    assert _listing(tmp_path) == ["out.json"] and out.read_text() == "{}"


def test_a_full_disk_while_creating_the_temp_or_its_folder(tmp_path, monkeypatch):
    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.tempfile, "mkstemp", no_space)
    with pytest.raises(DiskFullError, match=" writing .*/a.txt: "):
        io.atomic_write_text("x", tmp_path / "a.txt")
    monkeypatch.setattr(io.tempfile, "mkdtemp", no_space)
    with pytest.raises(DiskFullError, match=" writing .*/idx: "):
        with io.atomic_dir(tmp_path / "idx"):
            pass
    assert _listing(tmp_path) == []


def test_a_full_disk_in_atomic_dir_removes_the_temp_folder(small_fs):
    out = small_fs / "idx"
    with pytest.raises(DiskFullError, match=f"writing {out}: "):
        with io.atomic_dir(out) as tmp:
            (tmp / "part").write_bytes(b"\1" * 100_000)
    assert _listing(small_fs) == []


def test_other_os_errors_pass_unchanged(tmp_path, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(io.os, "replace", denied)
    with pytest.raises(PermissionError):
        io.atomic_write_text("x", tmp_path / "a.txt")
    assert _listing(tmp_path) == []


def test_mount_of_finds_the_tmpfs(small_fs):
    assert io.mount_of(small_fs / "not" / "yet" / "there.json") == (str(small_fs), "tmpfs")


def _smk(tmp_path, log, outputs):
    return types.SimpleNamespace(log=[str(log)] if log else [], output=[str(p) for p in outputs], threads=None)


def test_run_step_prints_one_line_for_a_full_disk(tmp_path, monkeypatch, capsys):
    from ragmi.workflow import run_step

    _enospc_after_partial_write(monkeypatch)
    out = tmp_path / "out.parquet"
    out.write_text("a stale output")

    def job(smk, log):
        log("working")
        io.atomic_write_text("x", tmp_path / "cache" / "k.json")

    with pytest.raises(SystemExit) as ei:
        run_step(_smk(tmp_path, tmp_path / "job.log", [out]), job)
    assert ei.value.code == 1
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("ragmi: ")]
    assert len(lines) == 1 and lines[0].startswith("ragmi: no space left on ")
    assert f"writing {tmp_path}/cache/k.json: " in lines[0] and " free of " in lines[0]
    assert "Traceback" not in err
    assert not out.exists()  # its outputs removed, as for any failed job
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []  # no temp


def test_run_step_turns_a_librarys_own_enospc_into_the_message(tmp_path, capsys):
    from ragmi.workflow import run_step

    def job(smk, log):  # e.g. faiss.write_index or np.save writing a file directly
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "index.faiss"))

    with pytest.raises(SystemExit):
        run_step(_smk(tmp_path, None, [tmp_path / "index.faiss"]), job)
    err = capsys.readouterr().err
    assert "ragmi: no space left on " in err and f"writing {tmp_path}/index.faiss: " in err
    assert "Traceback" not in err


def test_a_full_log_disk_stops_the_job_even_where_the_error_was_swallowed(small_fs, capsys):
    from ragmi.workflow import run_step

    logfile = small_fs / "job.log"
    _fill(small_fs)

    def job(smk, log):
        try:
            log("a heartbeat whose exception a task swallows " + "x" * 5000)
        except DiskFullError:
            pass
        log("the job goes on")  # to stderr only now

    with pytest.raises(SystemExit) as ei:
        run_step(_smk(small_fs, logfile, []), job)
    assert ei.value.code == 1
    err = capsys.readouterr().err
    assert f"ragmi: no space left on tmpfs mounted at {small_fs} writing {logfile}: " in err
    assert "the job goes on" in err and "Traceback" not in err
