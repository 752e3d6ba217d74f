"""Rule metrics: thresholds on the reference set, numbers on the evaluation set, costs per target."""
import numpy as np
import pandas as pd

from ragmi.metrics import evaluate
from ragmi.workflow import atomic_write_text, run_step

COST_COLUMNS = ["queries_per_target", "prompt_tokens_per_target", "output_tokens_per_target",
                "target_retrieved_rate", "no_answer_rate"]


def attack_costs(queries: pd.DataFrame, responses: pd.DataFrame, targets: pd.DataFrame) -> dict:
    """Mean queries and tokens spent per target document, and how often a member target was retrieved."""
    df = queries[["query_id", "doc_id"]].merge(responses, on="query_id", how="inner", validate="one_to_one")
    per_doc = df.groupby("doc_id").agg(q=("query_id", "size"), pt=("prompt_tokens", "sum"),
                                       ot=("completion_tokens", "sum"))
    labels = dict(zip(targets["doc_id"], targets["label"]))
    member_rows = df[df["doc_id"].map(labels) == 1]
    hit = [d in set(r) for d, r in zip(member_rows["doc_id"], member_rows["retrieved_ids"])]
    return {
        "queries_per_target": float(per_doc["q"].mean()),
        "prompt_tokens_per_target": float(per_doc["pt"].mean()),
        "output_tokens_per_target": float(per_doc["ot"].mean()),
        "target_retrieved_rate": float(np.mean(hit)) if hit else float("nan"),
    }


def main(smk, log):
    w = smk.wildcards
    scores = pd.read_parquet(smk.input.scores)
    targets = pd.read_parquet(smk.input.targets)
    queries = pd.read_parquet(smk.input.queries)
    responses = pd.concat([pd.read_parquet(f) for f in smk.input.responses], ignore_index=True)
    df = scores.merge(targets[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    cost = attack_costs(queries, responses, targets)
    costs = {}
    for v, g in df.groupby("variant"):
        c = dict(cost)
        if "no_answer" in g:
            c["no_answer_rate"] = float(g.loc[g["role"] == "eval", "no_answer"].astype(float).mean())
        costs[v] = c
    out = evaluate(df, fprs=list(smk.params.fprs), n_boot=int(smk.params.n_boot), seed=int(smk.params.seed),
                   costs=costs)
    out.insert(0, "attack", w.attack)
    out.insert(0, "target", w.target)
    out.insert(0, "dataset", w.dataset)
    atomic_write_text(out.to_csv(index=False, lineterminator="\n"), smk.output.metrics)
    for _, r in out.iterrows():
        log(f"{r['variant']}: AUC {r['auc']:.3f} [{r['auc_lo']:.3f}, {r['auc_hi']:.3f}] "
            f"(n={r['n_members']}/{r['n_nonmembers']})")


run_step(snakemake, main)  # noqa: F821
