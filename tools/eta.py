"""Print, at the start of `make run`, roughly how long the run will take and where its results go.

    python tools/eta.py [--cores N] [snakemake arguments...]

The estimate is the embedded default's measured wall time (benchmarks/README.md) for this
machine's kind of CPU, scaled by its core count; a run with another config gets no estimate (only
the pointer to Snakemake's "N of M steps" progress).  Work already done (finished outputs, cached
responses) makes a run shorter than the estimate.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# The embedded default (config/config.yaml), install excluded, fresh results/ (benchmarks/README.md).
# Keys: the CPU's widest vector extension.  Each entry: (minutes on 2 cores, where the number comes from).
MEASURED = {
    "avx512": (
        20.7,
        "20 min 42 s measured on a 2-core Intel Xeon with AVX-512 and AMX, 2026-12-03; an AVX-512 CPU without "
        "AMX (AMD EPYC Zen 4) took 1.9x as long as that Intel CPU for a previous default, so expect up to about "
        "40 minutes there",
    ),
    "avx2": (
        49.0,
        "estimated: the Intel AVX-512/AMX time x 1.9 (an AVX-512 CPU without AMX) x 1.28 (vLLM's generation "
        "with AVX2 code paths emulated on the same CPU, benchmarks/avx2/run.sh); up to 3.5x an AVX-512 CPU "
        "on a real AVX2-only one (benchmarks/README.md)",
    ),
}
MEASURED_CORES = 2


def cpu_kind(flags: set[str]) -> str:
    """``avx512`` (AVX-512 foundation), ``avx2`` or ``other``."""
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    return "other"


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, set[str]]:
    """(model name, flags) of the first CPU listed, or ("unknown CPU", set()) off Linux."""
    name, flags = "unknown CPU", set()
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return name, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and name == "unknown CPU":
            name = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return name, flags


def uses_default_config(snakemake_args: list[str]) -> bool:
    """True when the extra Snakemake arguments keep the embedded default's values (no other
    ``--configfile``, no ``--config`` overrides)."""
    return not any(a.startswith(("--configfile", "--configfiles", "--config", "-C")) for a in snakemake_args)


def estimate_minutes(kind: str, cores: int) -> float | None:
    if kind not in MEASURED:
        return None
    minutes, _ = MEASURED[kind]
    # generation runs on all cores; scale by cores, but not below a third (start-up, serial steps)
    return minutes * max(MEASURED_CORES / max(cores, 1), 1 / 3)


def lines(kind: str, cpu_name: str, cores: int, default_config: bool, cached_responses: int) -> list[str]:
    label = {"avx512": "with AVX-512", "avx2": "with AVX2 (no AVX-512)", "other": "without AVX2"}[kind]
    out = [f"ragmi: {cores} core(s), {cpu_name} {label}."]
    if not default_config:
        out.append("ragmi: no time estimate for this config; Snakemake prints 'N of M steps (x%) done' as it goes.")
    else:
        minutes = estimate_minutes(kind, cores)
        if minutes is None:
            out.append("ragmi: no time estimate for a CPU without AVX2 (expect well over an hour).")
        else:
            source = MEASURED[kind][1]
            scale = "" if cores == MEASURED_CORES else f", scaled from {MEASURED_CORES} cores"
            out.append(f"ragmi: the embedded default takes about {minutes:.0f} minutes here ({source}{scale}).")
    if cached_responses:
        out.append(
            f"ragmi: {cached_responses} responses are already cached and finished steps are kept: "
            "this run only does what is missing."
        )
    out.append(
        "ragmi: results go to results/tables/ (.md and .csv) and results/figures/ (.png); "
        "logs to logs/, per-step timings to results/benchmarks/."
    )
    return out


def count_cached(cache_dir: Path) -> int:
    return sum(1 for _ in cache_dir.glob("*/*.json")) if cache_dir.is_dir() else 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--cores", default="all")
    known, rest = parser.parse_known_args(argv)
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    cores = available if known.cores in ("all", "") else min(int(known.cores), available)
    name, flags = cpu_flags()
    cached = count_cached(Path("results/cache/responses"))
    print("\n".join(lines(cpu_kind(flags), name, cores, uses_default_config(rest), cached)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
