"""Rule metrics: thresholds on the reference set, numbers on the evaluation set, costs per target."""
import numpy as np
import pandas as pd

from ragmi.metrics import evaluate
from ragmi.report.comparison import variant_queries
from ragmi.workflow import atomic_write_text, run_step


def query_costs(queries: pd.DataFrame, responses: pd.DataFrame, labels: dict) -> dict:
    """Mean queries and tokens spent per target document, and how often a member target was retrieved."""
    df = queries[["query_id", "doc_id"]].merge(responses, on="query_id", how="inner", validate="one_to_one")
    per_doc = df.groupby("doc_id").agg(q=("query_id", "size"), pt=("prompt_tokens", "sum"),
                                       ot=("completion_tokens", "sum"))
    n_targets = len(labels)  # documents without any query (e.g. no usable question) spent nothing
    member_rows = df[df["doc_id"].map(labels) == 1]
    hit = [d in set(r) for d, r in zip(member_rows["doc_id"], member_rows["retrieved_ids"])]
    return {
        "queries_per_target": float(per_doc["q"].sum() / n_targets),
        "prompt_tokens_per_target": float(per_doc["pt"].sum() / n_targets),
        "output_tokens_per_target": float(per_doc["ot"].sum() / n_targets),
        "target_retrieved_rate": float(np.mean(hit)) if hit else float("nan"),
    }


def offline_costs(materials: pd.DataFrame | None, n_targets: int) -> dict:
    """Attacker-LLM tokens spent per target in offline query generation, and its failure rate."""
    if materials is None or materials.empty:
        return {}
    out = {}
    tok = [c for c in ("llm_prompt_tokens", "llm_completion_tokens") if c in materials]
    if tok:
        out["attacker_llm_tokens_per_target"] = float(materials[tok].fillna(0).to_numpy().sum() / n_targets)
    for col in ("parse_failed", "llm_failure"):
        if col in materials:
            failed = materials.groupby("doc_id")[col].apply(lambda s: bool(s.fillna(False).astype(bool).any()))
            out["prepare_failure_rate"] = float(failed.sum() / n_targets)
            break
    return out


def main(smk, log):
    w, p = smk.wildcards, smk.params
    scores = pd.read_parquet(smk.input.scores)
    targets = pd.read_parquet(smk.input.targets)
    queries = pd.read_parquet(smk.input.queries)
    responses = pd.concat([pd.read_parquet(f) for f in smk.input.responses], ignore_index=True)
    materials = pd.read_parquet(smk.input.materials) if "materials" in smk.input.keys() else None
    labels = dict(zip(targets["doc_id"], targets["label"]))
    df = scores.merge(targets[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    offline = offline_costs(materials, len(targets))
    costs = {}
    for v, g in df.groupby("variant"):
        c = query_costs(variant_queries(queries, v), responses, labels)
        if "no_answer" in g:
            c["no_answer_rate"] = float(g.loc[g["role"] == "eval", "no_answer"].astype(float).mean())
        costs[v] = {**c, **offline}
    out = evaluate(df, fprs=list(p.fprs), n_boot=int(p.n_boot), seed=int(p.seed), costs=costs)
    for i, (col, val) in enumerate([("dataset", w.dataset), ("target", w.target), ("attack", w.attack)]):
        out.insert(i, col, val)
    out["dataset_source"] = p.dataset_source
    out["generator_model"] = p.generator_model
    atomic_write_text(out.to_csv(index=False, lineterminator="\n"), smk.output.metrics)
    for _, r in out.iterrows():
        log(f"{r['variant']}: AUC {r['auc']:.3f} [{r['auc_lo']:.3f}, {r['auc_hi']:.3f}] "
            f"(n={r['n_members']}/{r['n_nonmembers']})")


run_step(snakemake, main)  # noqa: F821
