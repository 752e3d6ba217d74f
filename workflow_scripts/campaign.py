"""Rule campaign: one adaptive extraction campaign (an attack, a target, a seed) under its query budget,
checkpointed after every round (ragmi.campaign; docs/campaigns.md)."""

import contextlib
import json

from ragmi.attacker_tools import attacker_tools
from ragmi.attacks.adaptive import get_adaptive
from ragmi.campaign import clear_checkpoint, run_campaign
from ragmi.io import atomic_write_parquet
from ragmi.targets import target_kind
from ragmi.workflow import run_step, target_spec


def main(smk, log):
    p = smk.params
    c = p.campaign
    spec = target_spec(smk)
    params = dict(p.attack)
    attack = get_adaptive(smk.wildcards.adaptive, params, seed=int(smk.wildcards.seed), validated=True)
    if attack.embedder_param and params.get(attack.embedder_param) == "target":
        params[attack.embedder_param] = p.retriever_embedder  # white box: the retriever's own embedder
        attack.params = params
    fingerprint = json.dumps(
        {
            "attack": smk.wildcards.adaptive,
            "params": params,
            "seed": int(smk.wildcards.seed),
            "budget": c["budget"],
            "batch": c["batch"],
            "max_tokens": c["max_tokens"],
            "target": {k: v for k, v in dict(p.spec).items() if k not in ("server_log", "defender_server_log")},
        },
        sort_keys=True,
        default=str,
    )
    state_dir = smk.output.rows + ".state"
    log(f"campaign {smk.wildcards.adaptive} (seed {smk.wildcards.seed}) on target {spec.name}: {c['budget']} queries")
    with contextlib.ExitStack() as stack:
        tools = _tools(stack, smk, attack, log)
        attack.start(tools)
        rag = stack.enter_context(target_kind(spec.target).open(spec, smk.input, log))
        tag = f"{smk.wildcards.adaptive}-s{smk.wildcards.seed}"

        w = smk.wildcards
        where = f"campaigns/{w.dataset}/{w.target}/{w.adaptive}/seed{w.seed}"

        def ask(queries, first):
            n = len(queries)
            ids = [f"{tag}-{first + i}" for i in range(n)]
            log.progress_label = f"{where}/round{first // c['batch'] + 1}"  # each round's answers counted apart
            try:
                return rag.answer(queries, [c["max_tokens"]] * n, [0] * n, ids)
            finally:
                log.progress_label = None

        rows = run_campaign(
            attack, ask, budget=c["budget"], batch=c["batch"], state_dir=state_dir, fingerprint=fingerprint, log=log
        )
    atomic_write_parquet(rows, smk.output.rows)
    clear_checkpoint(state_dir)
    log(f"wrote {len(rows)} queries and answers ({int(rows['cached'].sum())} from the cache)")


def _tools(stack, smk, attack, log):
    """The attacker LLM when the attack writes with it, else a logger."""
    p = smk.params
    if not attack.uses_llm:
        return _LogOnly(log)
    model_dir = smk.input.attacker_model if "attacker_model" in smk.input.keys() else None
    return stack.enter_context(
        attacker_tools(
            dict(p.attacker), model_dir, p.cache_dir, smk.threads, p.attacker_log, int(smk.wildcards.seed), log
        )
    )


class _LogOnly:
    def __init__(self, log):
        self.log = log

    def chat(self, *a, **k):
        raise RuntimeError("this attack declares no attacker LLM (uses_llm)")


run_step(snakemake, main)  # noqa: F821
