"""The estimate (work x speed) and the lines ``make run`` prints before it starts (``tools/eta.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .speed import AVX2_RANGE, BATCH, CACHED_JOB_S, REFERENCE_MACHINE, Speed
from .work import Work

LIGHT_S_PER_RUN = 3.0  # score, metrics, leakage of one dataset x target x attack (2 cores, side by side)
LIGHT_S_TABLES = 25.0  # tables, figures, the results page
PREP_S_PER_DATASET = 10.0  # corpus, split, queries, index: beside the server's start-up


def work_seconds(w: Work, f: dict, scale: float = 1.0) -> float:
    """A job kind's wall time at figures ``f`` (seconds per prompt token and per answer token x
    ``scale``), with its jobs' overhead; a kind done before the run costs nothing, one whose every
    answer is cached a second a job."""
    if w.done:
        return 0.0
    if not w.requests:
        return w.jobs * CACHED_JOB_S
    per_job = w.requests / w.jobs
    steps = w.answer_tokens * max(1.0, per_job / BATCH) * w.jobs
    model = (w.prompt_tokens / f["prompt_tokens_per_s"] + steps * f["s_per_answer_token"]) * scale
    return model + w.jobs * f["job_overhead_s"]


@dataclass
class Estimate:
    seconds: float  # the central estimate
    low: float
    high: float
    generation_s: float
    fixed_s: float
    cached_credit_s: float


def estimate(
    works: list[Work],
    speeds: dict[str, Speed | None],
    n_runs_left: int,
    n_datasets_new: int,
    cached_unaccounted: int,
) -> Estimate | None:
    """The run's time: every local model's jobs at its figures, its server's start-up (the servers
    start early, side by side), the light steps; the range from each figure's own (``Speed.rng``; none:
    both ends the estimate), its low end crediting the cached responses no finished step accounts for."""
    known = {m: s for m, s in speeds.items() if s is not None}
    if not known:
        return None
    gen = gen_low = gen_high = 0.0
    start = 0.0
    to_send = 0.0
    for model, speed in known.items():
        mine = [w for w in works if w.local and w.model == model]
        g = sum(work_seconds(w, speed.figures, speed.scale) for w in mine)
        sends = sum(w.requests for w in mine)
        lo, hi = speed.rng or (1.0, 1.0)
        gen, gen_low, gen_high = gen + g, gen_low + g * lo, gen_high + g * hi
        to_send += sends
        if sends:
            start = max(start, float(speed.figures["server_start_s"]))
    fixed = max(start, PREP_S_PER_DATASET * n_datasets_new)
    fixed += LIGHT_S_PER_RUN * n_runs_left + (LIGHT_S_TABLES if (n_runs_left or to_send) else 0.0)
    # cached responses that no finished step accounts for: at best they are this run's requests
    share = min(1.0, cached_unaccounted / to_send) if to_send else 0.0
    rng = next(iter(known.values())).rng or (1.0, 1.0)
    return Estimate(
        gen + fixed,
        gen_low * (1 - share) + fixed * rng[0],
        gen_high + fixed * rng[1],
        gen,
        fixed,
        gen * share,
    )


def _unit(seconds: float) -> tuple[float, str]:
    if seconds < 120 * 60:
        return 60.0, "minutes"
    return (3600.0, "hours") if seconds < 48 * 3600 else (86400.0, "days")


def minutes(seconds: float) -> str:
    """A duration as a person reads it: minutes, hours beyond two hours, days beyond two days."""
    if seconds < 45:
        return "less than a minute"
    if seconds < 90:
        return "1 minute"
    size, unit = _unit(seconds)
    return f"{seconds / size:.0f} {unit}"


def about(seconds: float) -> str:
    text = minutes(seconds)
    return text if text.startswith("less") else "about " + text


def span(low: float, high: float) -> str:
    size, unit = _unit(high)
    lo, hi = max(1, round(low / size)), max(1, round(high / size))
    return f"{lo} to {hi} {unit}" if hi > lo else f"about {hi} {unit.rstrip('s') if hi == 1 else unit}"


def count_cached(cache_dir: Path) -> int:
    """The responses in the cache: its packs' keys and the earlier layout's files (ragmi.cache)."""
    from ragmi.cache import ResponseCache

    return len(ResponseCache(cache_dir).keys()) if cache_dir.is_dir() else 0


def runs_left(cfg: dict, root: Path) -> int:
    from ragmi.plan import runs

    return sum(1 for d, t, a in runs(cfg) if not (root / "results" / "metrics" / d / t / f"{a}.csv").is_file())


def new_datasets(cfg: dict, root: Path) -> int:
    return sum(1 for d in cfg["datasets"] if not (root / "results" / "split" / d / "candidates.parquet").is_file())


def detail_lines(works: list[Work], speed: Speed | None) -> list[str]:
    out = [
        "ragmi:   kind               dataset/target/attack                          asked   sent  prompt tok  answer  jobs  time"
    ]
    for w in works:
        state = "done" if w.done else ("reused: " + w.reused_from if w.reused_from else "")
        secs = work_seconds(w, speed.figures, speed.scale) if (speed and w.local) else float("nan")
        name = f"{w.dataset}/{w.target}/{w.attack}"
        out.append(
            f"ragmi:   {w.kind:18s} {name:44s} {w.asked:6.0f} {w.requests:6.0f} {w.prompt_tokens:11,.0f} "
            f"{w.answer_tokens:6.1f} {w.jobs:5d} {secs:5.0f} s {state}"
        )
    return out


def summary_lines(
    works: list[Work],
    speed: Speed | None,
    est: Estimate | None,
    machine: str,
    cached: int,
    cached_unaccounted: int,
    doc_notes: list[str],
) -> list[str]:
    sent = sum(w.requests for w in works if w.local)
    out = [_time_line(works, speed, est, machine, sent), _work_line(works, sent)]
    if cached:
        out.append(
            f"ragmi:   {cached:,} responses in the cache"
            + (
                f", {cached_unaccounted:,} of them not from a finished step: they may be this run's (the low end counts them)"
                if cached_unaccounted and sent
                else ""
            )
            + "; finished steps are kept: the run does what is missing."
        )
    external = sorted({w.target for w in works if not w.local and w.requests})
    if external:
        out.append(
            f"ragmi:   not counted: the answers of {', '.join(external)} (its endpoint's time, not this machine's)."
        )
    if any(w.rough and w.requests for w in works):
        out.append(
            "ragmi:   rough: "
            + ", ".join(sorted({w.attack for w in works if w.rough and w.requests}))
            + " (their query sizes are guesses)."
        )
    if speed is not None:
        f = speed.figures
        out.append(
            f"ragmi:   speed: {f['prompt_tokens_per_s']:,.0f} prompt tokens/s, {f['s_per_answer_token']:.2f} s per answer "
            f"token of a batch, {f['job_overhead_s']:.0f} s a job, server start {f['server_start_s']:.0f} s: {speed.basis}."
        )
    out += [f"ragmi:   {n}" for n in doc_notes]
    out.append(
        "ragmi: Snakemake's 'N of M steps' counts steps, not time: a model job takes minutes, most others seconds, "
        "and M grows once the queries exist. Each model job prints its answers as they come."
    )
    return out


def _time_line(works: list[Work], speed: Speed | None, est: Estimate | None, machine: str, sent: float) -> str:
    """The summary's first line: how long the run takes here (or why that is not known)."""
    parts = "" if est is None else f"model jobs {minutes(est.generation_s)}, the rest {minutes(est.fixed_s)}"
    if est is None or speed is None:
        return f"ragmi: no time estimate for this machine ({machine}): no measurement here, and its CPU has no AVX2."
    if not sent and not any(w.requests for w in works):
        return f"ragmi: no model answer left to generate: this run takes {about(est.seconds)} here."
    if speed.range_only:
        return (
            f"ragmi: this run takes {span(est.low, est.high)} here: {AVX2_RANGE[0]:g} to {AVX2_RANGE[1]:g} times "
            f"its {minutes(est.seconds)} on {REFERENCE_MACHINE} ({parts} there), see the speed line."
        )
    if speed.rng is None:
        return (
            f"ragmi: this run takes {about(est.seconds)} on {REFERENCE_MACHINE} ({parts}); "
            "how long here is unknown until a first run on this CPU measures it."
        )
    return f"ragmi: this run takes {about(est.seconds)} here ({span(est.low, est.high)}; {parts})."


def _work_line(works: list[Work], sent: float) -> str:
    """The work line: the model requests to send, their tokens and jobs, and what is answered already."""
    local = [w for w in works if w.local]
    asked = sum(w.asked for w in works)
    prompt = sum(w.prompt_tokens for w in local)
    answer = sum(w.requests * w.answer_tokens for w in local)
    jobs = sum(w.jobs for w in local if not w.done)
    pairs = {tuple(sorted((w.target, w.reused_from))) for w in works if w.reused_from and w.reused_from != "done"}
    reused = [f"{a} and {b} send the same requests" for a, b in sorted(pairs)]
    done = sum(w.asked for w in works if w.done or w.reused_from == "done")
    same = f"; {', '.join(reused)} (an output-only defense), answered once" if reused else ""
    if sent or any(w.requests for w in works):
        return (
            f"ragmi:   work: {sent:,.0f} model requests to send ({prompt / 1000:,.0f}k prompt tokens, about "
            f"{answer / 1000:,.1f}k answer tokens) in {jobs} model jobs, of {asked:,.0f} asked"
            + (f"; {done:,.0f} answered already" if done else "")
            + same
            + "."
        )
    return f"ragmi:   work: the {asked:,.0f} model requests of this config are answered already{same}."


RESULTS_LINE = (
    "ragmi: results go to results/tables/ (.md and .csv), results/figures/ (.png) and results/results.html; "
    "logs to logs/, per-step timings to results/benchmarks/."
)
