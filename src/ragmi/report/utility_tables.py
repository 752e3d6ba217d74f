"""The utility tables as printed: ``utility`` and ``privacy_utility`` in Markdown.  Their rows are
computed by :mod:`ragmi.analysis.utility` (rule ``analysis``); this module only formats them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..analysis.utility import CHANNEL_GROUPS, CHANNEL_LABELS
from ..cells import DASH, escape, format_ci, format_level, realised_fpr, ref_tpr, signed
from ..utility.measures import METRIC_LABELS
from .campaign_tables import share_cell
from .tables import APPENDIX_HEADING, APPENDIX_LEAD, grid, plain_markdown


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
def _cell_n(value, lo, hi, n) -> str:
    cell = format_ci(value, lo, hi)
    return cell if cell == DASH else f"{cell} (n = {int(n)})"


def _delta_cell(r) -> str:
    if pd.isna(r["delta_utility"]):
        return r["utility_change"] or DASH
    cell = f"{signed(r['delta_utility'])} [{signed(r['delta_utility_lo'])}, {signed(r['delta_utility_hi'])}]"
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


def _tpr_fpr(r, prefix: str = "") -> str:
    """The realised-FPR phrase of the row's TPR (``prefix`` ``"base_"``: of its undefended target's)."""
    g = r.get
    c = f"{prefix}tpr_fpr_realized"
    return realised_fpr(g(c), g(f"{c}_lo"), g(f"{c}_hi"), g(f"{prefix}tpr_n_nonmembers"))


def _leak_cell(r) -> str:
    """``"v: 0.81 [0.75, 0.86]; TPR 0.30 [0.18, 0.44] at the ref. threshold for 5% FPR (eval FPR 0.05 [0.00,
    0.25], n = 20)"``: the headline AUC and the operational TPR with the FPR its threshold realised."""
    if pd.isna(r["auc"]):
        return r["leakage_change"] or DASH
    cell = f"{r['variant']}: {format_ci(r['auc'], r['auc_lo'], r['auc_hi'])}"
    if not pd.isna(r["tpr_low_fpr"]):
        g = r.get
        tpr = ref_tpr(
            r["tpr_low_fpr"],
            r["tpr_low_fpr_lo"],
            r["tpr_low_fpr_hi"],
            r["tpr_fpr"],
            g("tpr_fpr_realized"),
            g("tpr_fpr_realized_lo"),
            g("tpr_fpr_realized_hi"),
            g("tpr_n_nonmembers"),
        )
        cell += f"; TPR {tpr}"
    return cell


def _dtpr_cell(r) -> str:
    """``"ΔTPR at the ref. threshold for 5% FPR +0.10 (eval FPR 0.15 [0.03, 0.38], n = 20 vs undefended eval
    FPR 0.00 [0.00, 0.17], n = 20): not like for like"`` (:func:`delta_tpr_note`); '' without a ΔTPR.  Never "at x% FPR": each
    threshold is the reference set's for x, and the cell says what each realised."""
    note = str(r.get("delta_tpr_note") or "")
    if pd.isna(r.get("delta_tpr_low_fpr")):
        return note if note.startswith("no ΔTPR") else ""
    return (
        f"ΔTPR at the ref. threshold for {format_level(r['tpr_fpr'])} FPR {signed(r['delta_tpr_low_fpr'])} "
        f"({_tpr_fpr(r)} vs undefended {_tpr_fpr(r, 'base_')}): {note.split(':')[0]}"
    )


def _dleak_cell(r) -> str:
    if r["leakage_change"] == "baseline":
        return "baseline"
    dtpr = _dtpr_cell(r)
    if pd.isna(r["delta_auc"]):
        return "; ".join(x for x in (r["leakage_change"] or DASH, dtpr) if x)
    cell = (
        f"ΔAUC {signed(r['delta_auc'])} [{signed(r['delta_auc_lo'])}, {signed(r['delta_auc_hi'])}] "
        f"(n = {int(r['n_paired_members'])}+{int(r['n_paired_nonmembers'])}): {r['leakage_change']}"
    )
    return f"{cell}; {dtpr}" if dtpr else cell


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
        cell += f", Δ {signed(r['delta_nel_per_run'])}"
    return cell


def _ci_only(d, lo, hi) -> str:
    if pd.isna(d):
        return DASH
    return f"{signed(d)} [{signed(lo)}, {signed(hi)}]"


def _nel_short(r) -> str:
    if pd.isna(r["nel_per_run"]):
        return DASH
    cell = f"{r['nel_per_run']:.1f}"
    return cell if pd.isna(r["delta_nel_per_run"]) else f"{cell} (Δ {signed(r['delta_nel_per_run'])})"


def _one(values) -> str | None:
    """The single non-empty value of ``values``, or None when there are none or several."""
    vals = {str(v) for v in values if isinstance(v, str) and v}
    return next(iter(vals)) if len(vals) == 1 else None


def privacy_utility_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """Two core tables: the leakage of each target once (the headline attack's AUC and ΔAUC, the ΔAUC of the
    answer-text and of the log-probability variant the defense changed most, canaries, NEL/run), then its
    utility per measure (with Δ and the Pareto mark); the notes; under ``## All columns`` the rest (TPR,
    the Δ leakage verdict with its n, the number of NEL runs).  What every row shares is said once."""
    first = df.drop_duplicates(["dataset", "target"]).reset_index(drop=True)
    several = first["dataset"].nunique() > 1
    caption = [] if several else [f"Dataset: {first['dataset'].iloc[0]}."] if len(first) else []
    headline = _one(first["variant"])
    if headline:
        caption.append(f"Headline attack (AUC, ΔAUC, Pareto): {headline}.")
    defended = first[first["target"] != first["base_target"]]
    chan_names = {g: _one(defended[f"{g}_variant"]) for g in CHANNEL_GROUPS}
    lead = ["dataset"] if several else []
    head, body = _leakage_table(first, several, headline, chan_names)
    u_head, u_body = _utility_table(df, several)
    rest = {
        "headline attack: AUC [95% CI]; TPR": [escape(_leak_cell(r)) for _, r in first.iterrows()],
        "Δ leakage [95% CI]": [escape(_dleak_cell(r)) for _, r in first.iterrows()],
        "NEL/run": [escape(_nel_cell(r)) for _, r in first.iterrows()],
    }
    lines = [f"# {title}", ""]
    for text in caption:
        lines += [text, ""]
    lines += ["## Leakage, per target", "", *grid(head, body), ""]
    copies = _copies_table(first, several)
    if copies:
        lines += [copies[0], "", *grid(copies[1], copies[2]), ""]
    lines += ["## Utility, per target and measure", "", *grid(u_head, u_body), ""]
    lines += [
        "- Leakage table: headline ΔAUC and the two channel columns are defended − undefended over the same "
        "evaluation candidates (95% paired MOVER interval with DeLong's correlation); a channel column is the headline variant reading "
        "that response channel (ragmi.attacks: the answer text, or the log-probabilities) whose AUC changed most "
        "on that target — a defense that rewrites the answer text can only change the first; canaries (p): "
        "recovered/planted with the one-sided Fisher p against the undefended target; NEL/run (Δ): NELstrict "
        "entities per extraction run, with the difference from the undefended target.",
        "- TPR (under 'All columns'): the headline attack's TPR at the threshold chosen on the reference "
        "non-members for x% FPR, with the FPR that threshold realised on the n evaluation non-members and its "
        "Clopper–Pearson interval: it is 'at x% FPR' only as far as that eval FPR says so. ΔTPR (defended − "
        "undefended) only between two TPRs at the same reference level, with both realised FPRs; 'not like for "
        "like' where they differ (the change then mixes a move along the ROC with a change of it).",
        *(f"- {n}" for n in notes),
    ]
    if rest:
        keys = [*lead, "target"]
        rows = [[escape(r[k]) for k in keys] + [rest[c][i] for c in rest] for i, (_, r) in enumerate(first.iterrows())]
        lines += ["", APPENDIX_HEADING, "", APPENDIX_LEAD, "", *grid([*keys, *rest], rows)]
    return "\n".join(lines) + "\n"


def _target_cell(r) -> str:
    return r["target"] if not r["defenses"] else f"{r['target']} ({r['defenses']})"


def _leakage_table(
    first: pd.DataFrame, several: bool, headline: str | None, chan_names: Mapping[str, str | None]
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the leakage core table, one row per target (``first``)."""
    lead = ["dataset"] if several else []
    head = [*lead, "target", "headline AUC [95% CI]" if headline else "headline attack: AUC [95% CI]", "headline ΔAUC"]
    for g in CHANNEL_GROUPS:
        name = chan_names[g]
        head.append(f"ΔAUC, {CHANNEL_LABELS[g]}" + (f" ({name})" if name else ""))
    head += ["canaries (p)", "NEL/run (Δ)"]
    body = []
    for _, r in first.iterrows():
        auc = format_ci(r["auc"], r["auc_lo"], r["auc_hi"])
        if not headline and r["variant"]:
            auc = f"{r['variant']}: {auc}"
        base = r["target"] == r["base_target"]
        row = [
            *([r["dataset"]] if several else []),
            _target_cell(r),
            auc if not pd.isna(r["auc"]) else (r["leakage_change"] or DASH),
        ]
        row.append("baseline" if base else _ci_only(r["delta_auc"], r["delta_auc_lo"], r["delta_auc_hi"]))
        for g in CHANNEL_GROUPS:
            cell = "baseline" if base else _ci_only(r[f"{g}_delta_auc"], r[f"{g}_delta_auc_lo"], r[f"{g}_delta_auc_hi"])
            if not base and not chan_names[g] and r[f"{g}_variant"]:
                cell = f"{r[f'{g}_variant']}: {cell}"
            row.append(cell)
        row += [_canary_cell(r), _nel_short(r)]
        body.append([escape(c) for c in row])
    return head, body


def _copies_table(first: pd.DataFrame, several: bool) -> tuple[str, list[str], list[list[str]]] | None:
    """The heading, header and rows of the table of what the targets' adaptive extraction campaigns copied
    (one row per target), or None when no campaign ran on them."""
    if "copy_variant" not in first or not first["copy_variant"].fillna("").astype(bool).any():
        return None
    variant, budget = _one(first["copy_variant"]), _one(first["copy_budget"].dropna().astype(int).astype(str))
    seeds = _one(first["copy_seeds"].dropna().astype(int).astype(str))
    heading = "## Copied by an adaptive extraction campaign, per target" + (
        f" ({variant}, {budget} queries, {seeds} seeds)" if variant and budget and seeds else ""
    )
    lead = ["dataset"] if several else []
    head = [*lead, "target", *([] if variant else ["attack"]), "copied verbatim [95% CI]", "Δ copied [95% CI]"]
    body = []
    for _, r in first.iterrows():
        base = r["target"] == r["base_target"]
        pct = [f"{r[c]:+.1%}".replace("-", "−") for c in ("delta_copied", "delta_copied_lo", "delta_copied_hi")]
        delta = f"{pct[0]} [{pct[1]}, {pct[2]}]"
        row = [
            *([r["dataset"]] if several else []),
            _target_cell(r),
            *([] if variant else [r["copy_variant"] or DASH]),
            share_cell(r, "copied") if r["copy_variant"] else DASH,
            "baseline" if base else (DASH if pd.isna(r["delta_copied"]) else f"{delta} ({r['copied_change']})"),
        ]
        body.append([escape(c) for c in row])
    return heading, head, body


def _utility_table(df: pd.DataFrame, several: bool) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the utility core table, one row per target and measure."""
    lead = ["dataset"] if several else []
    u_head = [*lead, "target", "measure", "utility [95% CI] (n)", "Δ utility [95% CI]", "Pareto"]
    u_body = []
    for _, r in df.iterrows():
        pareto = DASH if pd.isna(r["pareto"]) else ("front" if r["pareto"] else f"dominated by {r['dominated_by']}")
        u_body.append(
            [
                escape(c)
                for c in [
                    *([r["dataset"]] if several else []),
                    r["target"],
                    METRIC_LABELS[r["utility_metric"]],
                    _cell_n(r["utility"], r["utility_lo"], r["utility_hi"], r["n"]) if r["n"] else (r["note"] or DASH),
                    "baseline" if r["target"] == r["base_target"] else _delta_cell(r),
                    pareto,
                ]
            ]
        )
    return u_head, u_body
