"""Clear a stale Snakemake lock before `make run` (called by the Makefile's run target).

A Snakemake run that is killed hard (kill -9, out of memory, a pre-empted cluster job, a closed
terminal) leaves its lock files in ``<workdir>/.snakemake/locks/``, and the next run stops with
"Directory cannot be locked" until ``snakemake --unlock`` is run.  This script looks for a live
Snakemake process working on the same directory (on this machine); when there is none, the lock is
stale: it removes the lock files and says so.  When one is running, it leaves the lock alone.

    python tools/clear_stale_lock.py [snakemake arguments...]   # reads --directory/-d, else the cwd

Only this machine's processes are visible: do not use it on a directory that a Snakemake process on
another machine (e.g. a second login node) is using.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def directory_arg(args: list[str]) -> str | None:
    """The value of ``--directory``/``-d`` in a Snakemake command line, or None."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--directory", "-d")
    known, _ = parser.parse_known_args(args)
    return known.directory


def workdir_of(args: list[str], cwd: str) -> Path:
    """The working directory a Snakemake command line uses: ``--directory``/``-d``, else ``cwd``."""
    return (Path(cwd) / (directory_arg(args) or ".")).resolve()


def snakemake_args(cmdline: list[str]) -> list[str] | None:
    """The arguments after ``snakemake`` if ``cmdline`` runs Snakemake (its entry point, or
    ``python -m snakemake``), else None."""
    for i, arg in enumerate(cmdline):
        if os.path.basename(arg) == "snakemake":
            return cmdline[i + 1 :]
        if arg == "-m" and i + 1 < len(cmdline) and cmdline[i + 1] == "snakemake":
            return cmdline[i + 2 :]
    return None


def live_snakemake_pids(workdir: Path) -> list[int]:
    """Pids of the Snakemake processes of this machine whose working directory is ``workdir``."""
    import psutil

    me = os.getpid()
    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid == me or not proc.info["cmdline"]:
                continue
            args = snakemake_args(proc.info["cmdline"])
            if args is None:
                continue
            try:
                cwd = proc.cwd()
            except psutil.AccessDenied:  # another user's process: only its command line can tell
                cwd = None
            if cwd is not None:
                # Snakemake moves into --directory when it starts; before that its cwd is where it began.
                dirs = {Path(cwd).resolve(), workdir_of(args, cwd)}
            else:
                d = directory_arg(args)
                dirs = {Path(d).resolve()} if d and Path(d).is_absolute() else set()
            if workdir in dirs:
                pids.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return pids


def main(argv: list[str]) -> int:
    workdir = workdir_of(argv, os.getcwd())
    lockdir = workdir / ".snakemake" / "locks"
    locks = sorted(lockdir.glob("*.lock")) if lockdir.is_dir() else []
    if not locks:
        return 0
    try:
        pids = live_snakemake_pids(workdir)
    except ImportError:
        print(
            f"ragmi: {lockdir} holds a Snakemake lock and psutil is not installed to check whether a run is "
            "still going; if none is, run `snakemake --unlock` with the same arguments",
            file=sys.stderr,
        )
        return 0
    if pids:
        print(
            f"ragmi: Snakemake is running in {workdir} (pid {', '.join(map(str, pids))}); its lock is left in place",
            file=sys.stderr,
        )
        return 0
    for lock in locks:
        lock.unlink(missing_ok=True)
    print(
        f"ragmi: removed a stale Snakemake lock ({len(locks)} files in {lockdir}): no Snakemake process is running "
        "there, so the last run was interrupted. This run redoes the jobs it left incomplete; answers already "
        "in the response cache are not generated again.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
