"""How long a job takes to read the response cache's index (ragmi.cache.ResponseCache.refresh) at a paper
configuration's size, and to look keys up in it.

    .venv/bin/python benchmarks/cache_index.py [--entries 2000000] [--indexes 1836] [--out result.json]

Writes ``--indexes`` index files (one per writer process, as a run's model jobs write them) holding
``--entries`` random keys in all, with empty packs beside them, into a temporary folder; then times one
``refresh`` (every index read into the sorted array) and 1,000 lookups.  The defaults are
config/paper/menta.yaml's count (docs/running.md, "A response cache shared by concurrent runs")."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ragmi.cache import INDEX_ENTRY, PACKS, ResponseCache


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2_000_000)
    parser.add_argument("--indexes", type=int, default=1836)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="ragmi-cache-index-"))
    try:
        (d / PACKS).mkdir()
        rng = np.random.default_rng(0)
        per = max(1, args.entries // args.indexes)
        probes = []
        for j in range(args.indexes):
            e = np.zeros(per, INDEX_ENTRY)
            e["key"] = np.frombuffer(rng.bytes(32 * per), "V32")
            e["offset"] = np.arange(per) * 3000
            e["length"] = 3000
            (d / PACKS / f"{j:020d}.idx").write_bytes(e.tobytes())
            (d / PACKS / f"{j:020d}.pack").touch()
            probes.append(bytes(e["key"][per // 2]))
        cache = ResponseCache(d)
        t0 = time.perf_counter()
        cache.refresh()
        refresh_s = time.perf_counter() - t0
        probes = probes[:1000]
        t0 = time.perf_counter()
        found = sum(cache._lookup(k) is not None for k in probes)
        lookup_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(d)
    result = {
        "entries": per * args.indexes,
        "indexes": args.indexes,
        "refresh_s": round(refresh_s, 3),
        "lookups": len(probes),
        "lookups_s": round(lookup_s, 4),
        "found": found,
    }
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
