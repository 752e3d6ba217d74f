"""The inference tables as printed: dataset inference (is a *set* of documents in the database?) and the
empirical ε audit of the DP defenses (can a defense's claimed ε be refuted?).

Their rows are computed by :mod:`ragmi.analysis.dataset_inference` and :mod:`ragmi.analysis.epsilon` (rule
``analysis``); this module only turns those frames into Markdown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from .. import dataset_inference as di
from ..analysis.dataset_inference import NO_SHIFT
from ..analysis.epsilon import NO_TARGET
from ..cells import DASH


def _p(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    return f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


def p_cell(p, floor) -> str:
    """A p-value as printed: "≤ <floor>" where it sits at the smallest value the sets allow (never a digit
    below it), else its value."""
    if p is None or p != p:
        return DASH
    if floor == floor and floor is not None and p <= floor * (1 + 1e-9):
        return f"≤ {_p(floor)}"
    return _p(p)


def calibration_words(r: Mapping) -> str:
    """What a target's calibration says, plainly: k of n independent tests and the interval; whether the
    interval can resolve α (it rarely can: a pool of a few dozen reference non-members gives a handful of
    disjoint tests); anti-conservative where the interval lies above α."""
    alpha = float(r.get("alpha", di.ALPHA))
    n, k = int(r["calibration_splits"]), int(r["calibration_rejections"])
    words = f"{k} of {n} independent tests rejected at α = {alpha:g}; 95% interval [{r['calibration_lo']:.2f}, {r['calibration_hi']:.2f}]"
    if r["calibration_lo"] > alpha:
        return words + ": **anti-conservative: more false positives than α; its p-values are not to be trusted**"
    if not r.get("calibration_resolves", False):
        return words + f": the interval cannot resolve α = {alpha:g} (consistent with it, and with rates far above it)"
    return words + ": within sampling error of α"


def _count(x) -> str:
    return DASH if pd.isna(x) else str(int(x))


def dataset_inference_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The rows a data owner reads (dataset, target, suspect set, its size and members, the exact p with its
    floor, the Holm p, both verdicts, the smallest set that reaches the level), then the distribution-shift
    rows with their false-positive count per design, then one calibration line per target, then the notes."""
    several = df["dataset"].nunique() > 1
    kinds = df["evidence"].nunique() > 1
    designs = df["design"].nunique() > 1
    head = (["dataset"] if several else []) + ["target"] + (["scores from"] if kinds else [])
    head += ["design"] if designs else []
    head += ["suspect set", "n suspect (members) / outside"]
    head += ["p (exact)", "p Holm", "verdict", "verdict (Holm)", "smallest set with p < α"]

    def table(rows: pd.DataFrame) -> list[str]:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in rows.to_dict("records"):
            verdict = r["verdict"] + (f" ({r['reason']})" if isinstance(r["reason"], str) and r["reason"] else "")
            cells = ([r["dataset"]] if several else []) + [r["target"]] + ([r["evidence"]] if kinds else [])
            cells += [r["design"]] if designs else []
            cells += [r["suspect_set"]]
            cells += [f"{_count(r['n_suspect'])} ({_count(r['n_suspect_members'])}) / {_count(r['n_outside'])}"]
            cells += [p_cell(r["p_value"], r["p_floor"]), _p(r["p_holm"]), verdict, r["verdict_holm"]]
            cells += [_count(r["min_suspect_size"])]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
        return lines

    main = df[df["shift"].fillna(NO_SHIFT) == NO_SHIFT]
    shift = df[df["shift"].fillna(NO_SHIFT) != NO_SHIFT]
    lines = [f"# {title}", ""] + table(main)
    if len(shift):
        lines += [
            "",
            "Distribution shift: suspect sets of NON-members that differ from the outside set (every "
            "rejection is a false positive):",
            "",
        ] + table(shift)
        lines += [""]
        for design, g in shift.groupby("design", sort=False):
            ok = g[g["p_value"].notna()]
            k, n = int((ok["p_value"] < ok["alpha"]).sum()), len(ok)
            if n:
                from ..metrics import clopper_pearson  # scipy: not at the Snakefile's every start

                lo, hi = clopper_pearson(k, n)
                lines.append(
                    f"- {design}: {k} of {n} shifted non-member sets rejected at α (95% interval [{lo:.2f}, {hi:.2f}])"
                )
    lines += [
        "",
        "Calibration of the test (false-positive rate at α on reference non-members disjoint from every "
        "tested set, out-of-fold combined scores, independent disjoint splits):",
        "",
    ]
    for (d, t, e), g in df.groupby(["dataset", "target", "evidence"], sort=True):
        r = g.iloc[0]
        t = f"{t} ({e})" if kinds else t
        if not r["calibration_splits"] or r["calibration_splits"] != r["calibration_splits"]:
            size = r.get("calibration_split_size")
            need = f"{2 * int(size)} needed per independent split" if size == size and size else "nothing to combine"
            lines.append(f"- {d}/{t}: not calibrated ({int(r['calibration_pool'])} reference non-members; {need})")
            continue
        lines.append(
            f"- {d}/{t}: {int(r['calibration_splits'])} disjoint {int(r['calibration_split_size'])}+"
            f"{int(r['calibration_split_size'])} splits of {int(r['calibration_pool'])} reference non-members: "
            + calibration_words(r)
        )
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Empirical ε
# --------------------------------------------------------------------------------------------


def _num(x, fmt: str = ".2f") -> str:
    return DASH if x is None or x != x else format(x, fmt)


def epsilon_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    head = [
        "defense",
        "target",
        "bound from",
        "claimed ε (accounting)",
        "unit (queries per trial)",
        "compared with",
        "Δ declared / trial / measured",
        "ε lower bound",
        "could certify up to",
        "correct mechanism: median (5–95%)",
        "TPR / FPR",
        "verdict",
    ]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in df.to_dict("records"):
        eps = DASH if pd.isna(r["eps_lb"]) else f"{r['eps_lb']:.2f} ({r['confidence']:.0%})"
        rates = (
            DASH
            if pd.isna(r["tpr"])
            else f"{r['tpr']:.2f} / {r['fpr']:.2f} (n {int(r['n_members'])}+{int(r['n_nonmembers'])})"
        )
        target = r["target"] if r["dataset"] == NO_TARGET else f"{r['dataset']}/{r['target']}"
        deltas = DASH
        if not pd.isna(r.get("delta_declared", float("nan"))):
            deltas = " / ".join(_num(r[c], ".3g") for c in ("delta_declared", "delta_trial", "delta_measured"))
        correct = DASH
        if not pd.isna(r.get("correct_median", float("nan"))):
            correct = f"{r['correct_median']:.2f} ({r['correct_q05']:.2f}–{r['correct_q95']:.2f})"
        unit = r.get("unit")
        cells = [
            f"{r['defense']} ({r['kind']})",
            target,
            r["source"],
            f"{r['claimed_eps']:g} ({r['accounting']})",
            DASH if unit is None or unit != unit or unit == "" else unit,
            _num(r.get("claim_in_unit"), "g"),
            deltas,
            eps,
            _num(r.get("eps_certifiable")),
            correct,
            rates,
            r["verdict"],
        ]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    rel = df.drop_duplicates("defense")[["defense", "relation"]].to_dict("records")
    lines += ["", "The neighbouring relation each defense's claim is stated for:", ""]
    lines += [f"- {r['defense']}: {r['relation']}" for r in rel]
    measured = df.dropna(subset=["delta_measured"]).drop_duplicates(["defense", "dataset", "target"])
    if len(measured):
        lines += ["", "Δ measured on the real retriever (a maximum over what was tried, not a certificate):", ""]
        lines += [
            f"- {r['defense']} on {r['dataset']}/{r['target']}: {r['delta_tried']}" for r in measured.to_dict("records")
        ]
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
