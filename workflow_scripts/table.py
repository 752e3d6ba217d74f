"""Rule *_table: gather per-(dataset, target) metrics into one CSV + Markdown table."""
import pandas as pd

from ragmi.report.tables import write_tables
from ragmi.workflow import run_step

EXTRA = ["queries_per_target", "prompt_tokens_per_target", "output_tokens_per_target",
         "target_retrieved_rate", "no_answer_rate"]

NOTES = {
    "rag_mia": [
        "black = Yes/No parsed from the answer text (single ROC point; TPR/FPR columns); "
        "gray = ensemble of attack models on first-token Yes/No logits (RAG-MIA §3), trained on the reference "
        "set with out-of-fold reference scores; gray-pyes = P(Yes)/(P(Yes)+P(No)) without training.",
        "no_answer_rate = share of evaluation answers with neither Yes nor No (counted as non-member, RAG-MIA "
        "Appendix C); target_retrieved_rate = share of member targets whose own document was retrieved "
        "(RAG-MIA Appendix B).",
    ],
}


def main(smk, log):
    df = pd.concat([pd.read_csv(f) for f in smk.input.metrics], ignore_index=True)
    attack = smk.rule.removesuffix("_table")
    title = {"rag_mia": "RAG-MIA (Anderson et al.): black- and gray-box membership inference"}.get(attack, attack)
    write_tables(df, smk.output.csv, smk.output.md, title, extra_columns=[c for c in EXTRA if c in df],
                 notes=NOTES.get(attack))
    log(f"table with {len(df)} rows")


run_step(snakemake, main)  # noqa: F821
