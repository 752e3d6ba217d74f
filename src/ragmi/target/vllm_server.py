"""Start a local vLLM OpenAI-compatible server for one job, and stop it afterwards.

The server binds 127.0.0.1 on a free port, logs to a file next to the job's log, and is ready when
``GET /v1/models`` lists the served model.  On a CPU-only machine the settings measured in
shared/reference/measured-vllm-cpu-...md are applied: float32, ``--enforce-eager`` (30 s start instead
of ~110 s), ``VLLM_CPU_KVCACHE_SPACE`` (the VM exposes only one small NUMA node, which otherwise fails
vLLM's memory check) and ``VLLM_CPU_OMP_THREADS_BIND`` over all allotted cores.
"""

from __future__ import annotations

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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: treat as CPU
        return False


class VLLMServer:
    def __init__(
        self,
        model: str,
        served_name: str,
        log_path: str | os.PathLike,
        dtype: str = "auto",
        max_model_len: int = 2048,
        max_logprobs: int = 20,
        extra_args: list[str] | None = None,
        startup_timeout: float = 900.0,
        threads: int | None = None,
        cache_root: str | None = None,
    ):
        self.model = model
        self.served_name = served_name
        self.log_path = Path(log_path)
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.max_logprobs = max_logprobs
        self.extra_args = list(extra_args or [])
        self.startup_timeout = startup_timeout
        self.threads = threads
        self.cache_root = cache_root
        self.port = None
        self.proc = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        gpu = cuda_available()
        dtype = self.dtype if self.dtype != "auto" or gpu else "float32"
        cmd = [
            sys.executable, "-m", "ragmi.target.vllm_cli", "serve", self.model,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--served-model-name", self.served_name,
            "--dtype", dtype,
            "--max-model-len", str(self.max_model_len),
            "--max-logprobs", str(self.max_logprobs),
            "--generation-config", "vllm",
            "--disable-log-stats",
        ]
        if not gpu and "--enforce-eager" not in self.extra_args:
            cmd.append("--enforce-eager")
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
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(str(c) for c in cores))
        return env

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=2) as r:
                names = [m["id"] for m in json.load(r).get("data", [])]
                return self.served_name in names
        except Exception:
            return False

    def _log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def start(self, log=print) -> "VLLMServer":
        self.port = free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.log_path, "ab")
        log(f"starting vLLM for {self.served_name} on 127.0.0.1:{self.port} (log: {self.log_path})")
        t0 = time.time()
        self.proc = subprocess.Popen(
            self.command(), stdout=fh, stderr=subprocess.STDOUT, env=self.environment(),
            start_new_session=True,
        )
        fh.close()
        while time.time() - t0 < self.startup_timeout:
            rc = self.proc.poll()
            if rc is not None:
                self.proc = None
                raise EndpointError(
                    f"the vLLM server for {self.served_name} exited during start-up (code {rc}); "
                    f"last lines of {self.log_path}:\n{self._log_tail()}"
                )
            if self._ready():
                log(f"vLLM ready after {time.time() - t0:.0f} s")
                return self
            time.sleep(1.0)
        self.stop()
        raise EndpointError(
            f"the vLLM server for {self.served_name} was not ready after {self.startup_timeout:.0f} s; "
            f"see {self.log_path}"
        )

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
