"""Where a run's numbers come from: the provenance block of the results page and of ``results/run.json``.

:func:`provenance` gathers, each part absence-tolerant (a part it cannot read is ``None`` or an empty
list, never an error):

* ``config_sha256``: SHA-256 of the validated config as canonical JSON (:func:`config_digest`: keys
  sorted, no whitespace, UTF-8), so two runs with the same digest ran the same configuration;
* ``ragmi``: the package version and, in a git checkout, the commit (``git describe --always --dirty``);
* ``python`` and the versions of the libraries the numbers depend on (:data:`PACKAGES`);
* ``models``: every model the config names (:func:`config_models`), with its SHA-256 where one is
  known: a split packaged GGUF's checksum as recorded in :data:`ragmi.models.SPLIT_GGUF` (checked when
  the parts are assembled), a single-file packaged GGUF's or packaged embedder's weights hashed from the
  installed file; a local folder or Hugging Face id has none (``sha256`` null, ``sha256_source`` says why);
* ``cpu``: model name, logical CPUs and the vector-instruction flags that change inference speed (from
  ``/proc/cpuinfo``, else ``lscpu``); ``precision``: per generator, the dtype it computes in on this
  machine and why (:func:`precision_provenance`, ragmi.hardware's rule for ``dtype: auto``); ``gpus``: ``nvidia-smi``'s name, memory and driver per GPU, empty
  when there is no ``nvidia-smi``;
* ``date``: when the provenance was gathered (UTC, ISO 8601);
* ``wall_time``: from Snakemake's benchmark files (``results/benchmarks/**/*.tsv``, one per job run):
  the number of jobs, their own wall times summed, and the span from the earliest job's start (file
  time minus its ``s``) to the latest job's end (file time) -- the elapsed time of the invocations that
  made these results, pauses between them included; and the start of this invocation when the
  pipeline set ``RAGMI_RUN_ID`` (``<unix time>-<pid>``, rules/common.smk). ``what`` says so in words.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGES = ("snakemake", "numpy", "pandas", "scikit-learn", "torch", "transformers", "vllm", "sentence-transformers")
# CPU flags that decide which kernels inference runs (x86 vector extensions, AMX; Arm's SIMD)
CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")
RESULTS_BENCHMARK = "results_page.tsv"  # the page's own benchmark: written after the page, left out
_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")


def config_digest(config: Mapping) -> str:
    """SHA-256 (hex) of ``config`` as canonical JSON: keys sorted, ``,``/``:`` separators, UTF-8;
    a value JSON cannot hold is written as its ``str``."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file, read in 4 MiB chunks (cached per path, size and modification time)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _package_folder(module: str) -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def model_info(name: str, hash_files: bool = True) -> dict:
    """``{"name", "kind", "package", "sha256", "sha256_source", "files"}`` of model ``name``: a packaged
    model (ragmi.models) with its checksum, else a local folder or a Hub id without one."""
    from .. import models

    info: dict = {"name": name, "kind": "", "package": None, "sha256": None, "sha256_source": "", "files": []}
    if name in models.SPLIT_GGUF:
        spec = models.SPLIT_GGUF[name]
        info.update(
            kind=f"packaged GGUF in {spec.parts} parts ({spec.source})",
            package=f"{spec.dist}-part1..{spec.parts}=={spec.version}",
            sha256=spec.sha256,
            sha256_source=f"recorded in ragmi.models.SPLIT_GGUF ({spec.size:,} bytes; checked when the parts are assembled)",
        )
        return info
    if name in models.SINGLE_GGUF:
        module, fname = models.SINGLE_GGUF[name]
        info.update(kind="packaged GGUF", package=f"{name}=={_version(name) or '?'}")
        folder = _package_folder(module)
        path = folder / fname if folder else None
        return _hash_into(info, [path] if path and path.is_file() else [], hash_files)
    if name in models.PACKAGED_EMBEDDERS:
        module, sub = models.PACKAGED_EMBEDDERS[name]
        info.update(kind="packaged sentence-transformers folder", package=f"{name}=={_version(name) or '?'}")
        folder = _package_folder(module)
        files = sorted(p for p in (folder / sub).rglob("*") if p.suffix in WEIGHT_SUFFIXES) if folder else []
        return _hash_into(info, files, hash_files)
    if Path(name).is_dir():
        info.update(kind="local folder", sha256_source="not computed: a local folder (hash its weights to pin it)")
    else:
        info.update(kind="Hugging Face id", sha256_source="not computed: a Hub id (its revision is the Hub's)")
    return info


def _hash_into(info: dict, files: list[Path], hash_files: bool) -> dict:
    if not files:
        info["sha256_source"] = "not available: the package is not installed here"
        return info
    info["files"] = [{"file": p.name, "bytes": p.stat().st_size} for p in files]
    if not hash_files:
        info["sha256_source"] = "not computed"
        return info
    for entry, p in zip(info["files"], files):
        entry["sha256"] = file_sha256(p)
    info["sha256"] = info["files"][0]["sha256"] if len(files) == 1 else None
    info["sha256_source"] = (
        f"computed from the installed file{'s' if len(files) > 1 else ''} ({', '.join(p.name for p in files)})"
    )
    return info


def config_models(config: Mapping) -> list[dict]:
    """One entry per (role, model) the config names: ``{"role", "name"}`` -- the dense retrievers'
    embedders, the local generators' models, an openai generator's model name (served elsewhere) and
    the models an attack's parameters name (``model_references`` of its class)."""
    out = []
    for name, r in sorted(config.get("retrievers", {}).items()):
        if r.get("kind") == "dense" and r.get("embedder"):
            out.append({"role": f"retrievers.{name}.embedder", "name": str(r["embedder"])})
    for name, g in sorted(config.get("generators", {}).items()):
        if g.get("model"):
            where = "" if g.get("backend") in ("vllm", "transformers") else f" ({g.get('backend')} endpoint)"
            out.append({"role": f"generators.{name}.model{where}", "name": str(g["model"])})
    try:
        from ..attacks import attack_class

        for attack, params in sorted(config.get("attacks", {}).items()):
            for key, _kind in attack_class(attack).model_references(params):
                out.append({"role": f"attacks.{attack}.{key}", "name": str(params[key])})
    except Exception:  # an unknown attack or plugin: the models above are still listed
        pass
    return out


def models_provenance(config: Mapping, hash_files: bool = True) -> list[dict]:
    """:func:`config_models` with :func:`model_info` of each (a model named twice is hashed once)."""
    out = []
    for m in config_models(config):
        try:
            info = model_info(m["name"], hash_files)
        except Exception as e:  # noqa: BLE001 -- provenance never fails a run
            info = {"name": m["name"], "kind": "", "sha256": None, "sha256_source": f"not available ({e})"}
        out.append({"role": m["role"], **info})
    return out


def precision_provenance(config: Mapping) -> list[dict]:
    """Per generator, the precision it computes in on this machine and why (ragmi.hardware.choose_dtype:
    the rule for ``dtype: auto``, with the native-bf16 CPU flags it read)."""
    from ..hardware import choose_dtype

    return [
        {"generator": name, **choose_dtype(g.get("dtype", "auto"), g.get("backend", "vllm")).as_record()}
        for name, g in sorted(config.get("generators", {}).items())
    ]


def _flags_summary(flags: Iterable[str]) -> list[str]:
    have = set(flags)
    return [f for f in CPU_FLAGS if f in have]


def cpu_info(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> dict:
    """``{"model", "logical_cpus", "flags"}`` (flags: the :data:`CPU_FLAGS` present) from
    ``/proc/cpuinfo``, else ``lscpu``; the model from :func:`platform.processor` when neither says."""
    model, flags, n = None, [], os.cpu_count()
    try:
        text = Path(cpuinfo).read_text(errors="replace")
        for line in text.splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("model name", "hardware", "cpu model") and not model:
                model = value.strip()
            elif key in ("flags", "features") and not flags:
                flags = value.split()
    except OSError:
        pass
    if (not model or not flags) and shutil.which("lscpu"):
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
            for line in out.splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "Model name" and not model:
                    model = value.strip()
                elif key.strip() == "Flags" and not flags:
                    flags = value.split()
        except (OSError, subprocess.SubprocessError):
            pass
    return {
        "model": model or platform.processor() or platform.machine() or None,
        "logical_cpus": n,
        "machine": platform.machine(),
        "flags": _flags_summary(flags),
    }


def gpu_info() -> list[dict]:
    """``[{"name", "memory", "driver"}]`` per GPU from ``nvidia-smi``; empty without one."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    gpus = []
    for row in csv.reader(out.stdout.strip().splitlines()):
        if len(row) >= 3:
            gpus.append({"name": row[0].strip(), "memory": row[1].strip(), "driver": row[2].strip()})
    return gpus


def _benchmark_seconds(path: Path) -> float | None:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        return float(rows[-1]["s"]) if rows else None
    except (OSError, KeyError, ValueError, csv.Error):
        return None


def wall_time(results_dir: str | os.PathLike = "results", run_id: str | None = None) -> dict:
    """The run's timing from its benchmark files and ``RAGMI_RUN_ID`` (module docstring)."""
    bench = Path(results_dir) / "benchmarks"
    starts, ends, total, n = [], [], 0.0, 0
    for p in sorted(bench.rglob("*.tsv")) if bench.is_dir() else []:
        if p.name == RESULTS_BENCHMARK and p.parent == bench:
            continue
        s = _benchmark_seconds(p)
        if s is None:
            continue
        end = p.stat().st_mtime
        n, total = n + 1, total + s
        starts.append(end - s)
        ends.append(end)
    out: dict = {
        "jobs": n,
        "jobs_seconds": round(total, 1) if n else None,
        "first_job_start": _iso(min(starts)) if n else None,
        "last_job_end": _iso(max(ends)) if n else None,
        "span_seconds": round(max(ends) - min(starts), 1) if n else None,
        "invocation_start": None,
        "what": (
            "span: from the start of the earliest job to the end of the latest job with a Snakemake benchmark "
            f"file under {bench} (every invocation that made these results, pauses between them included); "
            "jobs_seconds: the jobs' own wall times summed (jobs that ran side by side each count); "
            "invocation_start: when the snakemake invocation that wrote this started (RAGMI_RUN_ID)"
        ),
    }
    run_id = os.environ.get("RAGMI_RUN_ID", "") if run_id is None else run_id
    m = re.match(r"^(\d{9,})-", run_id or "")
    if m:
        out["invocation_start"] = _iso(int(m.group(1)))
    return out


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists() or not shutil.which("git"):
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def provenance(
    config: Mapping,
    results_dir: str | os.PathLike = "results",
    *,
    hash_files: bool = True,
    now: float | None = None,
) -> dict:
    """The run's provenance (module docstring); JSON-serialisable."""
    import sys

    from .. import __version__

    def safe(fn, default):
        try:
            return fn()
        except Exception:  # noqa: BLE001 -- provenance never fails a run
            return default

    return {
        "config_sha256": config_digest(config),
        "ragmi": {"version": __version__, "git": safe(_git_commit, None)},
        "python": sys.version.split()[0],
        "packages": {p: v for p in PACKAGES if (v := _version(p))},
        "models": safe(lambda: models_provenance(config, hash_files), []),
        "cpu": safe(cpu_info, {}),
        "precision": safe(lambda: precision_provenance(config), []),
        "gpus": safe(gpu_info, []),
        "date": _iso(dt.datetime.now(dt.UTC).timestamp() if now is None else now),
        "wall_time": safe(lambda: wall_time(results_dir), {}),
    }


def format_seconds(s: float | None) -> str:
    """``"1 h 02 min"``, ``"18 min 16 s"``, ``"42 s"``; ``"–"`` for None."""
    if s is None:
        return "–"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"
