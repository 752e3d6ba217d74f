"""fp32 against bf16 for the served generator on this CPU: throughput and whether the answers agree.

Workload: ``--n-requests`` RAG-MIA queries in the paper's template (``ragmi.rag.templates``:
question, two retrieved documents, question again), half asking about a sentence of one of the two
documents, half about a sentence of another document, over a compact synthetic corpus; 16 new
tokens, greedy, top-5 log-probabilities of every token, all requests in flight at once, as a generate
job sends them.  Each dtype gets its own vLLM server (``ragmi.rag.vllm_server.VLLMServer``, ragmi's
CPU settings) and is measured ``--rounds`` times, the dtypes alternating, so that a background load
falls on both alike.

Prints, per round and dtype, the start-up time, the wall time of the batch and prompt tokens per
second, and at the end:
    bf16_vs_fp32: X            (median prompt tokens/s of bf16 / fp32)
    same_answers: a/n           (identical answer texts)
    same_yes_no: a/n            (the same first Yes/No decision)
    max_first_token_logprob_diff: d   (over tokens both top-5 lists hold)

Run: ``.venv/bin/python benchmarks/dtype.py [--model qwen2.5-coder-0.5b-instruct] [--n-requests 40]``;
benchmarks/README.md has the measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def prompts(n: int, seed: int) -> list[list[dict]]:
    import random

    from ragmi.datasets import load_corpus
    from ragmi.rag.templates import get_template

    docs, _ = load_corpus("bench", {"source": "synthetic", "n_docs": max(3 * n, 60), "length": "compact"}, seed)
    texts = docs["text"].tolist()
    rng = random.Random(seed)
    template = get_template("rag_mia")
    out = []
    for i in range(n):
        a, b, other = texts[3 * i], texts[3 * i + 1], texts[3 * i + 2]
        asked = (a if i % 2 == 0 else other).split(". ")[0]
        ctx = template.doc_separator.join(rng.sample([a, b], 2))
        question = f'Does this: "{asked}" appear in the context? Answer with Yes or No'
        out.append([{"role": "user", "content": template.user.format(question=question, context=ctx)}])
    return out


def ask(base_url: str, model: str, messages: list[dict]) -> dict:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": 16,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": 5,
    }
    req = urllib.request.Request(
        base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def serve_and_measure(model_dir: str, served: str, dtype: str, batch: list[list[dict]], log_dir: Path) -> dict:
    from ragmi.rag.vllm_server import VLLMServer

    server = VLLMServer(
        model_dir,
        served,
        log_dir / f"{dtype}.log",
        dtype=dtype,
        max_model_len=2048,
        extra_args=[],
        startup_timeout=900,
        threads=None,
        cache_root=str(log_dir / "vllm-cache"),
    )
    t0 = time.perf_counter()
    proc = server.spawn(log=lambda m: print(m, file=sys.stderr))
    try:
        while not server.ready():
            if proc.poll() is not None:
                raise SystemExit(f"vLLM ({dtype}) exited: {server.log_tail()}")
            time.sleep(0.5)
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        with ThreadPoolExecutor(len(batch)) as pool:
            answers = list(pool.map(lambda m: ask(server.base_url, served, m), batch))
        wall = time.perf_counter() - t1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    prompt_tokens = sum(a["usage"]["prompt_tokens"] for a in answers)
    return {
        "dtype": dtype,
        "startup_s": startup,
        "wall_s": wall,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": prompt_tokens / wall,
        "texts": [a["choices"][0]["message"]["content"] for a in answers],
        "first_top": [
            {t["token"]: t["logprob"] for t in a["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
            for a in answers
        ],
    }


def yes_no(text: str) -> str:
    word = text.strip().split()[0].strip(".,!:").lower() if text.strip() else ""
    return word if word in ("yes", "no") else "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="a packaged model (ragmi.models)")
    ap.add_argument("--n-requests", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    a = ap.parse_args()

    from ragmi.models import cache_packaged_conversion

    model_dir = str(cache_packaged_conversion(a.model))
    batch = prompts(a.n_requests, a.seed)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for dtype in ("float32", "bfloat16") if r % 2 == 0 else ("bfloat16", "float32"):
                m = serve_and_measure(model_dir, a.model, dtype, batch, Path(tmp))
                m["round"] = r
                runs.append(m)
                print(
                    f"round {r} {dtype}: start-up {m['startup_s']:.1f} s, batch {m['wall_s']:.1f} s, "
                    f"{m['prompt_tokens_per_s']:.0f} prompt tokens/s",
                    flush=True,
                )
    fp32 = [m for m in runs if m["dtype"] == "float32"]
    bf16 = [m for m in runs if m["dtype"] == "bfloat16"]
    ratio = statistics.median(m["prompt_tokens_per_s"] for m in bf16) / statistics.median(
        m["prompt_tokens_per_s"] for m in fp32
    )
    ta, tb = fp32[0]["texts"], bf16[0]["texts"]
    diffs = [
        abs(pa[t] - pb[t]) for pa, pb in zip(fp32[0]["first_top"], bf16[0]["first_top"]) for t in set(pa) & set(pb)
    ]
    print(f"bf16_vs_fp32: {ratio:.2f}")
    print(f"same_answers: {sum(x == y for x, y in zip(ta, tb))}/{len(ta)}")
    print(f"same_yes_no: {sum(yes_no(x) == yes_no(y) for x, y in zip(ta, tb))}/{len(ta)}")
    print(f"max_first_token_logprob_diff: {max(diffs):.3f}")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"cpu": platform.processor() or platform.machine(), "runs": runs, "bf16_vs_fp32": ratio}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
