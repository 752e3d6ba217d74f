"""Rule epsilon_sensitivity: the sensitivity Δ of each DP retrieval defense of one attacked target,
measured on its retriever (the evaluator's side: it reads the index and the non-members, which attacks
never see)."""

import pandas as pd

from ragmi.defenses import build_defense
from ragmi.epsilon_audit import has_trial
from ragmi.epsilon_sensitivity import SENSITIVITY_COLUMNS, attack_turns, measure_target
from ragmi.io import atomic_write_parquet
from ragmi.rag.index import Retriever, RetrieverSpec
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    defenses = {n: build_defense(n, spec, validated=True) for n, spec in p.defenses.items()}
    defenses = {n: d for n, d in defenses.items() if has_trial(d)}
    frames = [pd.read_parquet(f) for f in smk.input.queries]
    queries = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["query_id", "user_prompt"])
    retriever = Retriever(smk.input.index, RetrieverSpec.from_validated(p.retriever), p.embedding_cache_dir)
    rows = measure_target(
        retriever,
        queries,
        pd.read_parquet(smk.input.nonmembers),
        defenses,
        int(p.k),
        bool(p.with_titles),
        int(p.max_queries),
        int(p.max_added),
        turns=attack_turns(frames),
    )
    df = pd.DataFrame(rows)
    df.insert(0, "target", smk.wildcards.target)
    df.insert(0, "dataset", smk.wildcards.dataset)
    atomic_write_parquet(df.reindex(columns=SENSITIVITY_COLUMNS), smk.output.sensitivity)
    for r in df.to_dict("records"):
        log(
            f"{r['defense']}: Δ measured {r.get('delta_measured')} (L1 over the top {r['noised']}; declared "
            f"{defenses[r['defense']].params['sensitivity']}) over {r['n_queries']} queries, {r['n_docs']} documents; "
            f"T = {r['turns']} {r['note']}"
        )


run_step(snakemake, main)  # noqa: F821
