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
import datetime
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT_FILE = ROOT / ".venv" / "share" / "ragmi" / "eta-throughput.json"  # kept by `make clean`

# ---------------------------------------------------------------------------------------------- CPU


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


# ------------------------------------------------------------------------------------ the work model

# Tokens of a prompt: the chat template's own (role markers, the template's instructions), the query's
# characters at QUERY_CHARS_PER_TOKEN, and each retrieved document's at DOC_CHARS_PER_TOKEN.  Fitted to
# the embedded default's records (Qwen2.5's tokenizer, the dcmi template, the compact synthetic
# conversations: names, numbers and e-mail addresses make 3.2 characters a token): within about 12% of
# every attack's prompt tokens sent, with and without retrieval.
TEMPLATE_TOKENS = 33
QUERY_CHARS_PER_TOKEN = 4.4

# A document's characters when no corpus file is there yet (config/schema.yaml: synthetic lengths).
SYNTHETIC_DOC_CHARS = {"full": 620, "short": 280, "compact": 237}
OTHER_DOC_CHARS = 800  # any other source before its corpus exists: a rough guess, said so


@dataclass
class Doc:
    chars: float  # a typical document of the dataset
    source: str  # where that number comes from


def attack_work(name: str, params: dict, doc: Doc):
    """What attack ``name`` sends per candidate, as its class declares it (``Attack.work``: a
    :class:`ragmi.attacks.work.AttackWork`)."""
    from ragmi.attacks import attack_class

    return attack_class(name).work(params, doc.chars)


def prompt_tokens(query_chars: float, k: int, doc_chars: float) -> float:
    from ragmi.attacks.work import DOC_CHARS_PER_TOKEN  # the attacks' work models use it too

    return TEMPLATE_TOKENS + query_chars / QUERY_CHARS_PER_TOKEN + k * doc_chars / DOC_CHARS_PER_TOKEN


CANARY_QUERY_CHARS = 200  # the canary pools' prompts (fitted: 232 prompt tokens a canary query at k = 2)
UTILITY_QUESTION_CHARS = 60  # the benign questions the targets answer
UTILITY_WRITER_CHARS = 220  # the attacker LLM's instructions around a member document
UTILITY_ANSWER_SHARE = 0.37  # the targets' answers to them: 17.5 of 48 tokens in the default
CANARY_ANSWER_SHARE = 0.8  # 25 of 32
WRITER_ANSWER_SHARE = 0.4  # the question writer: 25 of 64
UTILITY_OVERSAMPLE = 1.5  # ragmi.utility.questions.OVERSAMPLE: documents asked per question wanted


def typical_doc(cfg: dict, dataset: str, root: Path) -> Doc:
    """A dataset's mean document length: from its corpus file once the run has written it, else from
    the config (synthetic lengths), else a rough guess."""
    path = root / "results" / "corpus" / f"{dataset}.parquet"
    if path.is_file():
        try:
            import pyarrow.parquet as pq

            col = pq.read_table(path, columns=["text"]).column("text").to_pylist()
            if col:
                return Doc(sum(len(str(t)) for t in col) / len(col), f"mean of {path.relative_to(root)}")
        except Exception:  # noqa: BLE001 - an unreadable corpus file: the guess below
            pass
    d = cfg["datasets"][dataset]
    source_file = root / d["path"] if d.get("path") else None  # relative to the run's directory
    if source_file is not None and source_file.is_file():  # a local corpus or candidates file
        chars = _mean_chars(source_file, d.get("text_column") or "text")
        if chars:
            cap = d.get("max_chars")
            return Doc(min(chars, cap) if cap else chars, f"mean of {source_file}")
    if d["source"] == "synthetic":
        length = d.get("length") or "full"
        return Doc(SYNTHETIC_DOC_CHARS.get(length, 620), f"synthetic, {length}")
    chars = min(OTHER_DOC_CHARS, d["max_chars"]) if d.get("max_chars") else OTHER_DOC_CHARS
    return Doc(chars, "a guess until its corpus exists")


def _mean_chars(path: Path, column: str) -> float | None:
    """The mean length of a file's text column (parquet, jsonl, json or csv), or None."""
    import pandas as pd

    try:
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            texts = pd.read_parquet(path, columns=[column])[column]
        elif suffix in (".jsonl", ".json"):
            texts = pd.read_json(path, lines=suffix == ".jsonl")[column]
        elif suffix == ".csv":
            texts = pd.read_csv(path, usecols=[column])[column]
        else:
            return None
    except Exception:  # noqa: BLE001 - an unreadable file: the guess instead
        return None
    return float(texts.astype(str).str.len().mean()) if len(texts) else None


@dataclass
class Work:
    """One model job kind of the run: ``jobs`` jobs sending ``requests`` requests in all."""

    kind: str  # attack, canaries, utility answers, utility questions, prepare, defender
    dataset: str
    target: str
    attack: str
    model: str  # the generator's cache identity (ragmi.rag.generators.generator_model_id)
    jobs: int
    requests: float  # requests sent to the model (none when reused or done)
    asked: float  # requests asked (before reuse)
    prompt_tokens: float  # of the requests sent
    answer_tokens: float  # mean answer length of a request
    reused_from: str | None = None  # another target sends the same requests ("done": it did already)
    done: bool = False
    local: bool = True  # a local model (vllm, transformers) whose speed this machine decides
    rough: bool = False
    own: float = 0.0  # distinct requests of its own, done or not (none when another target sends them)
    key: tuple | None = None  # what decides its requests (_gen_key); None: never shared


def _gen_key(cfg: dict, dataset: str, target: str, what: str) -> tuple | None:
    """What decides a target's requests to its model on ``dataset`` for ``what`` (an attack, the utility
    questions, the canaries): two targets with the same key send the same requests
    (:func:`ragmi.plan.generation_key`, which the workflow orders their jobs by).  None: never shared."""
    from ragmi.plan import generation_key

    key = generation_key(cfg, target)
    return None if key is None else (dataset, what, key)


def _shards_done(root: Path, dataset: str, target: str, query_set: str) -> bool:
    shards_dir = root / "results" / "queries" / dataset / f"{query_set}.shards"
    shards = sorted(p.stem for p in shards_dir.glob("*.parquet")) if shards_dir.is_dir() else []
    out = root / "results" / "responses" / dataset / target / query_set
    return bool(shards) and all((out / f"{s}.parquet").is_file() for s in shards)


def _model(cfg: dict, gen_name: str) -> tuple[str, bool]:
    from ragmi.rag.generators import generator_model_id

    g = cfg["generators"][gen_name]
    return generator_model_id(g), g["backend"] in ("vllm", "transformers")


def plan(cfg: dict, root: Path = ROOT) -> list[Work]:
    """Every model job kind of the run, with its requests and tokens (module docstring)."""
    from ragmi.audit.plan import audited, canary_dataset, canary_seeds, canary_targets
    from ragmi.plan import control_base, runs
    from ragmi.targets import own_pipeline

    n_ref, n_eval = int(cfg["split"]["n_reference"]), int(cfg["split"]["n_eval"])
    n_candidates = 2 * n_ref + 2 * n_eval
    shard_size = int(cfg["generation"]["shard_size"])
    docs = {d: typical_doc(cfg, d, root) for d in cfg["datasets"]}
    attacker_model, attacker_local = _model(cfg, cfg["attacker"]["generator"])
    works: list[Work] = []
    seen: dict[tuple, str] = {}  # generation key -> the target that sends those requests

    def target_work(
        kind, dataset, target, what, n_all, n_sent, query_chars, answer, unique=1.0, rough=False, done=False
    ):
        t = cfg["targets"][target]
        model, local = _model(cfg, t["generator"])
        key = _gen_key(cfg, dataset, target, what)
        reused = seen.get(key) if key is not None else None
        if key is not None and reused is None:
            seen[key] = target
        own = 0.0 if reused else n_sent * unique
        k = 0 if t.get("control") == "no_retrieval" else int(t.get("k") or 0)
        per = prompt_tokens(query_chars, k, docs[dataset].chars)
        jobs = max(1, math.ceil(n_all / shard_size))
        sent = 0.0 if done else own
        more = dict(reused_from=reused, done=done, local=local and not own_pipeline(t), rough=rough, own=own, key=key)
        works.append(Work(kind, dataset, target, what, model, jobs, sent, n_sent, sent * per, answer, **more))

    def attacker_work(kind, dataset, what, n, per_prompt, answer, done, rough=False):
        sent = 0.0 if done else n
        more = dict(done=done, local=attacker_local, rough=rough, own=n)
        works.append(
            Work(kind, dataset, "attacker LLM", what, attacker_model, 1, sent, n, sent * per_prompt, answer, **more)
        )

    for d, t, a in runs(cfg):
        w = attack_work(a, cfg["attacks"][a], docs[d])
        n_all = n_candidates * w.queries
        n_sent = 2 * n_eval * w.queries if control_base(cfg, t) else n_all
        done = _shards_done(root, d, t, a)
        target_work("attack", d, t, a, n_all, n_sent, w.query_chars, w.answer_tokens, w.unique, w.rough, done)

    # the attacker LLM's preparation (DCMI's LLM perturber, IA's and MEntA's questions and summaries)
    for d, a in sorted({(d, a) for d, _, a in runs(cfg)}):
        w = attack_work(a, cfg["attacks"][a], docs[d])
        if w.prepare:
            calls, chars, answer = w.prepare
            done = (root / "results" / "materials" / d / f"{a}.parquet").is_file()
            per = TEMPLATE_TOKENS + chars / QUERY_CHARS_PER_TOKEN
            attacker_work("prepare", d, a, n_candidates * calls, per, answer, done, rough=True)

    # canaries: a 50-query pool per seed and canary target, through the target
    if audited(cfg):
        try:
            from ragmi.audit.canaries import N_DOCS as n_canaries
        except ImportError:  # pragma: no cover - the module moved
            n_canaries = 50
        cd = canary_dataset(cfg)
        answer = CANARY_ANSWER_SHARE * int(cfg["audit"]["canary_max_tokens"])
        for t in canary_targets(cfg):
            for s in canary_seeds(cfg, t):
                done = (root / "results" / "audit" / "canaries" / t / f"{s}.json").is_file()
                target_work(
                    "canaries", cd, t, f"canaries/{s}", n_canaries, n_canaries, CANARY_QUERY_CHARS, answer, done=done
                )

    # utility: the attacker LLM writes the questions (OVERSAMPLE x as many documents asked), the targets answer
    from ragmi.attacks.work import DOC_CHARS_PER_TOKEN
    from ragmi.utility.plan import utility_runs

    u_runs = utility_runs(cfg)
    n_q = int(cfg["utility"]["n_questions"]) if u_runs else 0
    for d in sorted({d for d, _ in u_runs}):
        done = (root / "results" / "utility" / d / "questions.parquet").is_file()
        per = TEMPLATE_TOKENS + UTILITY_WRITER_CHARS / QUERY_CHARS_PER_TOKEN + docs[d].chars / DOC_CHARS_PER_TOKEN
        answer = WRITER_ANSWER_SHARE * int(cfg["utility"]["question_max_tokens"])
        attacker_work("utility questions", d, "utility", math.ceil(UTILITY_OVERSAMPLE * n_q), per, answer, done)
    for d, t in u_runs:
        answer = UTILITY_ANSWER_SHARE * int(cfg["utility"]["max_tokens"])
        done = _shards_done(root, d, t, "utility")
        target_work("utility answers", d, t, "utility", n_q, n_q, UTILITY_QUESTION_CHARS, answer, done=done)

    # what one target of a key has answered is in the response cache for the others
    done_keys = {w.key for w in works if w.done and w.key is not None}
    for w in works:
        if not w.done and w.key in done_keys:
            w.requests, w.prompt_tokens, w.reused_from = 0.0, 0.0, "done"
    return works


# ------------------------------------------------------------------------------------------ speed

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
    """This machine's figures for ``model`` from the generate jobs' records (module docstring)."""
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


# -------------------------------------------------------------------------------------- estimate

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
    local = [w for w in works if w.local]
    sent = sum(w.requests for w in local)
    asked = sum(w.asked for w in works)
    prompt = sum(w.prompt_tokens for w in local)
    answer = sum(w.requests * w.answer_tokens for w in local)
    jobs = sum(w.jobs for w in local if not w.done)
    pairs = {tuple(sorted((w.target, w.reused_from))) for w in works if w.reused_from and w.reused_from != "done"}
    reused = [f"{a} and {b} send the same requests" for a, b in sorted(pairs)]
    done = sum(w.asked for w in works if w.done or w.reused_from == "done")
    out = []
    parts = "" if est is None else f"model jobs {minutes(est.generation_s)}, the rest {minutes(est.fixed_s)}"
    if est is None or speed is None:
        out.append(
            f"ragmi: no time estimate for this machine ({machine}): no measurement here, and its CPU has no AVX2."
        )
    elif not sent and not any(w.requests for w in works):
        out.append(f"ragmi: no model answer left to generate: this run takes {about(est.seconds)} here.")
    elif speed.range_only:
        out.append(
            f"ragmi: this run takes {span(est.low, est.high)} here: {AVX2_RANGE[0]:g} to {AVX2_RANGE[1]:g} times "
            f"its {minutes(est.seconds)} on {REFERENCE_MACHINE} ({parts} there), see the speed line."
        )
    elif speed.rng is None:
        out.append(
            f"ragmi: this run takes {about(est.seconds)} on {REFERENCE_MACHINE} ({parts}); "
            "how long here is unknown until a first run on this CPU measures it."
        )
    else:
        out.append(f"ragmi: this run takes {about(est.seconds)} here ({span(est.low, est.high)}; {parts}).")
    same = f"; {', '.join(reused)} (an output-only defense), answered once" if reused else ""
    if sent or any(w.requests for w in works):
        out.append(
            f"ragmi:   work: {sent:,.0f} model requests to send ({prompt / 1000:,.0f}k prompt tokens, about "
            f"{answer / 1000:,.1f}k answer tokens) in {jobs} model jobs, of {asked:,.0f} asked"
            + (f"; {done:,.0f} answered already" if done else "")
            + same
            + "."
        )
    else:
        out.append(f"ragmi:   work: the {asked:,.0f} model requests of this config are answered already{same}.")
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


RESULTS_LINE = (
    "ragmi: results go to results/tables/ (.md and .csv), results/figures/ (.png) and results/results.html; "
    "logs to logs/, per-step timings to results/benchmarks/."
)


# ------------------------------------------------------------------------------ after a failure

ERROR_MARKERS = ("] ERROR: ", "] unexpected failure")


def failed_logs(root: Path, since: float) -> list[tuple[str, str]]:
    """(log, its error line) of every step log written since ``since`` (epoch seconds) that records a
    failure (``ragmi.workflow.run_step`` writes ``ERROR: …`` or ``unexpected failure``)."""
    out = []
    logs = root / "logs"
    for path in sorted(logs.glob("**/*.log")) if logs.is_dir() else []:
        try:
            if path.stat().st_mtime < since:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if any(m in line for m in ERROR_MARKERS):
                what = line.split("] ", 1)[1] if "] " in line else line
                out.append((_show(path, root), what.strip()[:300]))
                break
    return out


def failure_lines(root: Path, since: float) -> list[str]:
    found = failed_logs(root, since)
    out = []
    if found:
        out.append("ragmi: the run stopped; the step(s) that failed, and their logs:")
        out += [f"ragmi:   {path}: {what}" for path, what in found]
    else:
        out.append("ragmi: the run stopped with an error (see above).")
    out.append(
        "ragmi: Snakemake's job details are off the console here (all of them in .snakemake/log/); `make run QUIET=` (or run-real) shows them."
    )
    return out


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
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main(sys.argv[1:]))
