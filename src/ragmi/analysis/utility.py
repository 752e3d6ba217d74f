"""The utility analyses: what each target's answers are worth, and what each defense costs in answer
quality against what it saves in leakage (tables ``utility`` and ``privacy_utility``:
:mod:`ragmi.report.utility_registry` declares them, :mod:`ragmi.report.utility_tables` prints them).

* ``utility``: one row per (dataset, target, utility measure): the mean over the benign questions
  with its 95% bootstrap interval and n, and the paired Δ against the undefended target over the same
  questions (its 95% paired bootstrap interval and a change verdict).
* ``privacy_utility``: the same rows joined with the leakage of the target: the headline attack's AUC
  and its TPR at the reference threshold of the lowest FPR level the reference set resolves, with the
  FPR that threshold realised on the evaluation non-members (with the paired ΔAUC of
  ``defense_effect``, and a ΔTPR only between two TPRs at the same reference level, named like for like
  only when both targets realised the same evaluation FPR: :func:`delta_tpr_note`), the canaries
  recovered, the NELstrict entities per extraction run; and per (dataset, undefended target, measure)
  the targets on the Pareto front of (utility, AUC).

A Δ whose interval contains 0 reads ``no detectable change``, never as a finding.  The frames are
deterministic in their inputs: every bootstrap generator is seeded from the configured seed and the
names of its cell (:func:`ragmi.metrics.named_rng`, :func:`ragmi.metrics.paired_rng`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import metrics as metrics_mod
from ..attacks.base import is_main_variant
from ..audit import stats
from ..cells import format_level
from ..metric_rows import fpr_keys, lowest_tpr, to_float
from ..plan import baseline_targets
from ..targets import target_kind
from ..utility.measures import METRICS
from .coverage import COPY_COLUMNS, copy_cells, final_shares
from .defense_effect import effect_verdict, paired_eval_scores
from .readers import read_csvs, read_json_rows, read_scores

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
    "tpr_fpr_realized",
    "tpr_fpr_realized_lo",
    "tpr_fpr_realized_hi",
    "tpr_n_nonmembers",
    "delta_tpr_low_fpr",
    "base_tpr_fpr_realized",
    "base_tpr_fpr_realized_lo",
    "base_tpr_fpr_realized_hi",
    "base_tpr_n_nonmembers",
    "delta_tpr_note",
    "canaries_recovered",
    "canaries_planted",
    "canary_fisher_p",
    "nel_per_run",
    "nel_runs",
    "delta_nel_per_run",
]


# The response channels an attack variant reads (ragmi.attacks.attack_channels), in two groups: the variants
# that read the answer text (S2MIA's T and M read the log-probabilities too), and those that read only the
# log-probabilities.  A defense that rewrites the text (an output hook keeping the log-probabilities) can
# change only the first; a defense acting before generation, both.
CHANNEL_GROUPS = {
    "text": lambda reads: "text" in reads,
    "logprobs": lambda reads: bool(reads) and "text" not in reads,
}


CHANNEL_LABELS = {"text": "answer text", "logprobs": "log-probabilities only"}


# Per channel group, the headline variant reading it with the largest |ΔAUC| on the defended target: the
# leakage a defense acting on that channel changes (columns appended after the others).
CHANNEL_COLUMNS = [f"{g}_{c}" for g in CHANNEL_GROUPS for c in ("variant", "delta_auc", "delta_auc_lo", "delta_auc_hi")]

# What the target's adaptive extraction campaigns copied (ragmi.analysis.coverage.copy_cells), and
# whether the defense changed it (appended after the channel columns).
CAMPAIGN_COLUMNS = [*COPY_COLUMNS, "copied_change"]


PRIVACY_UTILITY_COLUMNS = [
    *[c for c in UTILITY_COLUMNS if c != "note"],
    *LEAKAGE_COLUMNS,
    "pareto",
    "dominated_by",
    "headline_metric",
    "note",
    *CHANNEL_COLUMNS,
    *CAMPAIGN_COLUMNS,
]


NO_CHANGE = "no detectable change"


UNKNOWN_RETRIEVAL_NOTE = "n/a: a remote or python target's retrieved texts are unknown"


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
    unknown_retrieval: set,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """The ``utility`` rows (:data:`UTILITY_COLUMNS`) from the per-question scores of every (dataset,
    target); ``baselines``: {target: undefended counterpart or None}; ``unknown_retrieval``: the targets
    whose retrieved texts ragmi does not know (a remote service, a user's chain: their faithfulness is n/a).  The Δ of a defended target is over the questions both answered
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
            if metric == "faithfulness" and target in unknown_retrieval:
                row["note"] = UNKNOWN_RETRIEVAL_NOTE
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
) -> dict:
    nan = float("nan")
    cells = {c: nan for c in LEAKAGE_COLUMNS}
    cells.update(attack="", variant="", leakage_change="", n_paired_members=pd.NA, n_paired_nonmembers=pd.NA)
    cells["delta_tpr_note"] = ""
    _add_audit_cells(cells, dataset, target, base, canaries, leakage)
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
    level, tpr, tlo, thi, _ = lowest_tpr(r, fpr_keys(metrics.columns))
    cells.update(tpr_fpr=level, tpr_low_fpr=tpr, tpr_low_fpr_lo=tlo, tpr_low_fpr_hi=thi)
    cells.update(zip(("tpr_fpr_realized", "tpr_fpr_realized_lo", "tpr_fpr_realized_hi"), _realised(r, level)))
    cells["tpr_n_nonmembers"] = to_float(r.get("n_nonmembers"))
    if base is None:
        cells["leakage_change"] = "no undefended target"
        return cells
    if base == target:
        cells["leakage_change"] = "baseline"
        return cells
    _add_base_tpr_cells(cells, metrics, dataset, base, variant, level, tpr)
    a, bs = scores.get((dataset, target, attack)), scores.get((dataset, base, attack))
    pair = paired_eval_scores(a, bs, variant) if a is not None and bs is not None else None
    if pair is None:
        cells["leakage_change"] = "no scores of both targets on the same candidates"
        return cells
    labels, sa, sb = pair
    # the generator of defense_effect's cell for the same (target, variant): the same interval
    d, lo, hi = metrics_mod.paired_auc_difference(labels, sa, sb)
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


def _add_audit_cells(
    cells: dict, dataset: str, target: str, base: str | None, canaries: pd.DataFrame, leakage: pd.DataFrame
) -> None:
    """The canaries recovered and the NELstrict entities per run, each against the undefended ``base``."""
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


def _add_base_tpr_cells(
    cells: dict, metrics: pd.DataFrame, dataset: str, base: str, variant: str, level: float, tpr: float
) -> None:
    """The undefended ``base``'s TPR at low FPR beside the target's (``level``, ``tpr``): its realised FPR,
    the ΔTPR where both are at the same level, and whether that is like for like."""
    b = metrics[(metrics["dataset"] == dataset) & (metrics["target"] == base) & (metrics["variant"] == variant)]
    if not len(b):
        return
    b_level, b_tpr, _, _, _ = lowest_tpr(b.iloc[0], fpr_keys(metrics.columns))
    cells.update(
        zip(
            ("base_tpr_fpr_realized", "base_tpr_fpr_realized_lo", "base_tpr_fpr_realized_hi"),
            _realised(b.iloc[0], b_level),
        )
    )
    cells["base_tpr_n_nonmembers"] = to_float(b.iloc[0].get("n_nonmembers"))
    if b_level == level and not (math.isnan(tpr) or math.isnan(b_tpr)):
        cells["delta_tpr_low_fpr"] = tpr - b_tpr
    cells["delta_tpr_note"] = delta_tpr_note(level, b_level, cells["tpr_fpr_realized"], cells["base_tpr_fpr_realized"])


def _realised(r, level) -> tuple[float, float, float]:
    """The FPR the reference threshold of ``level`` realised on the row's evaluation non-members, with its
    Clopper–Pearson interval (``fpr_realized_<k>``, ``_lo``, ``_hi``); NaN where the row has none."""
    if level is None or math.isnan(level):
        return (float("nan"),) * 3
    k = metrics_mod.fpr_key(level)
    return tuple(to_float(r.get(f"fpr_realized_{k}{s}")) for s in ("", "_lo", "_hi"))


LIKE_FOR_LIKE = "like for like"


NOT_LIKE_FOR_LIKE = "not like for like"


def delta_tpr_note(level: float, base_level: float, fpr: float, base_fpr: float) -> str:
    """Whether a ΔTPR (defended − undefended, each at its reference threshold) is a like-for-like change:
    only two TPRs at the same reference level are subtracted at all, and even then the thresholds may have
    realised different FPRs on the evaluation non-members (one 0.00, the other 0.15): the difference then
    mixes a move along the ROC with a change of it, and is ``not like for like``.  ``like for like`` only
    when both realised FPRs are known and equal."""
    if any(math.isnan(x) for x in (level, base_level)):
        return "no TPR at a reference threshold"
    if level != base_level:
        return f"no ΔTPR: the reference levels differ ({format_level(level)} vs {format_level(base_level)} FPR)"
    if math.isnan(fpr) or math.isnan(base_fpr):
        return f"{NOT_LIKE_FOR_LIKE}: a realised eval FPR is not recorded"
    if abs(fpr - base_fpr) > 1e-9:
        return f"{NOT_LIKE_FOR_LIKE}: the realised eval FPRs differ ({fpr:.2f} vs {base_fpr:.2f} undefended)"
    return f"{LIKE_FOR_LIKE}: both realised eval FPR {fpr:.2f}"


def channel_cells(
    dataset: str,
    target: str,
    base: str | None,
    metrics: pd.DataFrame,
    scores: Mapping,
    n_boot: int,
    seed: int,
    channels_of=None,
) -> dict:
    """The :data:`CHANNEL_COLUMNS` of a defended target: per channel group, of the headline variants that
    read it and that both the target and its undefended counterpart scored, the one with the largest
    |ΔAUC| (ties: the name), with its paired interval (the generator of defense_effect's cell for the same
    target and variant: the same numbers).  Empty for an undefended target or without paired scores."""
    if channels_of is None:
        from ..attacks import attack_channels as channels_of
    cells: dict = {c: float("nan") for c in CHANNEL_COLUMNS}
    cells.update({f"{g}_variant": "" for g in CHANNEL_GROUPS})
    if not base or base == target or metrics is None or metrics.empty:
        return cells
    m = metrics[(metrics["dataset"] == dataset) & (metrics["target"] == target)]
    found: dict = {g: [] for g in CHANNEL_GROUPS}
    for variant, attack in sorted(
        {(str(v), str(a)) for v, a in zip(m["variant"], m["attack"]) if is_main_variant(str(v))}
    ):
        a, b = scores.get((dataset, target, attack)), scores.get((dataset, base, attack))
        pair = paired_eval_scores(a, b, variant) if a is not None and b is not None else None
        if pair is None:
            continue
        labels, sa, sb = pair
        d, lo, hi = metrics_mod.paired_auc_difference(labels, sa, sb)
        reads = set(channels_of(attack, variant))
        for g, member in CHANNEL_GROUPS.items():
            if member(reads):
                found[g].append((-abs(d), variant, d, lo, hi))
    for g, hits in found.items():
        if hits:
            _, variant, d, lo, hi = min(hits)
            cells.update(
                {f"{g}_variant": variant, f"{g}_delta_auc": d, f"{g}_delta_auc_lo": lo, f"{g}_delta_auc_hi": hi}
            )
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
    channels_of=None,
    copies: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The ``privacy_utility`` rows (:data:`PRIVACY_UTILITY_COLUMNS`): each ``utility`` row with the
    leakage cells of its target (the headline variant of its dataset and undefended target,
    :func:`headline_variants`), the Pareto marks (:func:`mark_pareto`) and, per response channel, the
    variant whose AUC the defense changed most (:func:`channel_cells`; ``channels_of(attack, variant)``,
    by default :func:`ragmi.attacks.attack_channels`) and what the target's adaptive campaigns copied
    (``copies``: :func:`ragmi.analysis.coverage.final_shares`; :func:`_campaign_cells`)."""
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
            )
            cache[key].update(
                channel_cells(u["dataset"], u["target"], base, metrics, scores, n_boot, seed, channels_of)
            )
            cache[key].update(_campaign_cells(copies, u["dataset"], u["target"], base))
        rows.append({**u.to_dict(), **cache[key], "headline_metric": u["utility_metric"] == headline_metric})
    df = pd.DataFrame(rows, columns=[c for c in PRIVACY_UTILITY_COLUMNS if c not in ("pareto", "dominated_by")])
    df = mark_pareto(df)[PRIVACY_UTILITY_COLUMNS]
    for c in (
        "n",
        "n_paired",
        "n_paired_members",
        "n_paired_nonmembers",
        "nel_runs",
        "tpr_n_nonmembers",
        "base_tpr_n_nonmembers",
    ):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    for c in ("canaries_recovered", "canaries_planted", "copy_budget", "copy_seeds"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("Int64")
    return df


def _campaign_cells(copies: pd.DataFrame | None, dataset: str, target: str, base: str | None) -> dict:
    """:func:`ragmi.analysis.coverage.copy_cells` with the change read as the utility change is: lower /
    higher when the 95% interval of the difference excludes 0, else no detectable change ("" where the
    target has no undefended counterpart with the same campaign)."""
    cells = copy_cells(copies, dataset, target, base)
    lo, hi = cells["delta_copied_lo"], cells["delta_copied_hi"]
    cells["copied_change"] = utility_change(lo, hi) if lo == lo and hi == hi else ""
    return cells


def _unknown_retrievals(config: Mapping) -> set:
    """The targets whose retrieved texts ragmi does not know (they retrieve from a database of their
    own: a remote service, a user's chain)."""
    return {t for t, c in config["targets"].items() if not target_kind(c).reads_split(c)}


def run_utility(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``utility``: ``files`` ``utility`` (the per-question
    scores); ``config`` its keys ``targets``, ``metrics.n_boot`` and ``utility.seed``."""
    return utility_frame(
        read_utility_scores(files["utility"]),
        config["targets"],
        baseline_targets(config["targets"]),
        _unknown_retrievals(config),
        n_boot=int(config["metrics"]["n_boot"]),
        seed=int(config["utility"]["seed"]),
    )


def run_privacy_utility(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``privacy_utility``: ``files`` ``utility`` and, where
    the run has them, the attacks' ``metrics`` and ``scores`` (with ``candidates``), ``canaries`` and
    ``leakage``; ``config`` its declared keys."""
    u = run_utility(files, config)
    canaries = read_json_rows(files["canaries"]) if files.get("canaries") else None
    return privacy_utility_frame(
        u,
        read_csvs(files["metrics"]) if files.get("metrics") else None,
        read_scores(files.get("scores", ()), files.get("candidates", ())),
        canaries,
        read_csvs(files["leakage"]) if files.get("leakage") else None,
        config["utility"]["headline_variant"],
        config["utility"]["headline_metric"],
        n_boot=int(config["metrics"]["n_boot"]),
        seed=int(config["seed"]),
        copies=final_shares([pd.read_parquet(f) for f in files["coverage"]]) if files.get("coverage") else None,
    )
