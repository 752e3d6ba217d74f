"""Rule attack_figures: ROC curves and score distributions of one attack on one (dataset, target).

The points of a numeric sweep (``dcmi/theta=0.06``, ``dcmi/gamma=0.5``, ``ia/paper/n=3``: a variant whose
name ends in ``=<number>``) are left out when the attack has other variants: DCMI's θ and γ are curves in
results/figures/dcmi_sweep.png, the query budget in results/figures/query_budget.png, instead of one panel
per value here."""

import pandas as pd

from ragmi.attacks.base import split_skipped
from ragmi.report.plots import plot_roc, plot_score_distributions, sweep_point
from ragmi.workflow import run_step


def main(smk, log):
    w = smk.wildcards
    scores, _ = split_skipped(pd.read_parquet(smk.input.scores))
    candidates = pd.read_parquet(smk.input.candidates)
    df = scores.merge(candidates[["doc_id", "label", "role"]], on="doc_id", how="left", validate="many_to_one")
    points = df["variant"].astype(str).map(sweep_point)
    if not points.all():
        left = sorted(df.loc[points, "variant"].astype(str).unique())
        if left:
            log(f"{len(left)} sweep point(s) drawn in the sweep figures instead: {', '.join(left)}")
        df = df[~points]
    plot_roc(df, smk.output.roc, f"{w.attack} on {w.dataset} / {w.target} (evaluation set)")
    plot_score_distributions(df, smk.output.scores, f"{w.attack} scores on {w.dataset} / {w.target}")


run_step(snakemake, main)  # noqa: F821
