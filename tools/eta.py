"""Print, at the start of `make run`, how long the run will take on this machine and where its results go.

    python tools/eta.py [--cores N] [--detail] [--remeasure] [--show-measured] [snakemake arguments...]
    python tools/eta.py --failed-since EPOCH     # after a failed run: the logs of the steps that failed
    python tools/eta.py --plan-file PATH ...     # also write the run's plan for tools/console_filter.py --plan

The estimate is the configuration's work times this machine's speed, both printed.

Work (:func:`plan`), from the validated config as Snakemake reads it (the last ``--configfile`` group,
else ``config/config.yaml``; the last ``--config`` group on top): for every dataset x target x attack,
the model requests (candidates: ``split.n_reference`` + ``split.n_eval`` per class; a negative control,
``<target>--null-db`` / ``--no-retrieval``, only the evaluation candidates; times the queries per
candidate the attack's class declares, ``Attack.work``), their prompt tokens (template + query + k retrieved
documents, :func:`prompt_tokens`) and their answer tokens (a share of the attack's ``max_tokens``), in
``generation.shard_size`` shards, one model job each; plus the canaries, the utility questions and
answers, and the attacker-LLM preparation of the attacks that have one.  A target whose requests are
another's (an output-only defense such as PAD: the response cache keeps the raw generation, so the
two targets send the same requests) generates nothing of its own.  Work already done counts as
done: a run whose responses, canaries or question files exist; cached responses that no finished run
accounts for shorten the low end of the range (they may be this run's requests).

Speed (:func:`measure`), per machine (CPU model and core count) and generator model: prompt tokens per
second and seconds per answer token, fitted to the ``logs/generate/**/*.serving.json`` records that
every generate job writes (``workflow_scripts/generate.py``), plus the per-job overhead (from
``results/benchmarks/generate``) and the model server's start-up.  The local vLLM server answers a
job's requests together, so an answer token costs one decode step of the whole batch: the job's
time is prompt tokens / (prompt tokens/s) + its mean answer length x (s per answer token).  Measured
once, from the first run's records, into :data:`THROUGHPUT_FILE` (``--remeasure`` replaces it, e.g.
after a run on an otherwise idle machine; ``--show-measured`` prints it).  Until then the figures are
those measured on the one machine the embedded default was timed on (:data:`REFERENCE_FIGURES`): on a
machine of that kind an estimate with a range, on an AVX2-only CPU a range derived from the measured
AVX2 runs (:data:`AVX2_RANGE`), on any other CPU the reference machine's time, said to be that.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT_FILE = ROOT / ".venv" / "share" / "ragmi" / "eta-throughput.json"  # kept by `make clean`

# Run before the package is installed too (`make run` calls it first): ragmi from this checkout.
sys.path.insert(0, str(ROOT / "src"))

from ragmi.eta.cpu import available_cores, cpu_flags, cpu_identity, cpu_kind, machine_key  # noqa: E402
from ragmi.eta.estimate import (  # noqa: E402
    RESULTS_LINE,
    count_cached,
    detail_lines,
    estimate,
    new_datasets,
    runs_left,
    summary_lines,
)
from ragmi.eta.failures import failure_lines  # noqa: E402
from ragmi.eta.speed import DEFAULT_MODEL, Speed, is_reference, read_throughput, speed_for  # noqa: E402
from ragmi.eta.work import plan, typical_doc  # noqa: E402

# -------------------------------------------------------------------------------------- the config


@dataclass
class SnakemakeArgs:
    configfiles: list[str] = field(default_factory=list)  # Snakemake keeps the last --configfile group
    config: list[str] = field(default_factory=list)  # ... and the last --config group
    directory: str = "."


def snakemake_args(args: list[str]) -> SnakemakeArgs:
    """The arguments of a Snakemake command line that decide its config and its working directory,
    read as Snakemake reads them (a repeated ``--configfile`` or ``--config`` replaces the earlier one)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", default=[])
    parser.add_argument("--config", "-C", nargs="*", default=[])
    parser.add_argument("--directory", "-d", default=".")
    known, _ = parser.parse_known_args(args)
    return SnakemakeArgs(list(known.configfile), list(known.config or []), known.directory)


def config_overrides(entries: list[str]) -> dict:
    """``--config KEY=VALUE`` entries, each value read as YAML (Snakemake tries int, float, bool, YAML)."""
    import yaml

    from ragmi.config import merge_config

    out: dict = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        if not sep:
            continue
        try:
            parsed = yaml.safe_load(value) if value != "" else None
        except yaml.YAMLError:
            parsed = value
        merge_config(out, {key: parsed})
    return out


def load_config(sm: SnakemakeArgs, root: Path = ROOT) -> dict:
    """The validated config a Snakemake run with these arguments would use (rules/common.smk): the
    config files merged in order as Snakemake merges them, the ``--config`` overrides on top."""
    from ragmi.config import merge_config, read_config_files, validate_config

    cfg = read_config_files(sm.configfiles or [str(root / "config" / "config.yaml")])
    merge_config(cfg, config_overrides(sm.config))
    return validate_config(cfg)


# ------------------------------------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    """Never fails the make recipe that calls it: a problem of its own is one line and exit 0."""
    try:
        return _main(argv)
    except Exception as e:  # noqa: BLE001
        print(f"ragmi: no time estimate ({type(e).__name__}: {e}).", flush=True)
        print(RESULTS_LINE, flush=True)
        return 0


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--cores", default="all")
    parser.add_argument("--detail", action="store_true")
    parser.add_argument("--remeasure", action="store_true")
    parser.add_argument("--show-measured", action="store_true")
    parser.add_argument("--failed-since", type=float, default=None)
    parser.add_argument("--throughput-file", default=str(THROUGHPUT_FILE))
    parser.add_argument("--plan-file", default=None)  # the run's plan for tools/console_filter.py --plan
    known, rest = parser.parse_known_args(argv)
    sm = snakemake_args(rest)
    root = (Path.cwd() / sm.directory).resolve()
    if known.failed_since is not None:
        print("\n".join(failure_lines(root, known.failed_since)), file=sys.stderr, flush=True)
        return 0
    available = available_cores()
    cores = available if known.cores in ("all", "") else max(1, min(int(known.cores), available))
    name, flags = cpu_flags()
    kind = cpu_kind(flags)
    cpu = cpu_identity()
    machine = machine_key(name, available)
    path = Path(known.throughput_file)
    if known.show_measured:
        print(json.dumps({machine: read_throughput(path).get(machine, {})}, indent=1, sort_keys=True))
        return 0
    label = {"amx": "AVX-512 and AMX", "avx512": "AVX-512", "avx2": "AVX2, no AVX-512", "other": "no AVX2"}[kind]
    family = f"family {cpu[1]}, model {cpu[2]}; " if cpu else ""
    lines = [f"ragmi: {cores} core(s) of {available}, {name} ({family}{label})."]
    try:
        cfg = load_config(sm, ROOT)
    except Exception as e:  # noqa: BLE001 - the config check that follows says what is wrong
        lines.append(
            f"ragmi: no time estimate: the config does not load ({type(e).__name__}); the check below says why."
        )
        print("\n".join([*lines, RESULTS_LINE]), flush=True)
        return 0
    works = plan(cfg, root)
    models = sorted({w.model for w in works if w.local and w.requests}) or [DEFAULT_MODEL]
    reference = is_reference(cpu, available)
    speeds = {m: speed_for(m, machine, kind, path, root, known.remeasure, reference) for m in models}
    cached = count_cached(root / cfg["generation"]["cache_dir"])  # an absolute cache_dir stays itself
    accounted = sum(w.own for w in works if w.done or w.reused_from == "done")
    unaccounted = max(0, cached - int(accounted))
    est = estimate(works, speeds, runs_left(cfg, root), new_datasets(cfg, root), unaccounted)
    speed = speeds[models[0]] if len(models) == 1 else _combined(speeds)
    notes = [
        f"documents of {d}: about {doc.chars:.0f} characters ({doc.source})"
        for d, doc in ((d, typical_doc(cfg, d, root)) for d in sorted(cfg["datasets"]))
        if "guess" in doc.source
    ]
    lines += summary_lines(works, speed, est, machine, cached, unaccounted, notes)
    if known.plan_file:
        from ragmi.run_progress import write_plan

        write_plan(
            known.plan_file,
            requests=sum(w.requests for w in works),
            cached_unaccounted=unaccounted,
            low_s=est.low if est is not None else None,
            high_s=est.high if est is not None else None,
            root=root,
        )
    if known.detail:
        lines += detail_lines(works, speed)
    print("\n".join([*lines, RESULTS_LINE]), flush=True)
    return 0


def _combined(speeds: dict[str, Speed | None]) -> Speed | None:
    """The speed line of a run with several local models: the first measured one's, named as such."""
    known = [s for s in speeds.values() if s is not None]
    if not known:
        return None
    first = known[0]
    basis = first.basis + f" (and {len(known) - 1} other model(s))"
    return Speed(first.figures, basis, first.rng, first.scale, first.range_only)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
