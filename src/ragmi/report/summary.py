"""The headline table ``summary`` as printed: one row per (dataset, target, attack headline variant), the
verdict of each cell and the footnotes (power, controls, Holm).

What the columns and verdicts mean, and how they are computed, is :mod:`ragmi.analysis.summary` (rule
``analysis``); this module only turns its frame into Markdown.
"""

from __future__ import annotations

import math

import pandas as pd

from ..analysis.summary import FALSE_ALARM, FAMILY_ALPHA, SIM_REPLICATES, TOKENS
from ..cells import DASH, NOT_ESTIMABLE, escape, format_ci, format_extra, format_level, format_n
from ..costs import QUERIES
from ..metrics import Z95


def _tpr_cell(r: pd.Series) -> str:
    """The operational TPR: at the reference set's threshold for x% FPR, with the FPR it realised on the
    evaluation non-members (never labelled with an FPR it did not realise)."""
    if pd.isna(r["tpr_fpr"]) or pd.isna(r["tpr"]):
        return DASH
    cell = f"{format_ci(r['tpr'], r['tpr_lo'], r['tpr_hi'])} at FPR {format_ci(r['fpr_realized'], r['fpr_realized_lo'], r['fpr_realized_hi'])}"
    return cell


def _roc_cell(r: pd.Series) -> str:
    if pd.isna(r["roc_tpr_fpr"]) or pd.isna(r["roc_tpr"]):
        return NOT_ESTIMABLE
    return format_ci(r["roc_tpr"], r["roc_tpr_lo"], r["roc_tpr_hi"])


def power_note(df: pd.DataFrame) -> str | None:
    """The footnote with the AUC detected with 50% and with 80% power for each evaluation size."""
    sizes = (
        df.loc[
            df["min_detectable_auc"].notna(),
            ["n_members", "n_nonmembers", "min_detectable_auc", "min_detectable_auc_80"],
        ]
        .drop_duplicates(["n_members", "n_nonmembers"])
        .sort_values(["n_members", "n_nonmembers"])
    )
    if sizes.empty:
        return None
    parts = [
        f"at n = {int(a)}+{int(b)} a true AUC of about {x:.2f} is detected with 50% power and {y:.2f} with 80% power"
        for a, b, x, y in sizes.itertuples(index=False)
    ]
    return (
        "Power: "
        + "; ".join(parts)
        + " (detected: the 95% interval lies above 0.5; Hanley–McNeil 1982 standard error): an attack whose true "
        "AUC is smaller is often reported as 'no evidence at this n', which is not evidence of no leakage."
    )


def controls_note(df: pd.DataFrame) -> str | None:
    """The footnote on the negative controls, counted from the controls' own metrics rows (the
    ``controls_failed_*`` columns, whatever the main row's verdict): how many informative controls
    reject AUC = 0.5 per test (95% interval) and how many after Holm over the run's controls (the rule of
    ``control failed``); the run-level rate of a spurious ``control failed`` under true null controls,
    simulated with the run's own controls and sizes by the analysis (``attrs`` of the frame:
    :func:`ragmi.analysis.summary.false_alarm`, independent and shared answers), beside the former rule's; how many controls were uninformative (constant scores: a
    control that cannot fail is not a pass); and the leaking rows that have no informative control."""
    own = df[df["controls_from"].astype(str).eq(df["target"].astype(str))]
    m = int(own["n_informative_controls"].fillna(0).sum())
    u = int(own["n_uninformative_controls"].fillna(0).sum())
    if m == 0 and u == 0:
        return None
    per_test = int(own["controls_failed_per_test"].fillna(0).sum())
    family = int(own["controls_failed_holm"].fillna(0).sum())
    text = (
        f"Controls: {per_test} of {m} informative controls exclude 0.5 per test (95% interval; about {0.05 * m:.2g} "
        f"would by chance alone), {family} after Holm over the run's {m} (two-sided Mann–Whitney p, family-wise "
        f"{FAMILY_ALPHA:g}): only those read 'control failed'"
    )
    sim = df.attrs.get(FALSE_ALARM)  # ragmi.analysis.summary.false_alarm: simulated with the frame
    if m and sim:
        rates = sim["rates"]
        mc = Z95 * math.sqrt(0.25 / SIM_REPLICATES)  # the simulation's own 95% error, at most
        text += (
            f". Chance of a spurious 'control failed' in this run, were every control a true null (simulated, "
            f"{SIM_REPLICATES:,} replicates with these {sim['n_controls']} controls and their n, ±{mc:.1%}): "
            f"{rates['holm_independent']:.1%} independent, {rates['holm_shared']:.1%} with the variants of one "
            f"attack sharing their answers; under the former rule (any 95% interval excluding 0.5) "
            f"{rates['old_independent']:.0%} and {rates['old_shared']:.0%}"
        )
    if u:
        text += f"; {u} control(s) uninformative (constant scores: a control that cannot fail is not counted as a pass)"
    bare = df[(df["verdict"] == "leaks") & (df["n_informative_controls"].fillna(0) == 0)]
    if len(bare):
        names = ", ".join(f"{t} {v}" for t, v in zip(bare["target"], bare["variant"]))
        text += f". Leaking rows without an informative control: {names}"
    inherited = df[
        df["controls_from"].astype(str).ne("") & df["controls_from"].astype(str).ne(df["target"].astype(str))
    ]
    if len(inherited):
        pairs = sorted({f"{t} from {b}" for t, b in zip(inherited["target"], inherited["controls_from"])})
        text += ". Defended targets read their undefended counterpart's controls: " + ", ".join(pairs)
    return text + "."


def holm_note(df: pd.DataFrame) -> str | None:
    """The footnote on the family-wise reading of the cells: how many leak read one by one and how many
    after Holm over the run's cells (``verdict_holm``)."""
    tested = df["auc_p_greater_holm"].notna()
    if not tested.any():
        return None
    each = int((df["verdict"] == "leaks").sum())
    after = int((df["verdict_holm"] == "leaks").sum())
    return (
        f"Family-wise: {each} of {int(tested.sum())} tested cells leak read one by one (95% interval above 0.5), "
        f"{after} after Holm over all {int(tested.sum())} (one-sided Mann–Whitney p of AUC > 0.5, family-wise "
        f"{FAMILY_ALPHA:g}; verdict_holm in the CSV): a run that reads many cells finds some by chance alone."
    )


def summary_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """At most 8 columns: target (``dataset/target`` when the table has several datasets), attack/variant,
    n eval, AUC, the evaluation ROC's TPR at x% FPR, the TPR at the reference threshold with its realised
    FPR, queries/tokens per candidate, verdict; then the footnotes, a single dataset in the caption."""
    datasets = sorted(df["dataset"].astype(str).unique()) if len(df) else []
    roc_levels = sorted({float(x) for x in df["roc_tpr_fpr"].dropna()}) if len(df) else []
    ref_levels = sorted({float(x) for x in df["tpr_fpr"].dropna()}) if len(df) else []
    roc_head = (
        f"TPR@{format_level(roc_levels[0])}FPR (eval ROC)" if len(roc_levels) == 1 else "TPR at low FPR (eval ROC)"
    )
    ref_head = (
        f"TPR at ref. threshold for {format_level(ref_levels[0])} FPR, at realised eval FPR"
        if len(ref_levels) == 1
        else "TPR at ref. threshold, at realised eval FPR"
    )
    header = [
        "dataset/target" if len(datasets) > 1 else "target",
        "attack/variant",
        "n eval",
        "AUC [95% CI]",
        roc_head,
        ref_head,
        "queries / tokens per candidate",
        "verdict",
    ]
    lines = [f"# {title}", ""]
    if len(datasets) == 1:
        lines += [f"Dataset: {datasets[0]}.", ""]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for _, r in df.iterrows():
        verdict = r["verdict"]
        if verdict == "leaks" and r.get("verdict_holm") and r["verdict_holm"] != "leaks":
            verdict = "leaks (not after Holm)"
        elif verdict == "leaks" and r.get("verdict_holm") == "leaks":
            verdict = "leaks (also after Holm)"
        if r["verdict_detail"]:
            verdict = f"{verdict} ({r['verdict_detail']})"
        variant = str(r["variant"])
        target = r["target"] if not r["defenses"] else f"{r['target']} ({r['defenses']})"
        if len(datasets) > 1:
            target = f"{r['dataset']}/{target}"
        cells = [
            target,
            variant if variant.startswith(f"{r['attack']}/") or variant == r["attack"] else f"{r['attack']}: {variant}",
            format_n(r["n_members"], r["n_nonmembers"]),
            format_ci(r["auc"], r["auc_lo"], r["auc_hi"]),
            _roc_cell(r),
            _tpr_cell(r),
            f"{format_extra(QUERIES, r[QUERIES])} / {format_extra(TOKENS, r[TOKENS])}",
            verdict,
        ]
        lines.append("| " + " | ".join(escape(c) for c in cells) + " |")
    lines.append("")
    lines.append(
        "- AUC intervals: 95% score intervals of the Mann–Whitney AUC (ragmi.metrics.auc_ci); TPR and FPR: "
        "Clopper–Pearson. The eval-ROC TPR is read at a threshold chosen on the evaluation set itself "
        "(the field's convention, optimistic); the reference-threshold TPR is the operational one, with the "
        "FPR that threshold realised on the evaluation non-members."
    )
    power = power_note(df)
    if power:
        lines.append(f"- {power}")
    controls = controls_note(df)
    if controls:
        lines.append(f"- {controls}")
    family = holm_note(df)
    if family:
        lines.append(f"- {family}")
    limited = sorted({n for n in df["tpr_note"] if n})
    if limited:
        lines.append(
            "- The reference threshold is that of the lowest configured non-zero FPR level x the row's reference set "
            "resolves (at least 1/x reference non-members); coarser here: " + "; ".join(limited) + "."
        )
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
