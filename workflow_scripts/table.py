"""Rules *_table: gather per-(dataset, target, attack) metrics into one CSV + Markdown table."""
import pandas as pd

from ragmi.report.comparison import comparison_frame, dcmi_ablation_frame, load_published, query_budget_frame
from ragmi.report.plots import plot_query_budget
from ragmi.report.tables import write_tables
from ragmi.workflow import run_step

COSTS = ["queries_per_target", "prompt_tokens_per_target", "output_tokens_per_target",
         "attacker_llm_tokens_per_target", "target_retrieved_rate", "no_answer_rate"]

TITLES = {
    "rag_mia": "RAG-MIA (Anderson et al.): black- and gray-box membership inference",
    "attack_comparison": "Attack comparison: every attack on every dataset × target",
    "dcmi_ablation": "DCMI ablation (DCMI Fig. 9): with/without calibration, θ sweep, γ sweep",
    "query_budget": "Query budget: IA vs MEntA as the number of questions per target grows",
}

NOTES = {
    "rag_mia": [
        "black = Yes/No parsed from the answer text (single ROC point; TPR/FPR columns); "
        "gray = ensemble of attack models on first-token Yes/No logits (RAG-MIA §3), trained on the reference "
        "set with out-of-fold reference scores; gray-pyes = P(Yes)/(P(Yes)+P(No)) without training.",
        "no_answer_rate = share of evaluation answers with neither Yes nor No (counted as non-member, RAG-MIA "
        "Appendix C); target_retrieved_rate = share of member targets whose own document was retrieved "
        "(RAG-MIA Appendix B).",
    ],
    "attack_comparison": [
        "One row per attack's headline variant; sweeps and ablations are in dcmi_ablation and query_budget.",
        "menta/similarity is MEntA's similarity ablation (cosine ≥ 0.7 with the embedder), not its NLI "
        "entailment scorer: no NLI model installs offline here; menta/nli appears when configured.",
        "published = the paper's number for the same dataset, generator model and variant (config/published.yaml); "
        "note = where the numbers show the attack carries no information in this setting.",
        "Costs are per target document: queries sent to the target, prompt and output tokens of those queries, "
        "and attacker-LLM tokens spent once in offline query generation.",
    ],
    "dcmi_ablation": [
        "calibration: dcmi/adv1 (calibrated, θ and γ chosen on the reference set), dcmi/adv2 (θ = 0.06, "
        "threshold = Q3 of reference non-members) and dcmi/calibration=none (P(Yes) of the original query).",
        "theta=…: calibrated score at that perturbation magnitude; its hard decision uses the γ chosen on the "
        "reference set. gamma=…: calibrated score at θ = 0.06 with the decision C > γ, shown in the BB TPR / "
        "BB FPR columns (AUC and the accuracy column are threshold-free / reference-thresholded, so they do "
        "not move with γ).",
    ],
    "query_budget": [
        "n_questions = the first n questions asked per target (the same questions at every budget); "
        "queries/target and tokens/target are the cost of that budget.",
    ],
}


def main(smk, log):
    kind = smk.params.kind
    df = pd.concat([pd.read_csv(f) for f in smk.input.metrics], ignore_index=True)
    extra = [c for c in COSTS if c in df]
    if kind == "attack_comparison":
        df = comparison_frame(df, load_published(smk.input.published))
        extra = extra + ["published", "note"]
    elif kind == "rag_mia":
        df = comparison_frame(df, load_published(smk.input.published)).drop(columns="note")
        extra = extra + ["published"]
    elif kind == "dcmi_ablation":
        df = dcmi_ablation_frame(df)
    elif kind == "query_budget":
        df = query_budget_frame(df)
        plot_query_budget(df, smk.output.png, TITLES[kind])
    df = df.fillna({c: "" for c in ("published", "note") if c in df})
    write_tables(df, smk.output.csv, smk.output.md, TITLES[kind], extra_columns=extra, notes=NOTES[kind])
    log(f"{kind}: {len(df)} rows")


run_step(snakemake, main)  # noqa: F821
