"""The defense-effect analysis: per attack variant × defended target, the AUC and TPR at low FPR beside
the undefended target's, the paired change in AUC over the same evaluation candidates (MOVER interval
with DeLong's correlation of the paired AUCs: :func:`ragmi.metrics.paired_auc_difference`), ΔTPR at the
reference threshold, and the verdict through the channels the defense's live hooks reach (table
``defense_effect``: :mod:`ragmi.report.audit_registry` declares it, :mod:`ragmi.report.tables` prints it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import metrics as metrics_mod
from ..attacks import attack_channels
from ..attacks.base import is_main_variant
from ..audit.inventory import NOT_LIVE, effective_channels_of, interpretable
from ..cells import DASH, signed
from ..metric_rows import fpr_keys, tpr_estimable
from ..plan import baseline_targets
from .leakage import UNDEFENDED
from .readers import read_csvs, read_scores


def format_delta(delta: float, lo: float, hi: float) -> str:
    """``"ΔAUC −0.21 [−0.35, −0.08]"`` (the interval left out when it is missing)."""
    cell = f"ΔAUC {signed(delta)}"
    if not (math.isnan(lo) or math.isnan(hi)):
        cell += f" [{signed(lo)}, {signed(hi)}]"
    return cell


def effect_verdict(lo: float, hi: float) -> str:
    """``reduces`` when the whole 95% interval of ΔAUC is below 0, ``increases`` when above, else
    ``no detectable change``."""
    if hi < 0:
        return "reduces"
    if lo > 0:
        return "increases"
    return "no detectable change"


def paired_eval_scores(defended: pd.DataFrame, baseline: pd.DataFrame, variant: str):
    """``(labels, defended scores, undefended scores)`` of one variant over the evaluation candidates
    both targets scored (rows with ``role == "eval"`` and a finite score, doc_ids present in both),
    sorted by doc_id so that nothing depends on row order; None when either class is
    missing.  The frames have doc_id, variant, score, label and role."""

    def one(df):
        d = df[(df["variant"].astype(str) == variant) & (df["role"] == "eval")]
        d = d[np.isfinite(pd.to_numeric(d["score"], errors="coerce").astype(float))]
        return d.assign(doc_id=d["doc_id"].astype(str))[["doc_id", "score", "label"]]

    both = one(defended).merge(one(baseline), on="doc_id", suffixes=("_a", "_b"), validate="one_to_one")
    if (both["label_a"] != both["label_b"]).any():
        raise ValueError(f"variant {variant!r}: the two targets give the same candidate different labels")
    both = both.sort_values("doc_id", kind="stable")
    labels = both["label_a"].astype(int).to_numpy()
    if not ((labels == 1).any() and (labels == 0).any()):
        return None
    return labels, both["score_a"].to_numpy(float), both["score_b"].to_numpy(float)


def _tpr_level(columns) -> str | None:
    """The lowest non-zero FPR key of the metrics (ΔTPR is read there)."""
    return next((k for k in fpr_keys(columns) if float(k) > 0), None)


_EFFECT_COLUMNS = (
    "defenses",
    "channels",
    "delta_auc",
    "delta_auc_lo",
    "delta_auc_hi",
    "n_paired_members",
    "n_paired_nonmembers",
    "delta_tpr",
    "effect",
    "verdict",
)


def defense_effect_frame(
    metrics: pd.DataFrame,
    target_defenses: dict,
    defense_channels: dict,
    attack_channels,
    baselines: dict,
    scores: dict | None = None,
) -> pd.DataFrame:
    """Metrics rows of the headline variants of every attack on every target, with the columns
    ``defenses``, ``channels`` (what the attack reads ∩ what the defenses can change), ``delta_auc``,
    ``delta_auc_lo``, ``delta_auc_hi`` (AUC of the defended target minus AUC of its undefended target
    on the same evaluation candidates, with its 95% MOVER interval, the two AUCs' score intervals combined
    with DeLong's correlation of the paired estimates: :func:`ragmi.metrics.paired_auc_difference`, which
    keeps its width where an AUC is 1), ``n_paired_members`` / ``n_paired_nonmembers``,
    ``delta_tpr`` (the point difference of TPR at the lowest non-zero FPR level, NaN where either
    target's reference set cannot resolve it), ``effect`` (the Markdown cell) and ``verdict``:
    ``baseline`` (an undefended target), ``reduces`` / ``increases`` (the interval excludes 0),
    ``no detectable change``, ``indirect`` (the defense's active channels and the channels the attack
    reads do not overlap; ΔAUC is still printed, for information), or ``not compared`` (no undefended
    target, or no scores of both on the same candidates).

    ``target_defenses``: {target: [defense names]}; ``defense_channels``: {(target, defense): set of
    effective channels}; ``attack_channels(attack, variant)`` → channels the variant reads;
    ``baselines``: :func:`baseline_targets`; ``scores``: {(dataset, target, attack): scores frame with
    doc_id, variant, score, label, role} of the defended targets and their baselines.  Nothing is
    resampled: the frame is a function of its inputs."""
    scores = scores or {}
    df = metrics[metrics["variant"].map(is_main_variant)].copy()
    tpr_key = _tpr_level(df.columns)
    out: dict[str, list] = {k: [] for k in _EFFECT_COLUMNS}
    for _, r in df.iterrows():
        cells = _effect_cells(
            r, metrics, target_defenses, defense_channels, attack_channels, baselines, scores, tpr_key
        )
        for k in out:
            out[k].append(cells.get(k, float("nan")))
    for k, v in out.items():
        df[k] = v
    return df.reset_index(drop=True)


def _effect_cells(
    r: pd.Series,
    metrics: pd.DataFrame,
    target_defenses: dict,
    defense_channels: dict,
    attack_channels,
    baselines: dict,
    scores: dict,
    tpr_key: str | None,
) -> dict:
    """The defense-effect columns of one metrics row (:func:`defense_effect_frame`; absent ones are NaN)."""
    t = r["target"]
    defs = list(target_defenses.get(t, []))
    names = ", ".join(defs) if defs else UNDEFENDED
    if not defs:
        return {"defenses": names, "channels": DASH, "effect": "baseline", "verdict": "baseline"}
    reads = set(attack_channels(r["attack"], r["variant"]))
    changes = set().union(*[defense_channels.get((t, d), set()) for d in defs])
    chans = ", ".join(sorted(reads & changes))
    indirect = not interpretable(changes, reads)
    base = baselines.get(t)
    pair = None
    if base is not None and base != t:
        a, b = scores.get((r["dataset"], t, r["attack"])), scores.get((r["dataset"], base, r["attack"]))
        if a is not None and b is not None:
            pair = paired_eval_scores(a, b, str(r["variant"]))
    if pair is None:
        why = "no undefended target" if base is None else "no scores of both targets on the same candidates"
        effect = "indirect (no shared channel)" if indirect else f"{DASH} ({why})"
        verdict = "indirect" if indirect else "not compared"
        return {"defenses": names, "channels": chans, "effect": effect, "verdict": verdict}
    labels, sa, sb = pair
    delta, lo, hi = metrics_mod.paired_auc_difference(labels, sa, sb)
    d_tpr, tpr_text = _delta_tpr(r, metrics, base, tpr_key)
    cell = format_delta(delta, lo, hi) + tpr_text
    if indirect:
        verdict, cell = "indirect", f"indirect (no shared channel); for information: {cell}"
    else:
        verdict = effect_verdict(lo, hi)
    return {
        "defenses": names,
        "channels": chans,
        "delta_auc": delta,
        "delta_auc_lo": lo,
        "delta_auc_hi": hi,
        "n_paired_members": int((labels == 1).sum()),
        "n_paired_nonmembers": int((labels == 0).sum()),
        "delta_tpr": d_tpr,
        "effect": cell,
        "verdict": verdict,
    }


def _delta_tpr(r: pd.Series, metrics: pd.DataFrame, base: str, tpr_key: str | None) -> tuple[float, str]:
    """``(ΔTPR, its text for the effect cell)`` of row ``r`` against its undefended target ``base`` at
    FPR level ``tpr_key``; ``(NaN, "")`` where either reference set cannot resolve it."""
    tpr_col = f"tpr_at_fpr_{tpr_key}" if tpr_key else None
    if not (tpr_col and tpr_col in metrics.columns):
        return float("nan"), ""
    bm = metrics[
        (metrics["dataset"] == r["dataset"]) & (metrics["target"] == base) & (metrics["variant"] == r["variant"])
    ]
    if not len(bm):
        return float("nan"), ""
    b_row = bm.iloc[0]
    ok = all(tpr_estimable(x, tpr_key) for x in (r, b_row))
    if ok and not (pd.isna(r[tpr_col]) or pd.isna(b_row[tpr_col])):
        d_tpr = float(r[tpr_col] - b_row[tpr_col])
        return d_tpr, f", ΔTPR at ref. threshold for {tpr_key}% FPR {signed(d_tpr)}"
    return float("nan"), ""


def run(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``defense_effect``: ``files`` ``metrics``, ``hooks``,
    ``scores`` and ``candidates``; ``config`` its keys ``targets`` and ``defenses``."""
    hooks = read_csvs(files["hooks"])
    channels = {}
    for (target, defense), g in hooks.groupby(["target", "defense"], sort=True):
        active = g.loc[~g["status"].isin(NOT_LIVE), "hook"].tolist()  # scores-only / untested hooks reach nothing
        channels[(target, defense)] = effective_channels_of(g["logprobs"].iloc[0], active)
    metrics = read_csvs(files["metrics"])
    controls = [t for t, c in config["targets"].items() if c["control"] != "none"]
    return defense_effect_frame(
        metrics[~metrics["target"].isin(controls)],
        {t: c["defenses"] for t, c in config["targets"].items()},
        channels,
        attack_channels,
        baseline_targets(config["targets"]),
        scores=read_scores(files.get("scores", ()), files.get("candidates", ())),
    )
