"""Rule campaign_coverage: the evaluator's coverage curves of one campaign (ragmi.analysis.coverage)."""

import pandas as pd

from ragmi.analysis.coverage import META_COLUMNS, campaign_curves
from ragmi.attacks.adaptive import adaptive_class
from ragmi.attacks.models import load_embedder
from ragmi.io import atomic_write_parquet
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    rows = pd.read_parquet(smk.input.rows)
    members = pd.read_parquet(smk.input.members, columns=["doc_id", "text"])
    nonmembers = pd.read_parquet(smk.input.nonmembers, columns=["doc_id", "text"])
    embedder = load_embedder(p.thresholds["embedder"])
    canaries, leaked = [], None
    if p.canary_seed is not None:  # the store's game planted the audit's canaries with the members
        from ragmi.audit.canary_run import canary_exclude, store_canary_experiment

        corpus = pd.read_parquet(smk.input.canary_corpus)
        exp = store_canary_experiment(corpus, canary_exclude(smk), p.canary_seed, p.canary_max_tokens)
        canaries, leaked = exp.canaries, exp.leaked
    curves = campaign_curves(
        rows,
        members,
        nonmembers,
        embedder.encode,
        semantic_threshold=p.thresholds["semantic_threshold"],
        rouge_threshold=p.thresholds["rouge_threshold"],
        canaries=canaries,
        leaked=leaked,
    )
    cls = adaptive_class(smk.wildcards.adaptive)
    key = {
        "dataset": smk.wildcards.dataset,
        "target": smk.wildcards.target,
        "attack": smk.wildcards.adaptive,
        "variant": cls.variant(dict(p.attack), p.retriever_embedder),
        "baseline": bool(cls.baseline),
        "seed": int(smk.wildcards.seed),
        "k": int(p.k),
        "retrieval_known": bool(p.retrieval_known),
    }
    out = curves.assign(**key, **{m: curves.attrs[m] for m in META_COLUMNS})
    atomic_write_parquet(out, smk.output.curves)
    last = curves.iloc[-1]
    retrieved = f"retrieved {int(last['retrieved'])} of" if p.retrieval_known else "(retrieval not reported) on"
    log(
        f"{key['variant']} seed {key['seed']}: {int(last['queries'])} queries {retrieved} "
        f"{curves.attrs['kb_size']} chunks, copied {int(last['extracted_rouge'])} verbatim and "
        f"{int(last['extracted_semantic'])} in meaning (chance: {int(last['chance_rouge'])} and "
        f"{int(last['chance_semantic'])} of {curves.attrs['n_chance']} non-members)"
    )


run_step(snakemake, main)  # noqa: F821
