"""After a failed run: the logs of the steps that failed (``tools/eta.py --failed-since``)."""

from __future__ import annotations

from pathlib import Path

from .speed import _show

ERROR_MARKERS = ("] ERROR: ", "] unexpected failure")


def failed_logs(root: Path, since: float) -> list[tuple[str, str]]:
    """(log, its error line) of every step log written since ``since`` (epoch seconds) that records a
    failure (``ragmi.workflow.run_step`` writes ``ERROR: …`` or ``unexpected failure``)."""
    out = []
    logs = root / "logs"
    for path in sorted(logs.glob("**/*.log")) if logs.is_dir() else []:
        try:
            if path.stat().st_mtime < since:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if any(m in line for m in ERROR_MARKERS):
                what = line.split("] ", 1)[1] if "] " in line else line
                out.append((_show(path, root), what.strip()[:300]))
                break
    return out


def failure_lines(root: Path, since: float) -> list[str]:
    found = failed_logs(root, since)
    out = []
    if found:
        out.append("ragmi: the run stopped; the step(s) that failed, and their logs:")
        out += [f"ragmi:   {path}: {what}" for path, what in found]
    else:
        out.append("ragmi: the run stopped with an error (see above).")
    out.append(
        "ragmi: Snakemake's job details are off the console here (all of them in .snakemake/log/); `make run QUIET=` (or run-real) shows them."
    )
    return out
