"""This machine's speed per model: fitted to the serving records of finished model jobs, kept per
machine in a throughput file, or the reference machine's figures until then (``tools/eta.py``)."""

from __future__ import annotations

import datetime
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

# The requests the local vLLM server decodes together at most (vLLM 0.32's max_num_seqs of its OpenAI
# server on a CPU); more join as others finish, so n requests take about n / BATCH rounds of decoding.
BATCH = 128
CACHED_JOB_S = 1.0  # a model job whose every answer is in the response cache
MIN_JOBS = 3  # generate jobs a measurement needs

DEFAULT_MODEL = "vllm|local|qwen2.5-coder-0.5b-instruct|auto"

# The one machine the embedded default was timed on, and its figures for the default's model, fitted
# (`tools/eta.py --remeasure --show-measured`) to the generate jobs' records of a fresh run of the
# default there on 2026-12-04 (before its dp-r target), the machine otherwise idle: 15 min 0 s
# (benchmarks/README.md, "Pipeline and test-suite timings"); the default with dp-r took 15 min 21 s there.  Used until this machine has measured its own.
REFERENCE_MACHINE = "a 2-core AMD EPYC Zen 4"
REFERENCE_LSCPU = "family 25, model 17; AVX-512, no AMX"
REFERENCE_CPU = ("AuthenticAMD", 25, 17)  # cpu_identity() of that machine
REFERENCE_CORES = 2
REFERENCE_RUN = "a fresh run of the embedded default of 2026-12-04 (before its dp-r target), otherwise idle: 15 min 0 s"
REFERENCE_FIGURES = {
    "prompt_tokens_per_s": 487.1,
    "s_per_answer_token": 0.94,
    "job_overhead_s": 1.8,
    "server_start_s": 33.7,
}
REFERENCE_RANGE = [0.8, 1.5]  # a machine of that kind: other processes slow a 2-core machine down
# An AVX2-only CPU was never timed with this default.  Two measured runs of an earlier default
# (SmolLM2-135M, benchmarks/README.md) bound it: the reference kind of CPU with AVX2 code paths only
# (benchmarks/avx2/run.sh) took 7 min 14 s against 5 min 40 s natively, 1.28 times as long, a lower
# bound; a real 2-core AVX2-only AMD EPYC Zen 3 took about 39 minutes against about 11 on the
# reference kind, 3.5 times as long.  An AVX2-only CPU gets the reference machine's time times this
# range, printed as a range only.
AVX2_RANGE = [1.28, 3.5]
MEASURED_RANGE = [0.85, 1.3]  # this machine's own figures: other processes slow a 2-core machine down


def _job_features(rec: dict) -> tuple[float, float]:
    """(prompt tokens sent, decode steps) of one generate job: its mean answer length, once per BATCH."""
    n = max(1, int(rec["generated"]))
    return float(rec["prompt_tokens_sent"]), rec["completion_tokens"] / n * max(1.0, n / BATCH)


def fit(records: list[dict], fallback: dict | None = None) -> tuple[float, float] | None:
    """(seconds per prompt token, seconds per answer token) fitted to the jobs' wall times (least
    squares without intercept), then scaled so that the jobs' total is exact; where the fit gives a
    coefficient <= 0 (too few kinds of job), ``fallback``'s ratio scaled to the total.  None: nothing."""
    xs = [_job_features(r) for r in records]
    ys = [float(r["wall_s"]) for r in records]
    if not xs or sum(ys) <= 0:
        return None
    s11 = sum(a * a for a, _ in xs)
    s12 = sum(a * b for a, b in xs)
    s22 = sum(b * b for _, b in xs)
    s1y = sum(a * y for (a, _), y in zip(xs, ys))
    s2y = sum(b * y for (_, b), y in zip(xs, ys))
    det = s11 * s22 - s12 * s12
    a = b = -1.0
    if det > 1e-9 * max(1.0, s11 * s22):
        a, b = (s22 * s1y - s12 * s2y) / det, (s11 * s2y - s12 * s1y) / det
    if a <= 0 or b <= 0:
        if fallback is None:
            return None
        a, b = 1.0 / fallback["prompt_tokens_per_s"], fallback["s_per_answer_token"]
    predicted = sum(a * x1 + b * x2 for x1, x2 in xs)
    scale = sum(ys) / predicted if predicted > 0 else 1.0
    return a * scale, b * scale


def serving_records(root: Path) -> list[dict]:
    """The generate jobs' ``.serving.json`` records that generated something, each with its benchmark's
    seconds (``bench_s``) where that file exists."""
    out = []
    logs = root / "logs" / "generate"
    for path in sorted(logs.glob("**/*.serving.json")) if logs.is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not rec.get("generated") or not rec.get("wall_s") or "prompt_tokens_sent" not in rec:
            continue
        rel = path.relative_to(logs).as_posix()[: -len(".serving.json")]
        bench = root / "results" / "benchmarks" / "generate" / f"{rel}.tsv"
        try:
            rec["bench_s"] = float(bench.read_text().splitlines()[1].split("\t")[0])
        except (OSError, IndexError, ValueError):
            pass
        rec["mtime"] = path.stat().st_mtime
        out.append(rec)
    return out


def server_start_s(root: Path, records: list[dict]) -> float | None:
    """The model server's start-up: what a job that started it recorded, else rule prepare_model's
    benchmark (it starts the server early, generation.start_server_early)."""
    started = [float(r["server_startup_s"]) for r in records if (r.get("server_startup_s") or 0) > 1]
    if started:
        return max(started)
    times = []
    for f in sorted((root / "results" / "benchmarks" / "prepare_model").glob("*.tsv")):
        try:
            times.append(float(f.read_text().splitlines()[1].split("\t")[0]))
        except (OSError, IndexError, ValueError):
            continue
    return max(times) if times else None


def measure(records: list[dict], model: str, root: Path, fallback: dict | None = None) -> dict | None:
    """This machine's figures for ``model`` from the generate jobs' records (``tools/eta.py``'s docstring)."""
    recs = [r for r in records if r.get("model") == model]
    if len(recs) < MIN_JOBS:
        return None
    coef = fit(recs, fallback)
    if coef is None:
        return None
    a, b = coef
    over = [r["bench_s"] - r["wall_s"] for r in recs if "bench_s" in r]
    if not over:
        over = [r.get("job_wall_s", r["wall_s"]) - r["wall_s"] + CACHED_JOB_S for r in recs]
    start = server_start_s(root, recs)
    when = datetime.date.fromtimestamp(max(r["mtime"] for r in recs)).isoformat() if recs[0].get("mtime") else None
    return {
        "prompt_tokens_per_s": round(1.0 / a, 1),
        "s_per_answer_token": round(b, 3),
        "job_overhead_s": round(max(0.0, sum(over) / len(over)), 1),
        "server_start_s": round(start if start is not None else (fallback or REFERENCE_FIGURES)["server_start_s"], 1),
        "jobs": len(recs),
        "requests": sum(int(r["generated"]) for r in recs),
        "prompt_tokens": sum(int(r["prompt_tokens_sent"]) for r in recs),
        "answer_tokens": sum(int(r["completion_tokens"]) for r in recs),
        "wall_s": round(sum(float(r["wall_s"]) for r in recs), 1),
        "measured": when,
    }


def read_throughput(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_throughput(path: Path, data: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def model_params_b(model_id: str) -> float | None:
    """Billions of parameters as the model's name says them (``...-0.5b-...``, ``...-135m``), or None."""
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)([bm])(?![a-z])", model_id.lower())
    if not m:
        return None
    return float(m.group(1)) / (1000.0 if m.group(2) == "m" else 1.0)


@dataclass
class Speed:
    figures: dict
    basis: str  # one line: where the figures come from
    rng: list[float] | None  # the time's range as factors of the estimate; None: a CPU nobody measured
    scale: float = 1.0  # a model other than the one measured: by parameter count
    range_only: bool = False  # the estimate itself is no measurement here: print the range alone


def is_reference(cpu: tuple[str, int, int] | None, cores: int) -> bool:
    """Whether this machine is of the kind the embedded default was timed on (:data:`REFERENCE_CPU`,
    :data:`REFERENCE_CORES`)."""
    return cpu == REFERENCE_CPU and cores == REFERENCE_CORES


def reference_speed(kind: str, reference: bool) -> Speed | None:
    """The embedded default's model on a machine that has measured nothing yet: the reference
    machine's figures, with a range on that kind of machine, the AVX2 range on an AVX2-only CPU,
    none on any other CPU (its speed is unknown until its first run); None without AVX2."""
    where = f"measured on {REFERENCE_MACHINE} ({REFERENCE_LSCPU}), {REFERENCE_RUN} (benchmarks/README.md)"
    if reference:
        return Speed(REFERENCE_FIGURES, f"{where}, a machine of this kind", list(REFERENCE_RANGE))
    if kind == "avx2":
        basis = (
            f"{where}; this CPU has no AVX-512: with an earlier default, AVX2 code paths on that CPU took "
            f"{AVX2_RANGE[0]:g} times as long and a real AVX2-only AMD EPYC Zen 3 {AVX2_RANGE[1]:g} times"
        )
        return Speed(REFERENCE_FIGURES, basis, list(AVX2_RANGE), range_only=True)
    if kind in ("avx512", "amx"):
        return Speed(REFERENCE_FIGURES, f"{where}; this CPU is not measured yet: its first run measures it", None)
    return None


def speed_for(
    model: str, machine: str, kind: str, path: Path, root: Path, remeasure: bool = False, reference: bool = False
) -> Speed | None:
    """This machine's figures for ``model``: from the throughput file, else measured now from the logs
    (and saved), else the reference machine's (:func:`reference_speed`; scaled by parameter count for
    another model).  ``reference``: this machine is of the reference kind (:func:`is_reference`)."""
    data = read_throughput(path)
    entry = (data.get(machine) or {}).get(model)
    note = ""
    if entry is None or remeasure:
        fresh = measure(serving_records(root), model, root, REFERENCE_FIGURES)
        if fresh is not None:
            data.setdefault(machine, {})[model] = fresh
            try:
                write_throughput(path, data)
                note = ", just now"
            except OSError as e:
                note = f"; not saved ({e.strerror})"
            entry = fresh
        elif remeasure and entry is not None:
            note = "; no new measurement in logs/generate (too few jobs that generated)"
    if entry is not None:
        basis = (
            f"measured on this machine from {entry['jobs']} model jobs of {entry.get('measured')} "
            f"({_show(path, root)}{note}; `tools/eta.py --remeasure` after a run on an otherwise idle machine)"
        )
        return Speed(entry, basis, list(MEASURED_RANGE))
    base = reference_speed(kind, reference)
    if base is None or model == DEFAULT_MODEL:
        return base
    mine, ref = model_params_b(model), model_params_b(DEFAULT_MODEL)
    scale = mine / ref if mine and ref else 1.0
    rng = None if base.rng is None else [base.rng[0] * 0.7, base.rng[1] * (1.5 if mine else 3.0)]
    how = f"x {scale:g} by parameter count" if mine and ref else "its size unknown"
    return Speed(
        base.figures,
        f"no measurement of {model} here: the default model's figures ({base.basis}), {how} (rough)",
        rng,
        scale,
        base.range_only,
    )


def _show(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)
