"""Rule roc_all_attacks: one ROC figure with every attack's headline variants on a (dataset, target)."""

import pandas as pd

from ragmi.attacks.base import split_skipped
from ragmi.report.comparison import is_main_variant
from ragmi.report.plots import plot_roc
from ragmi.workflow import run_step


def main(smk, log):
    w = smk.wildcards
    candidates = pd.read_parquet(smk.input.candidates)
    scores = pd.concat([split_skipped(pd.read_parquet(f))[0] for f in smk.input.scores], ignore_index=True)
    scores = scores[scores["variant"].map(is_main_variant)]
    df = scores.merge(candidates[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    plot_roc(df, smk.output.roc, f"All attacks on {w.dataset} / {w.target} (evaluation set)")
    log(f"{df['variant'].nunique()} variants")


run_step(snakemake, main)  # noqa: F821
