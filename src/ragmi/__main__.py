"""``python -m ragmi <command>`` (also the ``ragmi`` console script): ``serve-target``, ``gate``,
``store-cleanup``.

The pipeline itself runs with ``snakemake`` (README); this entry point holds the commands that are
not pipeline steps."""

from __future__ import annotations

import sys

COMMANDS = {
    "serve-target": "serve a configured ragmi target as an OpenAI-compatible endpoint",
    "gate": "check a run's tables against gate.limits (exit 0 pass, 1 breach, 2 bad input, 3 undecided; docs/gate.md)",
    "store-cleanup": "remove what a membership game inserted into a vector store (docs/vector-stores.md)",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        lines = [f"  {c:<14} {d}" for c, d in COMMANDS.items()]
        print("usage: ragmi <command> [options]\n\ncommands:\n" + "\n".join(lines), file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] == "gate":
        from .gate import main as gate

        return gate(argv[1:])
    if argv[0] == "store-cleanup":
        from .stores.cli import main as store_cleanup

        return store_cleanup(argv[1:])
    from .serve_target import main as serve

    return serve(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
