"""Rule attack_figures: ROC curves and score distributions of one attack on one (dataset, target)."""

import pandas as pd

from ragmi.attacks.base import split_skipped
from ragmi.report.plots import plot_roc, plot_score_distributions
from ragmi.workflow import run_step


def main(smk, log):
    w = smk.wildcards
    scores, _ = split_skipped(pd.read_parquet(smk.input.scores))
    candidates = pd.read_parquet(smk.input.candidates)
    df = scores.merge(candidates[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    plot_roc(df, smk.output.roc, f"{w.attack} on {w.dataset} / {w.target} (evaluation set)")
    plot_score_distributions(df, smk.output.scores, f"{w.attack} scores on {w.dataset} / {w.target}")


run_step(snakemake, main)  # noqa: F821
