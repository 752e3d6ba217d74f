"""The machine the estimate is for: its CPU's kind (AVX2, AVX-512, AMX), identity and cores
(``tools/eta.py``)."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_kind(flags: set[str]) -> str:
    """``amx`` (AVX-512 and AMX), ``avx512`` (AVX-512 foundation), ``avx2`` or ``other``."""
    if "avx512f" in flags:
        return "amx" if "amx_tile" in flags else "avx512"
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


def cpu_identity(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, int, int] | None:
    """(vendor, family, model) of the first CPU listed, as ``lscpu`` reports them, or None off Linux."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if not key:
            if fields:
                break
            continue
        fields.setdefault(key, value.strip())
    try:
        return fields["vendor_id"], int(fields["cpu family"]), int(fields["model"])
    except (KeyError, ValueError):
        return None


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def machine_key(cpu_name: str, cores: int) -> str:
    return f"{cpu_name} | {cores} cores"
