"""Figures over attack scores: ROC curves and member / non-member score distributions.

Both functions draw the ``eval`` rows of a scores frame (see :mod:`ragmi.metrics`), accept 1 to 20
variants, are deterministic (same input, same PNG bytes), use dpi 120, and write atomically: the
PNG is rendered to a temporary file in the target directory and moved into place with
``os.replace``, so a crash never leaves a half-written figure.

The ROC figure has a linear panel and a log-log panel of the low-FPR region, where membership
inference is judged (TPR at low FPR, Carlini et al. 2022, as used in RAG-MIA §5).  Its TPR axes say what
they plot: the TPR read from the evaluation ROC, every threshold chosen on the evaluation scores it is
scored on (ragmi.metrics ``tpr_roc_<k>``), not an operational TPR at a reference threshold; a decision
rule's point is labelled with its TPR at the FPR it realised on the evaluation non-members (Clopper–Pearson
intervals, n).  Its axes run a little
beyond [0, 1] (:data:`ROC_LIMITS`), so that a perfect attack's curve (AUC 1.0: up the left edge, along the
top) is drawn inside them and not on the frame; every variant has its own colour, line style and marker,
and the legend sits outside the panels.

The figures over the report tables, drawn from a table's frame (``ragmi.report.registry`` declares them):
:func:`plot_query_budget`, :func:`plot_defense_effect` (ΔAUC of every headline variant on each defended
target, against its undefended target), :func:`plot_dcmi_sweep` (DCMI's AUC against θ and against γ, the
decision rule's accuracy against γ), :func:`plot_canaries` (canaries recovered per seed, before and
after the output hooks, undefended and defended targets side by side) and :func:`plot_privacy_utility`
(each defense's Δ utility against its change in leakage).  Every figure is written by :func:`save_atomic`.
"""

from __future__ import annotations

import json
import math
import os
import re
import textwrap

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ..analysis.utility import CHANNEL_GROUPS, CHANNEL_LABELS  # noqa: E402
from ..cells import DASH  # noqa: E402
from ..io import atomic_path  # noqa: E402
from ..metrics import check_scores_frame, clopper_pearson, roc_auc, roc_points  # noqa: E402
from ..utility.measures import METRIC_LABELS  # noqa: E402

DPI = 120
MAX_VARIANTS = 20
_LINESTYLES = ["-", "--", "-.", ":"]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h"]
ROC_LIMITS = (-0.02, 1.02)  # a curve on x = 0 or y = 1 (AUC 1.0) stays inside the axes
# PNG metadata without the matplotlib version, so bytes do not change with the library build.
_PNG_METADATA = {"Software": None}


_SWEEP_POINT = re.compile(r"=[0-9]+(\.[0-9]+)?$")


def sweep_point(variant: str) -> bool:
    """Whether a variant is a point of a numeric sweep (its name ends in ``=<number>``: ``dcmi/theta=0.06``,
    ``dcmi/gamma=0.5``, ``ia/paper/n=3``), drawn as a curve over the swept value in the sweep figures."""
    return bool(_SWEEP_POINT.search(str(variant)))


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


def _suptitle(fig: Figure, title: str, width_in: float, fontsize: float = 10) -> None:
    """The figure's title, wrapped to the figure's width (about 14 characters per inch at size 10)."""
    fig.suptitle(textwrap.fill(title, max(30, int(width_in * 14 * 10 / fontsize))), fontsize=fontsize)


def save_atomic(fig: Figure, out_png: str | os.PathLike) -> None:
    """Write ``fig`` as a PNG (dpi :data:`DPI`, no version metadata) atomically: a temporary file in the
    target directory, moved into place."""
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata=_PNG_METADATA)


def _style(i: int) -> dict:
    """Colour, line style and marker of the i-th variant: no two of the first 40 share all three."""
    return {
        "ls": _LINESTYLES[i % len(_LINESTYLES)],
        "marker": _MARKERS[(i // len(_LINESTYLES) + i) % len(_MARKERS)],
    }


ROC_TPR_LABEL = "TPR read from the evaluation ROC"


def rule_point_label(decision: np.ndarray, labels: np.ndarray) -> str:
    """``"rule: TPR 0.52 [0.38, 0.65]\\nat its eval FPR 0.45 [0.32, 0.58], n = 30+30"``: a decision rule's
    TPR on the evaluation members at the FPR it realised on the evaluation non-members, each with its
    Clopper–Pearson interval and n (rows without a decision left out)."""
    d, y = np.asarray(decision, float), np.asarray(labels, int)
    ok = ~np.isnan(d)
    m, n = d[ok & (y == 1)], d[ok & (y == 0)]
    tpr_lo, tpr_hi = clopper_pearson(int(m.sum()), m.size)
    fpr_lo, fpr_hi = clopper_pearson(int(n.sum()), n.size)
    tpr = float(m.mean()) if m.size else float("nan")
    fpr = float(n.mean()) if n.size else float("nan")
    return (
        f"rule: TPR {tpr:.2f} [{tpr_lo:.2f}, {tpr_hi:.2f}]\nat its eval FPR {fpr:.2f} [{fpr_lo:.2f}, {fpr_hi:.2f}], "
        f"n = {m.size}+{n.size}"
    )


def plot_roc(scores_df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """ROC curves of every variant on the eval rows: linear panel and log-log low-FPR panel.

    Score-based variants are drawn as curves, labelled with their AUC, each with its own colour, line
    style and marker (markers spread along the curve); the axes run over :data:`ROC_LIMITS`, so that an
    AUC of 1.0 is a visible corner inside the frame; the TPR axes say they read the evaluation ROC
    (:data:`ROC_TPR_LABEL`).  Black-box point attacks (``decision`` given) are drawn as one marker at the
    (FPR, TPR) of their hard decision, labelled with both and their intervals (:func:`rule_point_label`).  On the log panel rates of 0 are drawn
    at the floor ``1 / (2 n)`` (n = the largest class size).  The legend is outside the panels.
    """
    df, variants = _eval_variants(scores_df)
    class_sizes = df.groupby(["variant", "label"]).size()
    floor = 1.0 / (2 * int(class_sizes.max()))

    fig = Figure(figsize=(12.5, 5.4), layout="constrained")
    ax_lin, ax_log = fig.subplots(1, 2)
    ax_lin.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls=":", label="chance")
    ax_log.plot([floor, 1], [floor, 1], color="0.6", lw=0.8, ls=":")

    for i, v in enumerate(variants):
        sub = df[df["variant"] == v]
        y = sub["label"].to_numpy(int)
        color = _color(i, len(variants))
        style = _style(i)
        auc = roc_auc(y, sub["score"].to_numpy(float))
        if _is_black_box(sub):
            dec = sub["decision"].to_numpy(float)
            tpr = float(np.nanmean(dec[y == 1]))
            fpr = float(np.nanmean(dec[y == 0]))
            label = f"{v} (AUC {auc:.2f})\n{rule_point_label(dec, y)}"
            ax_lin.plot([fpr], [tpr], marker=style["marker"], ms=8, ls="none", color=color, mec="black", label=label)
            ax_log.plot([max(fpr, floor)], [max(tpr, floor)], marker=style["marker"], ms=8, ls="none", color=color)
        else:
            fpr_c, tpr_c = roc_points(y, sub["score"].to_numpy(float))
            # markers at a few points spread over the curve, shifted per variant so that equal curves show both
            every = max(1, len(fpr_c) // 5)
            marks = list(range((i * max(1, every // 3)) % every, len(fpr_c), every)) or [0]
            kw = dict(color=color, ls=style["ls"], lw=1.6, marker=style["marker"], ms=5, markevery=marks)
            ax_lin.plot(fpr_c, tpr_c, label=f"{v} (AUC {auc:.2f})", **kw)
            ax_log.plot(np.maximum(fpr_c, floor), np.maximum(tpr_c, floor), **kw)

    ax_lin.set(
        xlim=ROC_LIMITS,
        ylim=ROC_LIMITS,
        xlabel="false-positive rate (evaluation non-members)",
        ylabel=f"{ROC_TPR_LABEL}\n(threshold at each evaluation score)",
        title="ROC (evaluation set)",
    )
    ax_lin.set_aspect("equal")
    ax_log.set(
        xscale="log",
        yscale="log",
        xlim=(floor / 1.3, 1.3),
        ylim=(floor / 1.3, 1.3),
        xlabel=f"false-positive rate (log; 0 drawn at {floor:.2g})",
        ylabel=f"{ROC_TPR_LABEL} (log)",
        title="low-FPR region",
    )
    ax_log.set_aspect("equal")
    for ax in (ax_lin, ax_log):
        ax.grid(True, which="major", lw=0.4, alpha=0.5)
    fig.legend(
        *ax_lin.get_legend_handles_labels(),
        loc="outside right upper",
        fontsize=7 if len(variants) <= 8 else 6,
        title="variant",
        title_fontsize=7,
    )
    fig.suptitle(title)
    save_atomic(fig, out_png)


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
    save_atomic(fig, out_png)


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
    save_atomic(fig, out_png)


# --------------------------------------------------------------------------------------------
# Figures over the report tables
# --------------------------------------------------------------------------------------------
VERDICT_STYLE = {  # defense_effect's verdicts: marker, fill, colour, legend text
    "reduces": ("o", True, "tab:green", "reduces (95% interval below 0)"),
    "increases": ("o", True, "tab:red", "increases (95% interval above 0)"),
    "no detectable change": ("o", False, "0.15", "no detectable change (interval contains 0)"),
    "indirect": ("s", False, "0.6", "indirect: the defense cannot change what this attack reads"),
}


def _numbers(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    out = df.copy()
    for c in columns:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out


def plot_defense_effect(df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """ΔAUC (defended − undefended, 95% paired MOVER interval with DeLong's correlation) of every headline variant, one panel per
    (dataset, defended target) of the ``defense_effect`` frame: one row per variant, its marker by verdict
    (filled: a change the interval shows; hollow: none; grey squares: *indirect*, a channel the defense
    cannot change, drawn for information); the variants the defense can reach first.  Variants without
    paired scores are left out and named under the panel."""
    d = _numbers(df, "delta_auc", "delta_auc_lo", "delta_auc_hi")
    d = d[~d["verdict"].isin(["baseline"])]
    panels = list(d.groupby(["dataset", "target"], sort=True))
    if not panels:
        raise ValueError("no defended target in the defense_effect frame")
    height = max(len(g) for _, g in panels)
    fig = Figure(
        figsize=(6.2 * min(len(panels), 3), 1.2 + 0.34 * height * math.ceil(len(panels) / 3) + 1.0),
        layout="constrained",
    )
    axes = np.atleast_1d(fig.subplots(math.ceil(len(panels) / 3), min(len(panels), 3), squeeze=False)).ravel()
    seen: dict = {}
    for ax, ((dataset, target), g) in zip(axes, panels):
        _defense_effect_panel(ax, dataset, target, g, seen)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if seen:
        keys = [k for k in VERDICT_STYLE if k in seen]
        fig.legend(
            [seen[k][0] for k in keys], [seen[k][1] for k in keys], loc="outside lower center", ncol=2, fontsize=7
        )
    _suptitle(fig, title, fig.get_figwidth())
    save_atomic(fig, out_png)


def _defense_effect_panel(ax, dataset: str, target: str, g: pd.DataFrame, seen: dict) -> None:
    """One (dataset, defended target) panel of :func:`plot_defense_effect`; ``seen``: {verdict: (handle,
    legend text)} of the verdicts drawn so far, added to."""
    order = {"reduces": 0, "increases": 0, "no detectable change": 0, "indirect": 1}
    g = g.assign(_o=g["verdict"].map(order).fillna(2)).sort_values(["_o", "variant"], kind="stable")
    drawn = g[g["delta_auc"].notna() & g["verdict"].isin(list(VERDICT_STYLE))].reset_index(drop=True)
    missing = g[~g.index.isin(g[g["delta_auc"].notna() & g["verdict"].isin(list(VERDICT_STYLE))].index)]
    ys = np.arange(len(drawn))[::-1]
    for y, (_, r) in zip(ys, drawn.iterrows()):
        _defense_effect_point(ax, y, r, seen)
    ax.set_yticks(ys)
    ax.set_yticklabels(
        [f"{v}" + (" (indirect)" if vd == "indirect" else "") for v, vd in zip(drawn["variant"], drawn["verdict"])],
        fontsize=8,
    )
    ax.axvline(0, color="black", lw=0.8)
    span = max(
        0.25,
        float(np.nanmax(np.abs(drawn[["delta_auc_lo", "delta_auc_hi", "delta_auc"]].to_numpy(float))))
        if len(drawn)
        else 0.25,
    )
    ax.set_xlim(-min(1.05, span * 1.15), min(1.05, span * 1.15))
    ax.set_ylim(-0.8, len(drawn) - 0.2)
    defenses = str(g["defenses"].iloc[0]) if "defenses" in g else ""
    ax.set_title(f"{dataset} / {target} ({defenses}) against its undefended target", fontsize=9)
    ax.set_xlabel("ΔAUC = AUC(defended) − AUC(undefended), 95% CI\n← less leakage    more leakage →", fontsize=8)
    ax.grid(True, axis="x", lw=0.4, alpha=0.5)
    if len(missing):
        ax.text(
            0.0,
            -0.02,
            "not compared: " + ", ".join(missing["variant"].astype(str)),
            transform=ax.transAxes,
            fontsize=6,
            va="top",
            color="0.4",
        )


def _defense_effect_point(ax, y: float, r: pd.Series, seen: dict) -> None:
    """A variant's ΔAUC with its interval, marked by its verdict, and its value above it."""
    marker, filled, color, label = VERDICT_STYLE[r["verdict"]]
    x, lo, hi = r["delta_auc"], r["delta_auc_lo"], r["delta_auc_hi"]
    xerr = None if math.isnan(lo) or math.isnan(hi) else [[x - lo], [hi - x]]
    h = ax.errorbar(
        [x],
        [y],
        xerr=xerr,
        fmt=marker,
        ms=7,
        color=color,
        mfc=color if filled else "white",
        mec=color,
        ecolor=color,
        capsize=3,
        lw=1.4,
    )
    seen.setdefault(r["verdict"], (h, label))
    ax.annotate(
        f"{x:+.2f}".replace("-", "−"),
        (x, y),
        textcoords="offset points",
        xytext=(0, 8),
        ha="center",
        fontsize=7,
        color=color,
    )


_SWEEP_VALUE = re.compile(r"^dcmi/(?P<param>theta|gamma)=(?P<value>[0-9.]+)$")


def _is_control(target: str) -> bool:
    from .comparison import CONTROL_SUFFIX

    return any(str(target).endswith(s) for s in CONTROL_SUFFIX.values())


def plot_dcmi_sweep(df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """DCMI's ablation (DCMI Fig. 9) as curves over the swept value instead of one panel per value: the AUC
    with its 95% interval as a band against θ (each θ's calibrated score), the AUC against γ (the score
    at θ_adv2: flat, the AUC does not depend on γ) and the decision rule C > γ's accuracy against γ, one
    curve per (dataset, target) of the ``dcmi_ablation`` frame (the negative controls grey)."""
    parts = df["variant"].astype(str).str.extract(_SWEEP_VALUE)
    d = _numbers(
        df.assign(param=parts["param"], value=pd.to_numeric(parts["value"])),
        "auc",
        "auc_lo",
        "auc_hi",
        "accuracy",
        "accuracy_lo",
        "accuracy_hi",
    )
    d = d[d["param"].notna()]
    if d.empty:
        raise ValueError("no DCMI θ or γ sweep variant to plot")
    specs = [
        ("theta", "auc", "AUC against θ (perturbation magnitude)", "θ", "AUC (evaluation set, 95% CI)"),
        ("gamma", "auc", "AUC against γ (θ = θ_adv2)", "γ", "AUC (evaluation set, 95% CI)"),
        ("gamma", "accuracy", "decision rule C > γ: accuracy against γ", "γ", "accuracy (decision rule, 95% CI)"),
    ]
    specs = [s for s in specs if (d["param"] == s[0]).any()]
    fig = Figure(figsize=(4.6 * len(specs) + 1.6, 4.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(specs), squeeze=False)).ravel()
    groups = list(d.groupby(["dataset", "target"], sort=True))
    handles: dict = {}
    for ax, (param, metric, head, xlabel, ylabel) in zip(axes, specs):
        for i, ((dataset, target), g) in enumerate(groups):
            g = g[g["param"] == param].sort_values("value")
            if g.empty:
                continue
            control = _is_control(target)
            color = "0.55" if control else _color(i, len(groups))
            style = _style(i)
            x, y = g["value"].to_numpy(float), g[metric].to_numpy(float)
            lo, hi = g[f"{metric}_lo"].to_numpy(float), g[f"{metric}_hi"].to_numpy(float)
            ax.fill_between(x, lo, hi, color=color, alpha=0.12 if control else 0.2, lw=0)
            (h,) = ax.plot(x, y, color=color, ls=":" if control else style["ls"], marker=style["marker"], ms=5, lw=1.6)
            handles.setdefault(f"{dataset} / {target}" + (" (negative control)" if control else ""), h)
        ax.axhline(0.5, color="0.3", lw=0.8, ls="--")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(head, fontsize=9)
        ax.grid(True, lw=0.4, alpha=0.5)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside right upper",
        fontsize=7,
        title="dataset / target (band: 95% CI)",
        title_fontsize=7,
    )
    _suptitle(fig, title, fig.get_figwidth() - 2.5)
    save_atomic(fig, out_png)


def canary_seeds(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (target, seed) with recovered, before_hooks and planted, from the ``canaries`` frame's
    ``per_seed`` column (JSON, :func:`ragmi.report.audit_tables.canaries_frame`)."""
    rows = []
    for _, r in df.iterrows():
        for seed, v in json.loads(r["per_seed"]).items():
            rows.append({"target": r["target"], "seed": seed, **v})
    return pd.DataFrame(rows, columns=["target", "seed", "recovered", "before_hooks", "planted"])


def plot_canaries(df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """Canaries recovered per seed, one group of bars per seed and one bar per target (the undefended ones
    first): the hollow bar is the count on the generator's raw text (before the output hooks), the filled
    bar the count in the answers, so the output hooks' effect is the gap; labelled ``before → after`` of
    the planted canaries."""
    per = canary_seeds(df)
    if per.empty:
        raise ValueError("no canary results to plot")
    fisher = "Fisher p (one-sided, vs undefended)"
    compared = set(df.loc[df[fisher].astype(str) != DASH, "target"]) if fisher in df else set()
    targets = sorted(dict.fromkeys(df["target"]), key=lambda t: (t in compared, t))  # undefended first
    seeds = sorted(per["seed"].unique(), key=lambda s: (len(str(s)), str(s)))
    width = 0.8 / len(targets)
    fig = Figure(figsize=(max(6.4, 1.2 + 1.1 * len(seeds) * len(targets)), 5.2), layout="constrained")
    ax = fig.subplots()
    top = float(per["planted"].max())
    for j, t in enumerate(targets):
        color = _color(j, len(targets))
        g = per[per["target"] == t].set_index("seed")
        xs = [i - 0.4 + width * (j + 0.5) for i, s in enumerate(seeds) if s in g.index]
        rows = [g.loc[s] for s in seeds if s in g.index]
        before = [float(r["before_hooks"]) for r in rows]
        after = [float(r["recovered"]) for r in rows]
        ax.bar(
            xs,
            before,
            width * 0.9,
            facecolor="white",
            edgecolor=color,
            hatch="//",
            lw=1.2,
            label=f"{t}: before output hooks",
        )
        ax.bar(xs, after, width * 0.6, color=color, label=f"{t}: in the answers")
        for x, b, a, r in zip(xs, before, after, rows):
            ax.annotate(
                f"{b:.0f} → {a:.0f}\nof {float(r['planted']):.0f}",
                (x, max(a, b)),
                textcoords="offset points",
                xytext=(0, 3),
                ha="center",
                fontsize=7,
            )
    ax.set_xticks(range(len(seeds)))
    ax.set_xticklabels([f"seed {s}" for s in seeds])
    ax.set_ylim(0, top * 1.15 if top else 1)
    ax.set_ylabel("canaries recovered (exact e-mail address)")
    ax.grid(True, axis="y", lw=0.4, alpha=0.5)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7)
    _suptitle(fig, title, fig.get_figwidth())
    save_atomic(fig, out_png)


def _privacy_utility_panels(d: pd.DataFrame) -> list[tuple]:
    """The leakage measures of the privacy–utility figure that some defended row has: (key, y label, y of a
    row, interval of a row or None, point label of a row)."""

    def ci(lo, hi):
        return lambda r: (float(r[lo]), float(r[hi]))

    panels = []
    for g in CHANNEL_GROUPS:
        panels.append(
            (
                f"{g}_delta_auc",
                f"ΔAUC, attack reading the {CHANNEL_LABELS[g]}\n(the variant changed most; 95% CI)",
                lambda r, g=g: float(r[f"{g}_delta_auc"]),
                ci(f"{g}_delta_auc_lo", f"{g}_delta_auc_hi"),
                lambda r, g=g: str(r[f"{g}_variant"]),
            )
        )

    def canary_delta(r):
        k, n = float(r["canaries_recovered"]), float(r["canaries_planted"])
        kb, nb = r["_base_canaries"]
        return 100 * (k / n - kb / nb) if n and nb else float("nan")

    panels.append(
        (
            "canaries",
            "Δ canaries recovered\n(percentage points of those planted)",
            canary_delta,
            None,
            lambda r: (
                f"{r['_base_canaries'][0]:.0f} → {float(r['canaries_recovered']):.0f} of {float(r['canaries_planted']):.0f}"
                + ("" if pd.isna(r["canary_fisher_p"]) else f" (p = {float(r['canary_fisher_p']):.2g})")
            ),
        )
    )
    panels.append(
        (
            "nel",
            "Δ NELstrict entities per extraction run\n(e-mail addresses and person names)",
            lambda r: float(r["delta_nel_per_run"]),
            None,
            lambda r: (
                f"{float(r['nel_per_run']) - float(r['delta_nel_per_run']):.0f} → {float(r['nel_per_run']):.0f} per run"
            ),
        )
    )
    return panels


def plot_privacy_utility(df: pd.DataFrame, out_png: str, title: str) -> None:
    """What each defense saves in leakage against what it costs in utility, one row of panels per
    (dataset, undefended target) and one panel per leakage measure the run has: the ΔAUC of the attack
    reading the answer text and of the attack reading only the log-probabilities (each the headline
    variant the defense changed most, :func:`ragmi.analysis.utility.channel_cells`: a defense that rewrites the text shows in the
    first, and cannot in the second), the change in canaries recovered and in NELstrict entities per
    extraction run.  x: Δ of the headline utility measure (paired bootstrap 95% interval); y: the
    leakage change, with its interval where it has one; the undefended target at (0, 0).  Lower right
    is better: more utility, less leakage."""
    d = df[df["headline_metric"].astype(bool) & (df["base_target"] != "")].copy()
    groups = sorted({(r.dataset, r.base_target) for r in d.itertuples()})
    if not groups:
        raise ValueError("no row of the headline utility measure has an undefended target to compare with")
    base_can = {
        (r.dataset, r.target): (float(r.canaries_recovered), float(r.canaries_planted))
        for r in d.itertuples()
        if r.target == r.base_target and not pd.isna(r.canaries_planted)
    }
    d["_base_canaries"] = [
        base_can.get((r.dataset, r.base_target), (float("nan"), float("nan"))) for r in d.itertuples()
    ]
    panels = _privacy_utility_measured(d)
    if not panels:
        raise ValueError("no leakage measure of a defended target to plot")
    ncols = min(2, len(panels))  # per group, the panels two by two
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.6 * ncols + 2.6, (3.9 * nrows) * len(groups) + 0.8), layout="constrained")
    grid = fig.subplots(nrows * len(groups), ncols, squeeze=False)
    handles: dict = {}
    metric = METRIC_LABELS[str(d["utility_metric"].iloc[0])]
    for k, (dataset, base) in enumerate(groups):
        row_axes = grid[k * nrows : (k + 1) * nrows].ravel()
        for ax in row_axes[len(panels) :]:
            ax.set_visible(False)
        g = d[(d["dataset"] == dataset) & (d["base_target"] == base)].reset_index(drop=True)
        for ax, panel in zip(row_axes, panels):
            _privacy_utility_panel(ax, panel, g, dataset, base, metric, handles)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside right upper",
        fontsize=7,
        title="lower right = more utility, less leakage",
        title_fontsize=7,
    )
    fig.suptitle(textwrap.fill(title, 70 * ncols), fontsize=10)
    save_atomic(fig, out_png)


def _privacy_utility_measured(d: pd.DataFrame) -> list[tuple]:
    """The panels of :func:`_privacy_utility_panels` that some defended row of ``d`` has a number for."""
    defended = d[d["target"] != d["base_target"]]
    panels = []
    for key, ylabel, y_of, ci_of, label_of in _privacy_utility_panels(d):
        ys = []
        for _, r in defended.iterrows():
            try:
                ys.append(y_of(r))
            except (TypeError, ValueError, KeyError):
                ys.append(float("nan"))
        if any(not math.isnan(y) for y in ys):
            panels.append((key, ylabel, y_of, ci_of, label_of))
    return panels


def _privacy_utility_panel(
    ax, panel: tuple, g: pd.DataFrame, dataset: str, base: str, metric: str, handles: dict
) -> None:
    """One leakage measure's panel of the (dataset, undefended target ``base``) rows ``g``; ``handles``:
    the legend's entries so far, added to."""
    key, ylabel, y_of, ci_of, label_of = panel
    h = ax.plot([0], [0], marker="*", ms=14, color="black", ls="none", zorder=3)[0]
    handles.setdefault(f"undefended ({base}): the origin", h)
    for i, r in g.iterrows():
        if r["target"] == base:
            continue
        x = float(r["delta_utility"])
        try:
            y = y_of(r)
        except (TypeError, ValueError, KeyError):
            continue
        if math.isnan(x) or math.isnan(y):
            continue
        xerr = [[x - float(r["delta_utility_lo"])], [float(r["delta_utility_hi"]) - x]]
        yerr = None
        if ci_of is not None:
            lo, hi = ci_of(r)
            if not (math.isnan(lo) or math.isnan(hi)):
                yerr = [[y - lo], [hi - y]]
        color = _color(i, len(g))
        h = ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt="o", ms=8, color=color, capsize=3, lw=1.3)
        handles.setdefault(f"{r['target']} ({r['defenses']})", h)
        ax.annotate(label_of(r), (x, y), textcoords="offset points", xytext=(7, 5), fontsize=7, color=color)
    ax.axhline(0, color="grey", lw=0.8, ls=":")
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    if key.endswith("delta_auc"):
        ax.set_ylim(-1.05, 1.05)
    else:
        lim = max([1.0] + [abs(y_of(r)) for _, r in g.iterrows() if r["target"] != base and not _nan(y_of, r)])
        ax.set_ylim(-lim * 1.25, lim * 1.25)
    xlim = max(
        [0.05]
        + [
            abs(float(r[c]))
            for _, r in g.iterrows()
            for c in ("delta_utility_lo", "delta_utility_hi")
            if not pd.isna(r[c])
        ]
    )
    ax.set_xlim(-xlim * 1.3, xlim * 1.3)
    ax.set_xlabel(f"Δ {metric} (defended − undefended, 95% CI)", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(f"{dataset} / against {base}", fontsize=9)
    ax.grid(True, lw=0.4, alpha=0.4)


def _nan(y_of, r) -> bool:
    try:
        return math.isnan(y_of(r))
    except (TypeError, ValueError, KeyError):
        return True


def plot_dataset_inference(df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """Dataset inference: one group of bars per suspect set, one bar per (dataset, target[, design]), the
    bar's height −log10 of the exact one-sided p-value (never below its floor, the smallest p the sets
    allow; a tick marks −log10 of the floor); the dashed line is the verdict's level α (a bar above it:
    "in the database").  A NaN p (an uninformative test) draws no bar.  The distribution-shift rows
    (``shift`` ≠ none) are in the table, not here."""
    if df.empty:
        raise ValueError("no dataset-inference rows to plot")
    rows = df.copy()
    if "shift" in rows:
        rows = rows[rows["shift"].fillna("none") == "none"]
    if "design" in rows and rows["design"].nunique() > 1:
        rows["suspect_set"] = [
            s if d == "raw" else f"{s} [{d}]" for s, d in zip(rows["suspect_set"], rows["design"], strict=True)
        ]
    rows["set"] = [
        s if s != "mixture" else f"mixture f={f:.2f}" for s, f in zip(rows["suspect_set"], rows["f"], strict=True)
    ]
    rows["who"] = rows["target"] if rows["dataset"].nunique() == 1 else rows["dataset"] + "/" + rows["target"]
    if "evidence" in rows and rows["evidence"].nunique() > 1:
        rows["who"] = rows["who"] + " (" + rows["evidence"].astype(str) + ")"
    sets = list(dict.fromkeys(rows["set"]))
    who = list(dict.fromkeys(rows["who"]))
    width = 0.8 / len(who)
    fig = Figure(figsize=(max(6.4, 1.5 + 0.5 * len(sets) * len(who)), 4.8), layout="constrained")
    ax = fig.subplots()
    for j, w in enumerate(who):
        g = rows[rows["who"] == w].set_index("set")
        heights = [
            -math.log10(max(float(g.loc[s, "p_value"]), 1e-300))
            if s in g.index and g.loc[s, "p_value"] == g.loc[s, "p_value"]
            else 0.0
            for s in sets
        ]
        x = np.arange(len(sets)) + (j - (len(who) - 1) / 2) * width
        ax.bar(x, heights, width, label=w, color=_color(j, len(who)))
        if "p_floor" in g:
            floors = [
                -math.log10(float(g.loc[s, "p_floor"])) if s in g.index and g.loc[s, "p_floor"] > 0 else np.nan
                for s in sets
            ]
            ax.scatter(x, floors, marker="_", s=200, color="black", zorder=3)
    alpha = float(rows["alpha"].dropna().iloc[0]) if rows["alpha"].notna().any() else 0.01
    ax.axhline(-math.log10(alpha), color="black", ls="--", lw=1, label=f"α = {alpha:g}")
    ax.set_xticks(np.arange(len(sets)), sets, rotation=20, ha="right")
    ax.set_ylabel("−log10 p (exact one-sided rank test; tick: its floor)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    save_atomic(fig, out_png)


COVERAGE_PANELS = (
    ("curve_retrieval", "retrieval coverage"),
    ("curve_extraction_rouge", "extraction coverage, verbatim (ROUGE-L)"),
    ("curve_extraction_semantic", "extraction coverage, semantic (cosine)"),
)


def plot_coverage(df: pd.DataFrame, out_png: str | os.PathLike, title: str) -> None:
    """Share of the knowledge base against queries spent: three panels (retrieved, reproduced verbatim,
    reproduced in meaning), each scaled to its own largest share, one line per dataset / target / attack (the mean over seeds, the band
    between the lowest and highest seed); the random baselines dashed, the chance floor of each
    campaign dotted (ragmi.analysis.coverage)."""
    if df.empty:
        raise ValueError("no campaigns to plot")
    fig = Figure(figsize=(12.0, 4.2))
    axes = fig.subplots(1, 3)
    rows = list(df.to_dict("records"))
    for i, r in enumerate(rows):
        label = f"{r['variant']} ({r['dataset']} / {r['target']}, {int(r['seeds'])} seeds)"
        color = _color(i, len(rows))
        for ax, (col, _name) in zip(axes, COVERAGE_PANELS, strict=True):
            y = np.asarray(r[col], dtype=float)
            x = np.arange(1, len(y) + 1)
            ax.plot(x, y, color=color, ls="--" if r["baseline"] else "-", lw=1.4, label=label)
            ax.fill_between(x, r[f"{col}_min"], r[f"{col}_max"], color=color, alpha=0.15, lw=0)
        for ax, measure in zip(axes[1:], ("rouge", "semantic"), strict=True):
            y = np.asarray(r[f"curve_chance_{measure}"], dtype=float)
            ax.plot(np.arange(1, len(y) + 1), y, color=color, ls=":", lw=0.9)
    for ax, (col, name) in zip(axes, COVERAGE_PANELS, strict=True):
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("queries spent")
        # each panel scaled to its own largest value (small shares stay readable), at least 5%, at most 100%
        top = [np.nanmax(np.asarray(r[c], dtype=float), initial=0.0) for r in rows for c in (col, f"{col}_max")]
        if col != "curve_retrieval":
            m = col.rsplit("_", 1)[-1]
            top += [np.nanmax(np.asarray(r[f"curve_chance_{m}"], dtype=float), initial=0.0) for r in rows]
        ax.set_ylim(0, min(1.0, max(0.05, 1.1 * max(top))))
    axes[0].set_ylabel("share of the knowledge base")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2, frameon=False)
    _suptitle(fig, title + " (dotted: chance floor, non-members)", 12.0)
    fig.tight_layout(rect=(0, 0.08 + 0.03 * ((len(rows) + 1) // 2), 1, 0.93))
    save_atomic(fig, out_png)
