"""What this machine computes natively, and the one rule for a generator's ``dtype: auto``.

``dtype: auto`` (:func:`choose_dtype`):

* on a GPU: the checkpoint's own dtype, as vLLM and transformers read ``auto`` themselves (Qwen2.5's and
  SmolLM2's checkpoints are bf16, so a GPU serves them in bf16, as a user deploys them);
* on a CPU: ``float32``.  A CPU with AMX (``amx_bf16``) or AVX-512 BF16 (``avx512_bf16``) computes bf16
  natively, 2-5x as fast per model job (benchmarks/README.md), but bf16 has moved verdicts of borderline
  cells (docs/provenance.md), and whether it moves any beyond what the candidates' sampling allows has
  not been measured on such a CPU with ``benchmarks/precision.py`` (ragmi.precision_audit): until it has,
  ``auto`` keeps float32 there, and the run record says that the CPU could compute bf16.  A user who
  wants the speed sets ``dtype: bfloat16`` and can compare the two runs with that benchmark.

An explicit dtype (``float32``, ``bfloat16``, ``float16``) is used as written.  An ``openai`` endpoint
serves in whatever precision its operator chose, so ragmi chooses nothing there.  Every place that
starts a model (``rag.vllm_server``, ``rag.factory``'s transformers backend, ``rag.frameworks.spring``)
and the response cache's identity (``rag.generators.generator_model_id``) ask :func:`choose_dtype`;
the run record (``results/run.json``, the results page's provenance) names the choice, why, and the
native-bf16 flags the CPU has.

This module sits on the bottom floor: it imports nothing of ragmi's.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# CPU flags (as /proc/cpuinfo names them) with which a CPU computes bf16 products natively
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> frozenset[str]:
    """The first CPU's flags from ``/proc/cpuinfo`` (``flags`` on x86, ``Features`` on Arm); empty off Linux."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def _torch_build_has_gpu() -> bool | None:
    """What ``torch/version.py`` says of the installed build without importing torch (2 s here, in
    every generate job that only talks to a running server): False for a build with neither CUDA nor
    ROCm (such as ``2.13.0+cpu``), True for one with either, None when the file cannot be read."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return None
        tree = ast.parse((Path(spec.submodule_search_locations[0]) / "version.py").read_text())
    except (OSError, ValueError, SyntaxError, ImportError):
        return None
    found = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and isinstance(node.value, ast.Constant):
            found[target.id] = node.value.value
    if set(found) != {"cuda", "hip"}:
        return None
    return any(v is not None for v in found.values())


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """Whether torch sees a GPU (CUDA or ROCm); False with a CPU-only torch build, without importing it."""
    if _torch_build_has_gpu() is False:
        return False  # a CPU-only torch build: no need to import torch to know
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # torch missing or broken: treat as CPU
        return False


@dataclass(frozen=True)
class DtypeChoice:
    """What a generator computes in: ``dtype`` is what the engine is given (``auto`` on a GPU: the
    checkpoint's), ``reason`` says why in words, ``flags`` are the native-bf16 flags the CPU has."""

    requested: str
    backend: str
    dtype: str
    reason: str
    gpu: bool
    flags: tuple[str, ...]

    @property
    def cache_token(self) -> str:
        """The precision's part of the response cache's identity.

        Answers cached before this rule existed were keyed by the config's word ``auto``, which then
        meant float32 on a CPU (both backends), the checkpoint's dtype for vLLM on a GPU and float32 for
        transformers on a GPU; where ``auto`` still computes that precision the token stays ``auto``, so
        those answers are served, and where it now computes another the token names it, so they are not."""
        if self.requested != "auto" or self.backend == "openai":
            return self.requested
        legacy = "auto" if (self.backend == "vllm" and self.gpu) else "float32"
        if self.dtype == legacy:
            return "auto"
        return "checkpoint" if self.dtype == "auto" else self.dtype

    def as_record(self) -> dict:
        return {
            "requested": self.requested,
            "backend": self.backend,
            "dtype": "the checkpoint's" if self.dtype == "auto" else self.dtype,
            "reason": self.reason,
            "gpu": self.gpu,
            "native_bf16_flags": list(self.flags),
        }


def choose_dtype(
    requested: str, backend: str, *, gpu: bool | None = None, flags: Iterable[str] | None = None
) -> DtypeChoice:
    """The one rule for ``dtype`` (module docstring); ``gpu`` and ``flags`` default to this machine's."""
    gpu = cuda_available() if gpu is None else bool(gpu)
    have = cpu_flags() if flags is None else frozenset(flags)
    native = tuple(f for f in NATIVE_BF16_FLAGS if f in have)
    if backend == "openai":
        return DtypeChoice(
            requested, backend, requested, "an external endpoint computes in its own precision", gpu, native
        )
    if requested != "auto":
        return DtypeChoice(requested, backend, requested, f"set in the config (dtype: {requested})", gpu, native)
    if gpu:
        return DtypeChoice(requested, backend, "auto", "auto on a GPU: the checkpoint's dtype", gpu, native)
    return DtypeChoice(
        requested,
        backend,
        "float32",
        (
            f"auto on a CPU: float32 (this CPU computes bf16 natively ({', '.join(native)}), but bf16's effect "
            "on the verdicts is not audited on it: dtype: bfloat16 and benchmarks/precision.py compare the two)"
            if native
            else "auto on a CPU without amx_bf16 or avx512_bf16 (bf16 would be converted to fp32 for every product)"
        ),
        gpu,
        native,
    )
