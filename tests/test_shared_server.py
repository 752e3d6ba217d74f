"""The shared-server lease: started once, reused by later jobs, stopped by its watchdog when idle.

A tiny stand-in for ``vllm serve`` (an HTTP server answering ``/v1/models``) keeps this test fast;
the real vLLM path is exercised by tests/test_pipeline_e2e.py.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragmi.errors import EndpointError
from ragmi.rag.vllm_server import SharedVLLMServer, VLLMServer, _alive
from ragmi.schema import section_params

FAKE = r"""
import http.server, json, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "fake-model"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


class FakeServer(VLLMServer):
    def __init__(self, tmp_path, script=FAKE):
        (tmp_path / "fake.py").write_text(script)
        self.script = str(tmp_path / "fake.py")
        super().__init__(
            "fake",
            "fake-model",
            tmp_path / "server.log",
            dtype="auto",
            max_model_len=2048,
            extra_args=[],
            startup_timeout=30,
            threads=None,
            cache_root=None,
        )

    def command(self):
        return [sys.executable, self.script, "--port", str(self.port)]


def test_second_job_reuses_and_watchdog_stops_when_idle(tmp_path):
    a = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=2)
    logs = []
    url1 = a.acquire(log=logs.append)
    b = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=2)
    assert b.dir == a.dir  # same command and settings -> same server
    url2 = b.acquire(log=logs.append)
    assert url1 == url2
    assert sum("starting" in m for m in logs) == 1 and sum("reusing" in m for m in logs) == 1
    pid = int(__import__("json").loads((a.dir / "state.json").read_text())["pid"])
    a.release()
    time.sleep(4)
    assert _alive(pid), "a registered user (b) keeps the server up"
    b.release()
    for _ in range(40):
        if not _alive(pid) and not (a.dir / "state.json").exists():
            break
        time.sleep(0.5)
    assert not _alive(pid), "the watchdog stops the server once nobody uses it"
    assert not (a.dir / "state.json").exists(), "and forgets it, so the next job starts a fresh one"


def test_server_that_dies_at_start_gives_one_clear_error(tmp_path):
    s = SharedVLLMServer(
        FakeServer(tmp_path, script="import sys; print('boom: no model'); sys.exit(3)"),
        state_root=tmp_path / "state",
        idle_s=1,
    )
    with pytest.raises(EndpointError, match="exited during start-up") as e:
        s.acquire(log=lambda m: None)
    assert "boom: no model" in str(e.value)


def test_cpu_command_uses_measured_settings(tmp_path):
    cfg = section_params("generators", {"backend": "vllm", "model": "m"})
    srv = VLLMServer.from_config(cfg, "/models/m", tmp_path / "l.log", threads=None, cache_root=None)
    srv.port = 1234
    cmd = srv.command()
    assert cmd[cmd.index("serve") + 1] == "/models/m" and cmd[cmd.index("--served-model-name") + 1] == "m"
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert "--enforce-eager" in cmd and "--no-enable-chunked-prefill" in cmd
    assert cmd[cmd.index("--dtype") + 1] == "float32"  # dtype 'auto' on a CPU
    assert cmd[cmd.index("--max-model-len") + 1] == str(cfg["max_model_len"])
    assert cmd[cmd.index("--max-logprobs") + 1] == "20"
    assert cmd[cmd.index("--block-size") + 1] == "32"  # prefix-cache hits on shorter shared prefixes
    assert srv.startup_timeout == cfg["startup_timeout_s"]
    env = srv.environment()
    assert env["VLLM_CPU_KVCACHE_SPACE"] and env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # no separate worker process on a CPU
    assert os.sched_getaffinity(0) and env["VLLM_CPU_OMP_THREADS_BIND"]


def _gone(pid, seconds=10.0):
    for _ in range(int(seconds / 0.1)):
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_slurm_job_owns_its_server_and_release_stops_it(tmp_path, monkeypatch):
    """In a SLURM job the server is the job's own (another job never reuses it) and the last user's
    release stops it, with its watchdog, before returning: nothing outlives the job step."""
    import json

    monkeypatch.setenv("SLURM_JOB_ID", "101")
    a = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    assert a.idle_s == 0 and "slurm101" in a.dir.name and a.server.log_path.name == "server.slurm101.log"
    a.acquire(log=lambda m: None)
    state = json.loads((a.dir / "state.json").read_text())
    monkeypatch.setenv("SLURM_JOB_ID", "102")
    b = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    assert b.dir != a.dir and not b.hold(), "another SLURM job does not find job 101's server"
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    c = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    assert c.dir == a.dir and c.hold(), "a second user in the same job does"
    a.release()
    assert _alive(state["pid"]), "job 101 still has a user (c)"
    c.release()
    assert not _alive(state["pid"]) and not _alive(state["watchdog"])  # at once, not after an idle time
    assert not (a.dir / "state.json").exists()


def test_slurm_release_drops_its_user_file_under_the_lock(tmp_path, monkeypatch):
    """The watchdog of a SLURM job's server waits 0 s: had release dropped the user file before taking
    the lock, the watchdog could stop the server in between, and the job would not log the stop (a CI
    failure of tests/test_slurm_e2e.py).  The lock must be held while the user file goes."""
    import fcntl

    monkeypatch.setenv("SLURM_JOB_ID", "104")
    a = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    a.acquire(log=lambda m: None)
    held = []
    unlink = Path.unlink

    def probing_unlink(self, *args, **kwargs):
        if self == a.user_file:
            with open(a.dir / "lock", "a+") as fh:  # another open file: flock conflicts even in-process
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(fh, fcntl.LOCK_UN)
                    held.append(False)
                except BlockingIOError:
                    held.append(True)
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", probing_unlink)
    logs = []
    a.release(log=logs.append)
    assert held == [True]
    assert any(m.startswith("stopped the vLLM server of SLURM job 104") for m in logs), logs


def test_slurm_job_server_stops_when_its_user_dies_without_release(tmp_path, monkeypatch):
    import json
    import subprocess

    monkeypatch.setenv("SLURM_JOB_ID", "103")
    a = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    a.acquire(log=lambda m: None)
    state = json.loads((a.dir / "state.json").read_text())
    # hand the lease to a process that then dies without releasing (a job killed by SIGKILL)
    user = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (a.dir / "users" / f"{user.pid}.0").write_text("x")
    a.user_file.unlink()
    time.sleep(2.5)
    assert _alive(state["pid"])
    user.kill()
    user.wait()
    assert _gone(state["pid"], 10), "the watchdog stops the job's server within seconds, not server_idle_s"


def test_servers_dir_shares_one_server_between_working_directories(tmp_path, monkeypatch):
    from ragmi.rag.vllm_server import stop_all

    shared = tmp_path / "servers"
    monkeypatch.setenv("RAGMI_SERVERS_DIR", str(shared))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    (tmp_path / "w1").mkdir()
    (tmp_path / "w2").mkdir()
    monkeypatch.chdir(tmp_path / "w1")
    a = SharedVLLMServer(FakeServer(tmp_path), idle_s=60)
    a.acquire(log=lambda m: None)
    monkeypatch.chdir(tmp_path / "w2")
    b = SharedVLLMServer(FakeServer(tmp_path), idle_s=60)
    logs = []
    b.acquire(log=logs.append)
    assert a.dir == b.dir and a.dir.parent == shared
    assert any("reusing" in m for m in logs) and not any("starting" in m for m in logs)
    assert b.server.log_path == a.dir / "server.log" and b.server.log_path.is_absolute()
    assert not (tmp_path / "w1/.ragmi").exists() and not (tmp_path / "w2/.ragmi").exists()
    pid = int(__import__("json").loads((a.dir / "state.json").read_text())["pid"])
    assert stop_all(shared) == [pid] and not _alive(pid)
    # a SLURM job's server stays its own, in the working directory
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    c = SharedVLLMServer(FakeServer(tmp_path), idle_s=60)
    assert c.dir.parent == Path(".ragmi/servers") and "slurm77" in c.dir.name


def test_server_started_early_is_the_one_model_jobs_reuse(tmp_path, monkeypatch):
    """Rule prepare_model starts the server and lets go of it (ragmi.rag.factory.start_server_early):
    the next job with the same settings reuses it, and nothing is started inside a SLURM job."""
    import json

    from ragmi.rag import factory
    from ragmi.rag.vllm_server import stop_all

    monkeypatch.delenv("RAGMI_SERVERS_DIR", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(factory.VLLMServer, "from_config", classmethod(lambda cls, *a, **k: FakeServer(tmp_path)))
    cfg = section_params("generators", {"backend": "vllm", "model": "m"})
    logs = []
    assert factory.start_server_early("g", cfg, None, 2, "server.log", logs.append)
    assert any("starting vLLM" in m for m in logs) and any("vLLM ready" in m for m in logs)
    (d,) = Path(".ragmi/servers").iterdir()
    pid = json.loads((d / "state.json").read_text())["pid"]
    assert _alive(pid) and not list((d / "users").iterdir()), "up, and no longer held by prepare_model"
    job = SharedVLLMServer(FakeServer(tmp_path), idle_s=60)
    later = []
    job.acquire(log=later.append)
    assert job.dir == d and any("reusing" in m for m in later) and not any("starting" in m for m in later)
    job.release()
    assert stop_all(".ragmi/servers") == [pid]
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    logs.clear()
    assert not factory.start_server_early("g", cfg, None, 2, "server.log", logs.append)
    assert not list(Path(".ragmi/servers").glob("*slurm5*")) and "SLURM job 5" in logs[0]


def test_install_time_model_inspection_is_copied_into_an_empty_vllm_cache(tmp_path, monkeypatch):
    from ragmi.models import modelinfo_seed_dir
    from ragmi.rag.vllm_server import seed_modelinfo_cache

    monkeypatch.setenv("RAGMI_MODEL_CACHE", str(tmp_path / "share" / "models"))
    seed = modelinfo_seed_dir()
    assert seed == tmp_path / "share" / "vllm-cache" / "modelinfos"
    assert seed_modelinfo_cache(tmp_path / "run") == []  # nothing cached at install: nothing copied
    seed.mkdir(parents=True)
    (seed / "a.json").write_text('{"hash": "h1"}')
    (seed / "b.json").write_text('{"hash": "h2"}')
    (tmp_path / "run" / "modelinfos").mkdir(parents=True)
    (tmp_path / "run" / "modelinfos" / "b.json").write_text('{"hash": "newer"}')
    assert seed_modelinfo_cache(tmp_path / "run") == ["a.json"]
    assert (tmp_path / "run" / "modelinfos" / "a.json").read_text() == '{"hash": "h1"}'
    assert (tmp_path / "run" / "modelinfos" / "b.json").read_text() == '{"hash": "newer"}', "never overwritten"


def test_cpu_server_threads_follow_its_cores_not_the_starting_job(tmp_path, monkeypatch):
    """A server started by a one-core job (prepare_model) must still run torch on all its cores."""
    from ragmi.rag.vllm_server import _bound_cpus

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    cfg = section_params("generators", {"backend": "vllm", "model": "m"})
    env = VLLMServer.from_config(cfg, "/models/m", tmp_path / "l.log", threads=1, cache_root=None).environment()
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(min(os.sched_getaffinity(0)))
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    if len(os.sched_getaffinity(0)) >= 2:
        env = VLLMServer.from_config(cfg, "/models/m", tmp_path / "l.log", threads=2, cache_root=None).environment()
        assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    assert _bound_cpus("0,1") == 2 and _bound_cpus("0-3") == 4 and _bound_cpus("0-1,4|2-3") == 3
    assert _bound_cpus("auto") is None and _bound_cpus("nobind") is None


def test_watchdog_stops_the_server_when_its_folder_is_deleted(tmp_path):
    """rm -rf of the working directory while the server idles must not leave it running."""
    import json
    import shutil

    a = SharedVLLMServer(FakeServer(tmp_path), state_root=tmp_path / "state", idle_s=600)
    a.acquire(log=lambda m: None)
    pid = json.loads((a.dir / "state.json").read_text())["pid"]
    a.release()
    time.sleep(1.5)  # the watchdog has read the state at least once
    assert _alive(pid)
    shutil.rmtree(tmp_path / "state")
    assert _gone(pid, 10), "the watchdog stops a server whose state folder is gone"


def test_a_block_size_in_extra_args_replaces_the_cpu_default(tmp_path):
    cfg = section_params("generators", {"backend": "vllm", "model": "m", "extra_args": ["--block-size", "64"]})
    srv = VLLMServer.from_config(cfg, "/models/m", tmp_path / "l.log", threads=None, cache_root=None)
    srv.port = 1234
    cmd = srv.command()
    assert cmd.count("--block-size") == 1 and cmd[cmd.index("--block-size") + 1] == "64"


def _probe(code: str, extra_path: str | None = None) -> str:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_cpu_only_torch_build_is_recognised_without_importing_torch():
    code = (
        "import sys; from ragmi.rag.vllm_server import cuda_available, _torch_build_has_gpu;"
        "print(_torch_build_has_gpu(), cuda_available(), 'torch' in sys.modules)"
    )
    assert _probe(code) == "False False False"  # this project's CPU build (2.13.0+cpu)


def test_a_cuda_build_is_recognised_and_then_asked(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "version.py").write_text(
        "from typing import Optional\ncuda: Optional[str] = '12.4'\nhip: Optional[str] = None\n"
    )
    (fake / "__init__.py").write_text("class cuda:\n    @staticmethod\n    def is_available():\n        return True\n")
    code = (
        "import sys; from ragmi.rag.vllm_server import cuda_available, _torch_build_has_gpu;"
        "print(_torch_build_has_gpu(), cuda_available(), 'torch' in sys.modules)"
    )
    assert _probe(code, str(tmp_path)) == "True True True"
    (fake / "version.py").write_text("garbage = (\n")  # unreadable: fall back to importing torch
    assert _probe(code, str(tmp_path)) == "None True True"


def test_the_cpu_server_forks_its_engine_core_unless_told_otherwise(tmp_path, monkeypatch):
    cfg = section_params("generators", {"backend": "vllm", "model": "m"})
    srv = VLLMServer.from_config(cfg, "/models/m", tmp_path / "l.log", threads=None, cache_root=None)
    monkeypatch.delenv("RAGMI_VLLM_ENGINE_START", raising=False)
    assert srv.environment()["RAGMI_VLLM_ENGINE_START"] == "fork"
    monkeypatch.setenv("RAGMI_VLLM_ENGINE_START", "spawn")
    assert srv.environment()["RAGMI_VLLM_ENGINE_START"] == "spawn"  # the user's choice is kept


def test_the_engine_start_method_survives_the_platform_hook(monkeypatch):
    """vLLM-CPU's check_and_update_config sets VLLM_WORKER_MULTIPROC_METHOD=spawn; the wrapper puts
    the asked method back after it, and still runs the hook."""
    from ragmi.rag import vllm_cli

    calls = []

    class Platform:
        @classmethod
        def check_and_update_config(cls, vllm_config):
            calls.append(vllm_config)
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"

    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    Platform.check_and_update_config("cfg")
    assert os.environ["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"  # what vLLM-CPU does on its own
    vllm_cli.keep_engine_start_method(Platform, "fork")
    Platform.check_and_update_config("cfg2")
    assert calls == ["cfg", "cfg2"] and os.environ["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"


def test_an_unknown_engine_start_method_is_one_clear_message():
    from ragmi.rag import vllm_cli

    assert vllm_cli.engine_start_method({}) is None
    assert vllm_cli.engine_start_method({"RAGMI_VLLM_ENGINE_START": "spawn"}) == "spawn"
    with pytest.raises(SystemExit, match="RAGMI_VLLM_ENGINE_START must be one of fork, spawn"):
        vllm_cli.engine_start_method({"RAGMI_VLLM_ENGINE_START": "forkserver"})
