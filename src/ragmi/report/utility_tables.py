"""The utility tables: what each target's answers are worth, and what each defense costs in answer
quality against what it saves in leakage.

* ``utility``: one row per (dataset, target, utility measure): the mean over the benign questions
  with its 95% bootstrap interval and n, and the paired Δ against the undefended target over the same
  questions (its 95% paired bootstrap interval and a change verdict).
* ``privacy_utility``: the same rows joined with the leakage of the target: the headline attack's AUC
  and TPR at low FPR (with the paired ΔAUC of ``defense_effect``), the canaries recovered, the
  NELstrict entities per extraction run; and per (dataset, undefended target, measure) the targets on
  the Pareto front of (utility, AUC).

A Δ whose interval contains 0 reads ``no detectable change``, never as a finding.  The frames are
deterministic in their inputs: every bootstrap generator is seeded from the configured seed and the
names of its cell (:func:`ragmi.metrics.named_rng`, :func:`ragmi.metrics.paired_rng`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import metrics as metrics_mod
from ..audit import stats
from ..utility.measures import METRIC_LABELS, METRICS
from .audit_tables import _signed, effect_verdict, paired_eval_scores, plain_markdown
from .comparison import is_main_variant
from .summary import _lowest_tpr
from .tables import DASH, _fpr_keys, format_ci

UTILITY_COLUMNS = [
    "dataset",
    "target",
    "base_target",
    "defenses",
    "utility_metric",
    "utility",
    "utility_lo",
    "utility_hi",
    "n",
    "n_questions",
    "delta_utility",
    "delta_utility_lo",
    "delta_utility_hi",
    "n_paired",
    "utility_change",
    "note",
]

LEAKAGE_COLUMNS = [
    "attack",
    "variant",
    "auc",
    "auc_lo",
    "auc_hi",
    "delta_auc",
    "delta_auc_lo",
    "delta_auc_hi",
    "n_paired_members",
    "n_paired_nonmembers",
    "leakage_change",
    "tpr_fpr",
    "tpr_low_fpr",
    "tpr_low_fpr_lo",
    "tpr_low_fpr_hi",
    "delta_tpr_low_fpr",
    "canaries_recovered",
    "canaries_planted",
    "canary_fisher_p",
    "nel_per_run",
    "nel_runs",
    "delta_nel_per_run",
]

PRIVACY_UTILITY_COLUMNS = [
    *[c for c in UTILITY_COLUMNS if c != "note"],
    *LEAKAGE_COLUMNS,
    "pareto",
    "dominated_by",
    "headline_metric",
    "note",
]

NO_CHANGE = "no detectable change"
REMOTE_NOTE = "n/a: a remote target's retrieved texts are unknown"


def utility_change(lo: float, hi: float) -> str:
    """``lower`` when the whole 95% interval of Δutility is below 0, ``higher`` when above, else
    ``no detectable change`` (an interval that contains 0)."""
    if hi < 0:
        return "lower"
    if lo > 0:
        return "higher"
    return NO_CHANGE


def read_utility_scores(paths: Sequence[str]) -> dict:
    """{(dataset, target): per-question scores} from ``results/utility/{dataset}/{target}/scores.csv``."""
    out = {}
    for p in paths:
        parts = Path(p).parts
        out[(parts[-3], parts[-2])] = pd.read_csv(p, dtype={"question_id": str, "doc_id": str})
    return out


def _defenses(targets: Mapping, t: str) -> str:
    return ", ".join(targets[t]["defenses"]) if t in targets else ""


def utility_frame(
    scores: Mapping,
    targets: Mapping,
    baselines: Mapping,
    remote: set,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """The ``utility`` rows (:data:`UTILITY_COLUMNS`) from the per-question scores of every (dataset,
    target); ``baselines``: {target: undefended counterpart or None}; ``remote``: the remote targets
    (their faithfulness is n/a).  The Δ of a defended target is over the questions both answered
    with a value (paired bootstrap: the same resampled questions for both)."""
    rows = []
    for (dataset, target), df in sorted(scores.items()):
        base = baselines.get(target)
        for metric in METRICS:
            values = pd.to_numeric(df[metric], errors="coerce").to_numpy(float)
            # seeded by dataset and measure, not target: every target's answers to the same questions
            # are resampled alike, so identical answers give identical intervals
            mean, lo, hi, n = metrics_mod.bootstrap_mean(values, n_boot, metrics_mod.named_rng(seed, dataset, metric))
            row = {
                "dataset": dataset,
                "target": target,
                "base_target": base or "",
                "defenses": _defenses(targets, target),
                "utility_metric": metric,
                "utility": mean,
                "utility_lo": lo,
                "utility_hi": hi,
                "n": n,
                "n_questions": len(df),
                "delta_utility": float("nan"),
                "delta_utility_lo": float("nan"),
                "delta_utility_hi": float("nan"),
                "n_paired": pd.NA,
                "utility_change": "",
                "note": "",
            }
            if metric == "faithfulness" and target in remote:
                row["note"] = REMOTE_NOTE
            elif metric == "faithfulness" and n < len(df):
                row["note"] = f"{len(df) - n} answer(s) without a claim (abstention or no content word) left out"
            if base is None:
                row["utility_change"] = "no undefended target"
            elif base != target:
                other = scores.get((dataset, base))
                if other is None:
                    row["utility_change"] = "undefended target not scored"
                else:
                    both = df[["question_id", metric]].merge(
                        other[["question_id", metric]], on="question_id", suffixes=("_a", "_b"), validate="one_to_one"
                    )
                    both = both.sort_values("question_id", kind="stable")
                    d, dlo, dhi, npaired = metrics_mod.paired_mean_difference(
                        pd.to_numeric(both[f"{metric}_a"], errors="coerce").to_numpy(float),
                        pd.to_numeric(both[f"{metric}_b"], errors="coerce").to_numpy(float),
                        n_boot,
                        metrics_mod.named_rng(seed, dataset, target, base, metric),
                    )
                    row.update(delta_utility=d, delta_utility_lo=dlo, delta_utility_hi=dhi, n_paired=npaired)
                    row["utility_change"] = utility_change(dlo, dhi) if npaired else "no paired question"
            rows.append(row)
    out = pd.DataFrame(rows, columns=UTILITY_COLUMNS)
    out["n"] = out["n"].astype("Int64")
    out["n_paired"] = out["n_paired"].astype("Int64")
    return out


# --------------------------------------------------------------------------------------------
# Leakage side
# --------------------------------------------------------------------------------------------
def headline_variants(metrics: pd.DataFrame, groups: Sequence[tuple[str, str]], chosen: str | None) -> dict:
    """{(dataset, undefended target): variant}: ``chosen`` (utility.headline_variant) where given,
    else the headline variant with the highest AUC lower bound on that undefended target (ties: the
    higher AUC, then the name); absent where the target has no metrics."""
    out = {}
    m = metrics[metrics["variant"].astype(str).map(is_main_variant)] if len(metrics) else metrics
    for dataset, base in groups:
        if chosen is not None:
            out[(dataset, base)] = chosen
            continue
        g = m[(m["dataset"] == dataset) & (m["target"] == base)] if len(m) else m
        g = g[np.isfinite(pd.to_numeric(g["auc_lo"], errors="coerce").astype(float))] if len(g) else g
        if len(g):
            best = sorted(g.itertuples(index=False), key=lambda r: (-float(r.auc_lo), -float(r.auc), str(r.variant)))[0]
            out[(dataset, base)] = str(best.variant)
    return out


def _nel(leakage: pd.DataFrame, dataset: str, target: str) -> tuple[float, int]:
    """Mean NELstrict entities per distinct extraction run of (dataset, target), and the number of
    distinct runs (hash-identical runs collapsed, as the leakage dashboard counts them)."""
    if leakage is None or leakage.empty:
        return float("nan"), 0
    g = leakage[(leakage["dataset"] == dataset) & (leakage["target"] == target)].drop_duplicates("outputs_digest")
    if g.empty:
        return float("nan"), 0
    return float(g["strict"].astype(float).mean()), len(g)


def _canaries(canaries: pd.DataFrame, target: str) -> tuple[float, float]:
    if canaries is None or canaries.empty:
        return float("nan"), float("nan")
    g = canaries[canaries["target"] == target]
    if g.empty:
        return float("nan"), float("nan")
    return float(g["n_leaked"].sum()), float(g["n_canaries"].sum())


def _leakage_cells(
    dataset: str,
    target: str,
    base: str | None,
    variant: str | None,
    metrics: pd.DataFrame,
    scores: Mapping,
    canaries: pd.DataFrame,
    leakage: pd.DataFrame,
    n_boot: int,
    seed: int,
) -> dict:
    nan = float("nan")
    cells = {c: nan for c in LEAKAGE_COLUMNS}
    cells.update(attack="", variant="", leakage_change="", n_paired_members=pd.NA, n_paired_nonmembers=pd.NA)
    k, n = _canaries(canaries, target)
    cells.update(canaries_recovered=k, canaries_planted=n)
    if base and base != target:
        kb, nb = _canaries(canaries, base)
        if all(math.isfinite(x) for x in (k, n, kb, nb)) and n > 0 and nb > 0:
            cells["canary_fisher_p"] = stats.fisher_one_sided(int(kb), int(nb), int(k), int(n))
    nel, runs = _nel(leakage, dataset, target)
    cells.update(nel_per_run=nel, nel_runs=runs)
    if base and base != target:
        nel_b, runs_b = _nel(leakage, dataset, base)
        if runs and runs_b:
            cells["delta_nel_per_run"] = nel - nel_b
    if variant is None:
        cells["leakage_change"] = "no attack metrics"
        return cells
    attack = variant.split("/", 1)[0]
    cells.update(attack=attack, variant=variant)
    row = metrics[(metrics["dataset"] == dataset) & (metrics["target"] == target) & (metrics["variant"] == variant)]
    if row.empty:
        cells["leakage_change"] = "variant not run on this target"
        return cells
    r = row.iloc[0]
    cells.update(auc=float(r["auc"]), auc_lo=float(r["auc_lo"]), auc_hi=float(r["auc_hi"]))
    level, tpr, tlo, thi, _ = _lowest_tpr(r, _fpr_keys(metrics.columns))
    cells.update(tpr_fpr=level, tpr_low_fpr=tpr, tpr_low_fpr_lo=tlo, tpr_low_fpr_hi=thi)
    if base is None:
        cells["leakage_change"] = "no undefended target"
        return cells
    if base == target:
        cells["leakage_change"] = "baseline"
        return cells
    b = metrics[(metrics["dataset"] == dataset) & (metrics["target"] == base) & (metrics["variant"] == variant)]
    if len(b):
        b_level, b_tpr, _, _, _ = _lowest_tpr(b.iloc[0], _fpr_keys(metrics.columns))
        if b_level == level and not (math.isnan(tpr) or math.isnan(b_tpr)):
            cells["delta_tpr_low_fpr"] = tpr - b_tpr
    a, bs = scores.get((dataset, target, attack)), scores.get((dataset, base, attack))
    pair = paired_eval_scores(a, bs, variant) if a is not None and bs is not None else None
    if pair is None:
        cells["leakage_change"] = "no scores of both targets on the same candidates"
        return cells
    labels, sa, sb = pair
    # the generator of defense_effect's cell for the same (target, variant): the same interval
    d, lo, hi = metrics_mod.paired_auc_difference(labels, sa, sb, n_boot, metrics_mod.paired_rng(target, variant, seed))
    cells.update(
        delta_auc=d,
        delta_auc_lo=lo,
        delta_auc_hi=hi,
        n_paired_members=int((labels == 1).sum()),
        n_paired_nonmembers=int((labels == 0).sum()),
    )
    verdict = effect_verdict(lo, hi)
    cells["leakage_change"] = {"reduces": "lower", "increases": "higher"}.get(verdict, verdict)
    return cells


def mark_pareto(df: pd.DataFrame) -> pd.DataFrame:
    """``pareto`` (True / False; empty where the row has no utility or no AUC) and ``dominated_by``
    per (dataset, base_target, utility_metric): a target is on the front when no other target of the
    group has utility ≥ and AUC ≤ its own with one of them strict (higher utility and lower
    leakage are better).  Point estimates: read each Δ's verdict beside it."""
    df = df.copy()
    df["pareto"] = pd.Series([pd.NA] * len(df), dtype="boolean", index=df.index)
    df["dominated_by"] = ""
    for (_, base, _), g in df.groupby(["dataset", "base_target", "utility_metric"], sort=False):
        if not base:  # no undefended counterpart: nothing it is compared with
            continue
        ok = g[np.isfinite(g["utility"].astype(float)) & np.isfinite(g["auc"].astype(float))]
        for i, r in ok.iterrows():
            better = ok[
                (ok["utility"] >= r["utility"])
                & (ok["auc"] <= r["auc"])
                & ((ok["utility"] > r["utility"]) | (ok["auc"] < r["auc"]))
            ]
            df.at[i, "pareto"] = better.empty
            df.at[i, "dominated_by"] = ", ".join(sorted(better["target"]))
    return df


def privacy_utility_frame(
    utility: pd.DataFrame,
    metrics: pd.DataFrame,
    scores: Mapping,
    canaries: pd.DataFrame | None,
    leakage: pd.DataFrame | None,
    headline_variant: str | None,
    headline_metric: str,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """The ``privacy_utility`` rows (:data:`PRIVACY_UTILITY_COLUMNS`): each ``utility`` row with the
    leakage cells of its target (the headline variant of its dataset and undefended target,
    :func:`headline_variants`) and the Pareto marks (:func:`mark_pareto`)."""
    metrics = metrics if metrics is not None else pd.DataFrame(columns=["dataset", "target", "variant"])
    # a target without an undefended counterpart is its own reference for the headline variant
    groups = sorted({(r.dataset, r.base_target or r.target) for r in utility.itertuples()})
    variants = headline_variants(metrics, groups, headline_variant)
    cache: dict = {}
    rows = []
    for _, u in utility.iterrows():
        key = (u["dataset"], u["target"])
        if key not in cache:
            base = u["base_target"] or None
            cache[key] = _leakage_cells(
                u["dataset"],
                u["target"],
                base,
                variants.get((u["dataset"], base or u["target"])),
                metrics,
                scores,
                canaries,
                leakage,
                n_boot,
                seed,
            )
        rows.append({**u.to_dict(), **cache[key], "headline_metric": u["utility_metric"] == headline_metric})
    df = pd.DataFrame(rows, columns=[c for c in PRIVACY_UTILITY_COLUMNS if c not in ("pareto", "dominated_by")])
    df = mark_pareto(df)[PRIVACY_UTILITY_COLUMNS]
    for c in ("n", "n_paired", "n_paired_members", "n_paired_nonmembers", "nel_runs"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    for c in ("canaries_recovered", "canaries_planted"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
def _cell_n(value, lo, hi, n) -> str:
    cell = format_ci(value, lo, hi)
    return cell if cell == DASH else f"{cell} (n = {int(n)})"


def _delta_cell(r) -> str:
    if pd.isna(r["delta_utility"]):
        return r["utility_change"] or DASH
    cell = f"{_signed(r['delta_utility'])} [{_signed(r['delta_utility_lo'])}, {_signed(r['delta_utility_hi'])}]"
    return f"{cell} (n = {int(r['n_paired'])}): {r['utility_change']}"


def _table(title: str, header: list[str], cells: list[list[str]], notes) -> str:
    return plain_markdown(pd.DataFrame(cells, columns=header), title, notes)


def utility_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    header = ["dataset", "target", "defenses", "measure", "utility [95% CI] (n)", "Δ vs undefended [95% CI]", "note"]
    cells = [
        [
            r["dataset"],
            r["target"],
            r["defenses"] or "none",
            METRIC_LABELS[r["utility_metric"]],
            _cell_n(r["utility"], r["utility_lo"], r["utility_hi"], r["n"]) if r["n"] else (r["note"] or DASH),
            "baseline" if r["target"] == r["base_target"] else _delta_cell(r),
            r["note"],
        ]
        for _, r in df.iterrows()
    ]
    return _table(title, header, cells, notes)


def _leak_cell(r) -> str:
    if pd.isna(r["auc"]):
        return r["leakage_change"] or DASH
    cell = f"{r['variant']}: {format_ci(r['auc'], r['auc_lo'], r['auc_hi'])}"
    if not pd.isna(r["tpr_low_fpr"]):
        cell += f"; TPR at ref. threshold for {round(100 * r['tpr_fpr'], 6):g}% FPR {format_ci(r['tpr_low_fpr'], r['tpr_low_fpr_lo'], r['tpr_low_fpr_hi'])}"
    return cell


def _dleak_cell(r) -> str:
    if r["leakage_change"] == "baseline":
        return "baseline"
    if pd.isna(r["delta_auc"]):
        return r["leakage_change"] or DASH
    return (
        f"ΔAUC {_signed(r['delta_auc'])} [{_signed(r['delta_auc_lo'])}, {_signed(r['delta_auc_hi'])}] "
        f"(n = {int(r['n_paired_members'])}+{int(r['n_paired_nonmembers'])}): {r['leakage_change']}"
    )


def _canary_cell(r) -> str:
    if pd.isna(r["canaries_planted"]):
        return DASH
    cell = f"{int(r['canaries_recovered'])}/{int(r['canaries_planted'])}"
    if not pd.isna(r["canary_fisher_p"]):
        cell += f" (p = {r['canary_fisher_p']:.2g})"
    return cell


def _nel_cell(r) -> str:
    if pd.isna(r["nel_per_run"]):
        return DASH
    cell = f"{r['nel_per_run']:.1f} over {int(r['nel_runs'])} run(s)"
    if not pd.isna(r["delta_nel_per_run"]):
        cell += f", Δ {_signed(r['delta_nel_per_run'])}"
    return cell


def privacy_utility_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    header = [
        "dataset",
        "target",
        "defenses",
        "measure",
        "utility [95% CI] (n)",
        "Δ utility [95% CI]",
        "headline attack: AUC [95% CI]; TPR",
        "Δ leakage [95% CI]",
        "canaries",
        "NEL/run",
        "Pareto",
    ]
    cells = []
    for _, r in df.iterrows():
        pareto = DASH if pd.isna(r["pareto"]) else ("front" if r["pareto"] else f"dominated by {r['dominated_by']}")
        cells.append(
            [
                r["dataset"],
                r["target"],
                r["defenses"] or "none",
                METRIC_LABELS[r["utility_metric"]],
                _cell_n(r["utility"], r["utility_lo"], r["utility_hi"], r["n"]) if r["n"] else (r["note"] or DASH),
                "baseline" if r["target"] == r["base_target"] else _delta_cell(r),
                _leak_cell(r),
                _dleak_cell(r),
                _canary_cell(r),
                _nel_cell(r),
                pareto,
            ]
        )
    return _table(title, header, cells, notes)


# --------------------------------------------------------------------------------------------
# Figure
# --------------------------------------------------------------------------------------------
def plot_privacy_utility(df: pd.DataFrame, out_png: str, title: str) -> None:
    """Δ utility (the headline measure) on x against ΔAUC of the headline attack on y, one panel per
    (dataset, undefended target), 95% intervals as error bars; the undefended target at (0, 0);
    targets on the Pareto front filled and joined by a line, dominated ones hollow.  Lower right is
    better: more utility, less leakage."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from .plots import _color, _save_atomic

    d = df[df["headline_metric"].astype(bool) & (df["base_target"] != "")]
    panels = sorted({(r.dataset, r.base_target) for r in d.itertuples()})
    if not panels:
        raise ValueError("no row of the headline utility measure has an undefended target to compare with")
    fig = Figure(figsize=(max(6.4, 5.6 * len(panels)), 5.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (dataset, base) in zip(axes, panels):
        g = d[(d["dataset"] == dataset) & (d["base_target"] == base)].reset_index(drop=True)
        pts, labels = [], {}
        for i, r in g.iterrows():
            if r["target"] == base:
                x, y, xerr, yerr = 0.0, 0.0, None, None
            else:
                x, y = float(r["delta_utility"]), float(r["delta_auc"])
                if math.isnan(x) or math.isnan(y):
                    continue
                xerr = [[x - float(r["delta_utility_lo"])], [float(r["delta_utility_hi"]) - x]]
                yerr = [[y - float(r["delta_auc_lo"])], [float(r["delta_auc_hi"]) - y]]
            front = bool(r["pareto"]) if not pd.isna(r["pareto"]) else False
            color = _color(i, len(g))
            ax.errorbar(
                [x],
                [y],
                xerr=xerr,
                yerr=yerr,
                fmt="*" if front else "o",
                ms=13 if front else 8,
                mfc=color if front else "white",
                mec=color,
                ecolor=color,
                capsize=3,
                label=f"{r['target']} ({r['defenses'] or 'undefended'})" + (" — Pareto front" if front else ""),
            )
            labels.setdefault((round(x, 6), round(y, 6)), []).append(str(r["target"]))
            if front:
                pts.append((x, y))
        for (x, y), names in labels.items():  # targets at the same point share one label
            ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8)
        if len(pts) > 1:
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color="0.3", lw=1, ls="--", zorder=0)
        ax.axhline(0, color="grey", lw=0.8, ls=":")
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        metric = METRIC_LABELS[str(g["utility_metric"].iloc[0])]
        variant = next((v for v in g["variant"] if v), "headline attack")
        ax.set_xlabel(f"Δ {metric} (defended − undefended, 95% CI)")
        ax.set_ylabel(f"Δ AUC of {variant} (95% CI)")
        ax.set_title(f"{dataset} / against {base}\nlower right = more utility, less leakage", fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(textwrap.fill(title, 70 * len(panels)), fontsize=10)
    fig.tight_layout()
    _save_atomic(fig, out_png)
