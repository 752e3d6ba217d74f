"""AVX2-only code paths on an AVX-512 CPU, for sizing runs (benchmarks/avx2/run.sh sets it up).

Imported by every Python process of the run when this folder is on ``PYTHONPATH`` and
``RAGMI_EMULATE_AVX2=1``.  The math libraries are capped by environment variables (oneDNN, ATen,
MKL, OpenBLAS: set by run.sh); what no variable reaches is vLLM-CPU's choice of its kernel library,
which asks ``torch.cpu._is_avx512_supported()`` (vllm/platforms/cpu.py ``import_kernels``): this
module makes torch's AVX-512 probes answer False as soon as ``torch.cpu`` is imported, so vLLM loads
``vllm._C_AVX2`` as it does on an AVX2-only CPU.

It changes the instructions, not the machine: clock, caches and memory stay those of this CPU.
"""

import importlib.abc
import importlib.machinery
import os
import sys

AVX512_PROBES = (
    "_is_avx512_supported",
    "_is_avx512_bf16_supported",
    "_is_avx512_vnni_supported",
    "_is_vnni_supported",
    "_is_amx_tile_supported",
    "_is_amx_fp16_supported",
)


def _patch(module) -> None:
    for name in AVX512_PROBES:
        if hasattr(module, name):
            setattr(module, name, lambda: False)


class _PatchTorchCpu(importlib.abc.MetaPathFinder):
    """Runs ``_patch`` on ``torch.cpu`` right after the module executes."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.cpu":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        inner = spec.loader

        class Loader(importlib.abc.Loader):
            def create_module(self, s):
                return inner.create_module(s)

            def exec_module(self, module):
                inner.exec_module(module)
                _patch(module)

        spec.loader = Loader()
        return spec


if os.environ.get("RAGMI_EMULATE_AVX2") == "1":
    sys.meta_path.insert(0, _PatchTorchCpu())
