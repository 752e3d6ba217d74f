"""``python -m ragmi <command>`` (also the ``ragmi`` console script): ``serve-target``, ``gate``,
``store-cleanup``, ``summary``.

The pipeline itself runs with ``snakemake`` (README); this entry point holds the commands that are
not pipeline steps.  ``ragmi --help`` prints the commands on stdout (exit 0), ``ragmi --version`` the
version; a missing or unknown command is an error (a message and the usage on stderr, exit 2)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

PROG = "ragmi"

# command: (what it does, the module whose main(argv) runs it; imported only when the command runs)
COMMANDS = {
    "serve-target": ("serve a configured ragmi target as an OpenAI-compatible endpoint", "ragmi.serve_target"),
    "gate": (
        "check a run's tables against gate.limits (exit 0 pass, 1 breach, 2 bad input, 3 undecided; docs/gate.md)",
        "ragmi.gate.cli",
    ),
    "store-cleanup": (
        "remove what a membership game inserted into a vector store (docs/vector-stores.md)",
        "ragmi.stores.cli",
    ),
    "summary": (
        "print the verdict table of a finished run and the paths of its results (results/run.json)",
        "ragmi.report.run_summary",
    ),
}

USAGE = f"usage: {PROG} [-h] [--version] <command> [options]"


def usage() -> str:
    lines = [f"  {c:<14} {what}" for c, (what, _) in COMMANDS.items()]
    return (
        f"{USAGE}\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\noptions:\n"
        + "  -h, --help     show this help and exit\n"
        + "  --version      print ragmi's version and exit\n\n"
        + f"'{PROG} <command> --help' describes a command's options; the pipeline itself runs with snakemake (README)."
    )


def version() -> str:
    """The installed package's version; from this checkout's pyproject.toml when ragmi is not installed
    (run from the source tree with PYTHONPATH=src)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ragmi")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        import tomllib

        return str(tomllib.loads(pyproject.read_text())["project"]["version"])
    except (ImportError, OSError, KeyError, ValueError):  # Python 3.10 has no tomllib
        import re

        try:
            found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', pyproject.read_text())
        except OSError:
            found = None
        return found.group(1) if found else "unknown"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv and argv[0] == "--version":
        print(f"{PROG} {version()}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        if not argv:
            why = "a command is required"
        elif argv[0].startswith("-"):
            why = f"unknown option '{argv[0]}'"
        else:
            why = f"unknown command '{argv[0]}'"
        print(f"{PROG}: {why}\n\n{usage()}", file=sys.stderr)
        return 2
    command, module = argv[0], COMMANDS[argv[0]][1]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:  # a module it imports is missing: the traceback says which
            raise
        print(f"{PROG}: the command '{command}' is not part of this ragmi ({module} is missing)", file=sys.stderr)
        return 2
    rc = mod.main(argv[1:])
    return 0 if rc is None else rc


if __name__ == "__main__":
    sys.exit(main())
