"""Figures over attack scores: ROC curves and member / non-member score distributions.

Both functions draw the ``eval`` rows of a scores frame (see :mod:`ragmi.metrics`), accept 1 to 20
variants, are deterministic (same input, same PNG bytes), use dpi 120, and write atomically: the
PNG is rendered to a temporary file in the target directory and moved into place with
``os.replace``, so a crash never leaves a half-written figure.

The ROC figure has a linear panel and a log-log panel of the low-FPR region, where membership
inference is judged (TPR at low FPR, Carlini et al. 2022, as used in RAG-MIA §5).
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ragmi.io import atomic_path  # noqa: E402
from ragmi.metrics import check_scores_frame, roc_auc, roc_points  # noqa: E402

DPI = 120
MAX_VARIANTS = 20
_LINESTYLES = ["-", "--", "-.", ":"]
# PNG metadata without the matplotlib version, so bytes do not change with the library build.
_PNG_METADATA = {"Software": None}


def _eval_variants(scores_df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    df = check_scores_frame(scores_df)
    df = df[df["role"] == "eval"]
    variants = sorted(df["variant"].unique())
    if not variants:
        raise ValueError("no eval rows to plot")
    if len(variants) > MAX_VARIANTS:
        raise ValueError(f"at most {MAX_VARIANTS} variants per figure, got {len(variants)}")
    for v in variants:
        labels = df.loc[df["variant"] == v, "label"]
        if (labels == 1).sum() == 0 or (labels == 0).sum() == 0:
            raise ValueError(f"variant {v!r}: the eval set needs members and non-members")
    return df, variants


def _color(i: int, n: int):
    cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
    return cmap(i % cmap.N)


def _is_black_box(sub: pd.DataFrame) -> bool:
    """A point attack: hard decisions and a score with no more than two values (Yes/No)."""
    return bool(sub["decision"].notna().any()) and sub["score"].nunique() <= 2


def _save_atomic(fig: Figure, out_png: str | os.PathLike) -> None:
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata=_PNG_METADATA)


def plot_roc(scores_df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """ROC curves of every variant on the eval rows: linear panel and log-log low-FPR panel.

    Score-based variants are drawn as curves, labelled with their AUC.  Black-box point attacks
    (``decision`` given) are drawn as one marker at the (FPR, TPR) of their hard decision.  On the
    log panel rates of 0 are drawn at the floor ``1 / (2 n)`` (n = the largest class size).
    """
    df, variants = _eval_variants(scores_df)
    class_sizes = df.groupby(["variant", "label"]).size()
    floor = 1.0 / (2 * int(class_sizes.max()))

    fig = Figure(figsize=(11, 5))
    ax_lin, ax_log = fig.subplots(1, 2)
    ax_lin.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls=":", label="chance")
    ax_log.plot([floor, 1], [floor, 1], color="0.6", lw=0.8, ls=":")

    for i, v in enumerate(variants):
        sub = df[df["variant"] == v]
        y = sub["label"].to_numpy(int)
        color = _color(i, len(variants))
        auc = roc_auc(y, sub["score"].to_numpy(float))
        if _is_black_box(sub):
            dec = sub["decision"].to_numpy(float)
            tpr = float(np.nanmean(dec[y == 1]))
            fpr = float(np.nanmean(dec[y == 0]))
            label = f"{v} (point: TPR {tpr:.2f}, FPR {fpr:.2f}; AUC {auc:.2f})"
            ax_lin.plot([fpr], [tpr], marker="o", ms=7, ls="none", color=color, label=label)
            ax_log.plot([max(fpr, floor)], [max(tpr, floor)], marker="o", ms=7, ls="none", color=color)
        else:
            fpr_c, tpr_c = roc_points(y, sub["score"].to_numpy(float))
            ls = _LINESTYLES[i % len(_LINESTYLES)]
            ax_lin.plot(fpr_c, tpr_c, color=color, ls=ls, lw=1.4, label=f"{v} (AUC {auc:.2f})")
            ax_log.plot(np.maximum(fpr_c, floor), np.maximum(tpr_c, floor), color=color, ls=ls, lw=1.4)

    ax_lin.set(
        xlim=(0, 1),
        ylim=(0, 1.01),
        xlabel="false-positive rate",
        ylabel="true-positive rate",
        title="ROC (evaluation set)",
    )
    ax_log.set(
        xscale="log",
        yscale="log",
        xlim=(floor, 1),
        ylim=(floor, 1.05),
        xlabel=f"false-positive rate (log; 0 drawn at {floor:.2g})",
        ylabel="true-positive rate (log)",
        title="low-FPR region",
    )
    for ax in (ax_lin, ax_log):
        ax.grid(True, which="major", lw=0.4, alpha=0.5)
    ax_lin.legend(loc="lower right", fontsize=7 if len(variants) <= 6 else 6, framealpha=0.9)
    fig.suptitle(title)
    fig.tight_layout()
    _save_atomic(fig, out_png)


def plot_score_distributions(scores_df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """One panel per variant: histograms of member vs non-member eval scores, shared bins."""
    df, variants = _eval_variants(scores_df)
    ncols = min(4, len(variants))
    nrows = math.ceil(len(variants) / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.7 * nrows + 0.6))
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()

    for ax, v in zip(axes, variants):
        sub = df[df["variant"] == v]
        s = sub["score"].to_numpy(float)
        y = sub["label"].to_numpy(int)
        lo, hi = float(s.min()), float(s.max())
        if hi <= lo:  # a constant score: one bin around it
            lo, hi = lo - 0.5, hi + 0.5
        bins = np.linspace(lo, hi, min(30, max(5, int(np.sqrt(s.size)) + 1)) + 1)
        ax.hist(s[y == 0], bins=bins, alpha=0.55, color="tab:blue", label=f"non-members (n={(y == 0).sum()})")
        ax.hist(s[y == 1], bins=bins, alpha=0.55, color="tab:red", label=f"members (n={(y == 1).sum()})")
        ax.set_title(v, fontsize=8)
        ax.set_xlabel("score", fontsize=7)
        ax.set_ylabel("documents", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper right")
    for ax in axes[len(variants) :]:
        ax.set_visible(False)
    fig.suptitle(f"{title} (evaluation set)")
    fig.tight_layout()
    _save_atomic(fig, out_png)


def plot_query_budget(budget_df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """AUC (with its 95% interval) against the number of questions per candidate, one line per
    (dataset, target, method) of :func:`ragmi.report.comparison.query_budget_frame`."""
    if budget_df.empty:
        raise ValueError("no query-budget variants to plot")
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    groups = list(budget_df.groupby(["dataset", "target", "method"], sort=True))
    for i, ((ds, tg, method), g) in enumerate(groups):
        g = g.sort_values("n_questions")
        err = [g["auc"] - g["auc_lo"], g["auc_hi"] - g["auc"]]
        ax.errorbar(
            g["n_questions"],
            g["auc"],
            yerr=err,
            marker="o",
            capsize=3,
            color=_color(i, len(groups)),
            label=f"{method} ({ds} / {tg})",
        )
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ticks = sorted(budget_df["n_questions"].unique())
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("questions per candidate")
    ax.set_ylabel("AUC (evaluation set, 95% CI)")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    _save_atomic(fig, out_png)
