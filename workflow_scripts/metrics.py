"""Rule metrics: thresholds on the reference set, numbers on the evaluation set, costs per candidate, and
per query whether the candidate's own document was retrieved (the TPR conditional on retrieval)."""

import pandas as pd

from ragmi.attacks.base import SKIPPED_COLUMN, split_skipped
from ragmi.costs import costs_by_variant, query_retrieval, retrieved_by_variant
from ragmi.io import atomic_write_parquet, atomic_write_text
from ragmi.metrics import evaluate, retrieved_tpr
from ragmi.workflow import control_responses, read_responses, run_step


def main(smk, log):
    w, p = smk.wildcards, smk.params
    scores, skipped = split_skipped(pd.read_parquet(smk.input.scores))
    candidates = pd.read_parquet(smk.input.candidates)
    queries = pd.read_parquet(smk.input.queries)
    responses = read_responses(smk.input.responses)
    if "fit_responses" in smk.input.keys():  # a negative control: as its scores (rule score)
        responses = control_responses(read_responses(smk.input.fit_responses), responses, queries, candidates)
    materials = pd.read_parquet(smk.input.materials) if "materials" in smk.input.keys() else None
    labels = dict(zip(candidates["doc_id"], candidates["label"], strict=True))
    df = scores.merge(candidates[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    costs = costs_by_variant(df, queries, responses, materials, labels)
    out = evaluate(df, fprs=list(p.fprs), n_boot=int(p.n_boot), costs=costs)
    flags = query_retrieval(queries, responses)
    atomic_write_parquet(flags, smk.output.retrieval)
    out = pd.concat([out, retrieved_tpr(df, out, retrieved_by_variant(df, queries, flags), list(p.fprs))], axis=1)
    for i, (col, val) in enumerate([("dataset", w.dataset), ("target", w.target), ("attack", w.attack)]):
        out.insert(i, col, val)
    if len(skipped):  # variants not computed (a target without log-probabilities): a row with the note
        out = pd.concat(
            [out, skipped[["variant", SKIPPED_COLUMN]].assign(dataset=w.dataset, target=w.target, attack=w.attack)],
            ignore_index=True,
        )
        for v, why in zip(skipped["variant"], skipped[SKIPPED_COLUMN]):
            log(f"{v}: {why}")
    out["dataset_source"] = p.dataset_source
    out["generator_model"] = p.generator_model
    atomic_write_text(out.to_csv(index=False, lineterminator="\n"), smk.output.metrics)
    for _, r in out.iterrows():
        if SKIPPED_COLUMN in out and pd.notna(r[SKIPPED_COLUMN]):
            continue
        log(
            f"{r['variant']}: AUC {r['auc']:.3f} [{r['auc_lo']:.3f}, {r['auc_hi']:.3f}] "
            f"(n={r['n_members']}/{r['n_nonmembers']})"
        )


run_step(snakemake, main)  # noqa: F821
