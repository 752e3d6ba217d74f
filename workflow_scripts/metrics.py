"""Rule metrics: thresholds on the reference set, numbers on the evaluation set, costs per candidate."""

import pandas as pd

from ragmi.costs import costs_by_variant
from ragmi.metrics import evaluate
from ragmi.workflow import atomic_write_text, read_responses, run_step


def main(smk, log):
    w, p = smk.wildcards, smk.params
    scores = pd.read_parquet(smk.input.scores)
    candidates = pd.read_parquet(smk.input.candidates)
    queries = pd.read_parquet(smk.input.queries)
    responses = read_responses(smk.input.responses)
    materials = pd.read_parquet(smk.input.materials) if "materials" in smk.input.keys() else None
    labels = dict(zip(candidates["doc_id"], candidates["label"], strict=True))
    df = scores.merge(candidates[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    costs = costs_by_variant(df, queries, responses, materials, labels)
    out = evaluate(df, fprs=list(p.fprs), n_boot=int(p.n_boot), seed=int(p.seed), costs=costs)
    for i, (col, val) in enumerate([("dataset", w.dataset), ("target", w.target), ("attack", w.attack)]):
        out.insert(i, col, val)
    out["dataset_source"] = p.dataset_source
    out["generator_model"] = p.generator_model
    atomic_write_text(out.to_csv(index=False, lineterminator="\n"), smk.output.metrics)
    for _, r in out.iterrows():
        log(
            f"{r['variant']}: AUC {r['auc']:.3f} [{r['auc_lo']:.3f}, {r['auc_hi']:.3f}] "
            f"(n={r['n_members']}/{r['n_nonmembers']})"
        )


run_step(snakemake, main)  # noqa: F821
