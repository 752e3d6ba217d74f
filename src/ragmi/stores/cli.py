"""``python -m ragmi store-cleanup [--results results]``: remove every membership game still in a
store, from its manifest (after a SIGKILL or a crash no handler of ragmi's could catch)."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import RagmiError
from . import open_store
from .base import cleanup, pending_manifests

RECORD = "cleanup.after-failure.json"  # rule store_cleanup writes cleanup.json

DESCRIPTION = (
    "Remove every membership game still in a vector store: for each manifest under <results>/stores "
    "whose status is not 'cleaned', connect to the store it names, delete the ids it planned to insert, "
    "check the store is as it was before and write cleanup.after-failure.json beside the manifest. "
    "Run it in the run's directory after a run was killed (SIGKILL, a power cut, a lost node) and before "
    "the next run. Exit 0: nothing left in a store; 1: a store could not be restored (one 'ragmi:' line "
    "each). See docs/vector-stores.md."
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ragmi store-cleanup", description=DESCRIPTION)
    ap.add_argument("--results", default="results", help="the run's results folder (default: results)")
    args = ap.parse_args(argv)
    failed = 0
    pending = pending_manifests(args.results)
    if not pending:
        print(f"ragmi store-cleanup: no membership game left in a store (manifests under {args.results}/stores)")
    for path in pending:
        m = json.loads(path.read_text())
        try:
            spec = dict(m["spec"], embedder=None)
            cleanup(
                open_store(m["store"], spec),
                path,
                path.with_name(RECORD),
                log=lambda s: print(f"ragmi store-cleanup: {s}"),
            )
        except RagmiError as e:
            failed += 1
            print(f"ragmi: {path}: {e}", file=sys.stderr)
    return 1 if failed else 0
