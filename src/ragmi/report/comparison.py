"""Cross-attack tables: attack comparison (MEntA Tab. 3 / DCMI Tab. 2 layout), DCMI ablation
(DCMI Fig. 9) and query budget (IA vs MEntA as the number of questions grows).

Variant naming convention (set by the attack modules): a variant whose name contains ``=`` is a point
of a sweep or an ablation (``dcmi/theta=0.06``, ``ia/paper/n=3``, ``dcmi/calibration=none``); the
others are an attack's headline variants and go into the comparison table.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pandas as pd

from ..analysis.summary import CONTROL_SUFFIX, control_excludes_chance
from ..attacks import attack_class
from ..attacks.base import is_main_variant
from ..cells import DASH, EVAL_ROC, format_ci, format_level, format_n, is_missing, ref_tpr
from ..costs import BUDGET_VARIANT, NO_ANSWER, NO_YES_NO, PREPARE_FAILURE
from ..io import read_project_yaml
from ..metric_rows import is_informative
from ..plan import is_plain
from ..rag.frameworks import framework_rank

# The metrics a published entry may name (config/published.yaml), with the label its cell prints; each
# is a column of ragmi.metrics, so the paper's number is always shown beside the same quantity of ours.
# A published "TPR@x%FPR" (``tpr_at_fpr_<k>``) is the field's reading of an ROC: it is shown beside ours read
# from the evaluation ROC (``tpr_roc_<k>``, labelled so) and beside the operational TPR at the reference
# threshold for x% with the FPR that threshold realised (:func:`ours_tpr`), never as a bare "ours".
PUBLISHED_METRICS = {
    "auc": "AUC",
    "accuracy": "accuracy (rule)",
    "bb_tpr": "rule TPR",
    "bb_fpr": "rule FPR",
    "tpr_at_fpr_0": "TPR@0%FPR",
}


def ours_tpr(row, key: str) -> str:
    """Our TPR at ``key``% FPR beside a published one, each of its two kinds named: ``"read from the eval ROC
    0.55 [0.40, 0.69] (n = 50)"`` (or ``"eval ROC n/e"``: the evaluation non-members do not resolve the level;
    never at 0%) and ``"0.50 [0.38, 0.62] at the ref. threshold for 5% FPR (eval FPR 0.04 [0.00, 0.14], n =
    50)"``."""
    g = row.get
    level = float(key) / 100
    n = g("n_nonmembers")
    if is_missing(g(f"tpr_roc_{key}")):
        roc = f"{EVAL_ROC} n/e"
    else:
        roc = (
            f"{format_ci(g(f'tpr_roc_{key}'), g(f'tpr_roc_{key}_lo'), g(f'tpr_roc_{key}_hi'))} read from the {EVAL_ROC}"
        )
        roc += "" if is_missing(n) else f" (n = {int(n)})"
    ref = ref_tpr(
        g(f"tpr_at_fpr_{key}"),
        g(f"tpr_at_fpr_{key}_lo"),
        g(f"tpr_at_fpr_{key}_hi"),
        level,
        g(f"fpr_realized_{key}"),
        g(f"fpr_realized_{key}_lo"),
        g(f"fpr_realized_{key}_hi"),
        n,
    )
    if ref == DASH:
        ref = f"at the ref. threshold for {format_level(level)} FPR {DASH}"
    return f"{roc}; {ref}"


def _ours(row, m: str) -> str:
    """Our number of published metric ``m``: a TPR with what it is and the FPR beside it."""
    if m.startswith("tpr_at_fpr_"):
        return ours_tpr(row, m[len("tpr_at_fpr_") :])
    ours = format_ci(row.get(m), row.get(f"{m}_lo"), row.get(f"{m}_hi"))
    if m == "bb_tpr" and ours != DASH and not is_missing(row.get("bb_fpr")):
        g = row.get
        ours += f" (at rule FPR {format_ci(g('bb_fpr'), g('bb_fpr_lo'), g('bb_fpr_hi'))}"
        ours += ")" if is_missing(g("n_nonmembers")) else f", n = {int(g('n_nonmembers'))})"
    return ours


def load_published(path: str | Path) -> list[dict]:
    return read_project_yaml(path) or []


def defense_matches(entry: dict, defenses) -> bool:
    """Whether a published entry's setting has the target's defenses: an entry without ``defense`` is
    an undefended setting; one with ``defense: <kind>`` (and optional ``defense_params``) matches a
    target with exactly that one defense and those parameter values."""
    if "defense" not in entry:
        return not defenses
    if len(defenses) != 1:
        return False
    kind, params = defenses[0]
    return kind == entry["defense"] and all(params.get(k) == v for k, v in entry.get("defense_params", {}).items())


def _paper_number(value: float) -> str:
    """A published number as printed: at least two decimals, up to four (DCMI prints 0.7945)."""
    whole, frac = f"{float(value):.4f}".rstrip("0").split(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def framework_matches(entry: dict, framework: str) -> bool:
    """Whether a published entry's RAG framework is the target's: an entry without ``framework`` is
    Standard RAG (DCMI Table 8)."""
    return entry.get("framework", "standard") == framework


def published_entries(row: pd.Series, published: list[dict], defenses=(), framework: str = "standard") -> list[dict]:
    """The comparable published entries of the row's setting (see :func:`published_cell`)."""
    return [
        p
        for p in published
        if "table" not in p  # entries with a table are the audit tables'
        and p.get("comparable", True)
        and p["source"] == row.get("dataset_source")
        and p["model"] == row.get("generator_model")
        and fnmatch.fnmatchcase(str(row["variant"]), p["variant"])
        and defense_matches(p, defenses)
        and framework_matches(p, framework)
    ]


def published_cell(row: pd.Series, published: list[dict], defenses=(), framework: str = "standard") -> str:
    """The published numbers of the same setting — dataset source, generator model, variant,
    defenses ``[(kind, params)]`` and framework of the row's target —, each beside the same metric of ours:
    ``"rule FPR: paper 0.61, ours 0.50 [0.40, 0.60] (RAG-MIA Tab. 7)"`` (the entry's ``note`` after
    its source), a rule TPR with the rule's FPR beside it, a TPR@x%FPR as :func:`ours_tpr` reads it; ''
    when there is none.  Entries marked ``comparable: false`` are never shown: they
    are not the quantity ragmi computes (docs/provenance.md#published)."""
    hits = published_entries(row, published, defenses, framework)
    cells = []
    for p in hits:
        m = p["metric"]
        if m not in PUBLISHED_METRICS:
            raise ValueError(f"published entry {p} names metric {m!r}; allowed: {', '.join(PUBLISHED_METRICS)}")
        ours = _ours(row, m)
        where = p["paper"] + (f"; {p['note']}" if p.get("note") else "")
        cells.append(f"{PUBLISHED_METRICS[m]}: paper {_paper_number(p['value'])}, ours {ours} ({where})")
    return "; ".join(cells)


def diagnose(row: pd.Series) -> str:
    """Say, with the numbers, when an attack carries no information in this setting."""
    skipped = row.get("skipped")
    if isinstance(skipped, str) and skipped:
        return skipped  # the variant was not computed (a target without log-probabilities)
    notes = []
    tpr, fpr = row.get("bb_tpr"), row.get("bb_fpr")
    if pd.notna(tpr) and pd.notna(fpr) and abs(tpr - fpr) < 0.05:
        notes.append(f"hard decision does not separate: TPR {tpr:.2f} ≈ FPR {fpr:.2f}")
    lo, hi = row.get("auc_lo"), row.get("auc_hi")
    if pd.notna(lo) and pd.notna(hi) and lo <= 0.5 <= hi:
        notes.append(f"AUC CI [{lo:.2f}, {hi:.2f}] includes chance (0.5)")
    na = row.get(NO_ANSWER)
    if pd.notna(na) and na >= 0.5:
        notes.append(f"{100 * na:.0f}% of answers unparseable")
    nyn = row.get(NO_YES_NO)
    if pd.notna(nyn) and nyn > 0:
        notes.append(
            f"P(Yes) read at the floor for {100 * nyn:.0f}% of answers (no Yes/No among the top-K tokens of any position)"
        )
    pf = row.get(PREPARE_FAILURE)
    if pd.notna(pf) and pf > 0:
        notes.append(
            f"attacker LLM output incomplete (fewer questions / failed rewrites than asked) "
            f"for {100 * pf:.0f}% of candidates"
        )
    return "; ".join(notes)


def target_defenses(config) -> dict:
    """{target: [(defense kind, parameters), ...]} of a validated config."""
    return {
        t: [(config["defenses"][d]["kind"], config["defenses"][d]) for d in c["defenses"]]
        for t, c in config["targets"].items()
    }


def audit_published(published: list[dict], table: str, defenses) -> str:
    """The published cell of an audit table (entries with ``table:``) for a target's defense kinds;
    ``none`` is the undefended setting."""
    kinds = [k for k, _ in defenses] or ["none"]
    return "; ".join(
        f"{p['value']} ({p['paper']})" for p in published if p.get("table") == table and p["defense"] in kinds
    )


def target_frameworks(config) -> dict:
    """{target: framework name} of a validated config."""
    return {t: c["framework"] for t, c in config["targets"].items()}


def comparison_frame(
    metrics: pd.DataFrame, published: list[dict], defenses: dict | None = None, frameworks: dict | None = None
) -> pd.DataFrame:
    """Headline variants with the published number of the same setting; ``defenses`` is
    :func:`target_defenses` of the run (targets absent from it are undefended), ``frameworks``
    :func:`target_frameworks` (targets absent from it are Standard RAG)."""
    defenses, frameworks = defenses or {}, frameworks or {}
    df = metrics[metrics["variant"].map(is_main_variant)].copy()
    df["published"] = [
        published_cell(r, published, defenses.get(r["target"], ()), frameworks.get(r["target"], "standard"))
        for _, r in df.iterrows()
    ]
    df["note"] = [diagnose(r) for _, r in df.iterrows()]
    return df.reset_index(drop=True)


CONTROL_COLUMNS = {"null_database": "null-db control AUC", "no_retrieval": "k=0 control AUC"}
CONTROL_NAMES = {"null_database": "null-database", "no_retrieval": "no-retrieval (k = 0)"}
CONTROL_FLAGS = {
    "null_database": "the attack separates candidates that are not in the database",
    "no_retrieval": "the attack separates members from non-members without any retrieval",
}


UNINFORMATIVE_CONTROL = "uninformative"


def control_cell(c) -> str:
    """A control's cell: its AUC with the interval, or ``"uninformative (constant scores)"`` for a control
    whose scores cannot tell candidates apart (``informative`` False, ragmi.metrics): such a control cannot
    fail, and its AUC of 0.5 is no pass either."""
    if not is_informative(c):
        why = str(c.get("uninformative_reason") or "").strip()
        return f"{UNINFORMATIVE_CONTROL} ({why})" if why and why != "nan" else UNINFORMATIVE_CONTROL
    return format_ci(c["auc"], c["auc_lo"], c["auc_hi"])


def control_failed(c) -> bool:
    """Whether a control row failed: it is informative and its AUC interval excludes 0.5."""
    return is_informative(c) and control_excludes_chance(c)


def attach_controls(df: pd.DataFrame, targets: dict) -> pd.DataFrame:
    """Move the negative-control targets' AUCs beside their base target's rows (one column per
    control) and drop the control rows; flag in ``note`` an attack whose informative control's AUC
    interval excludes 0.5 (:func:`control_failed`): on the null database it separates members from
    non-members that are not in the database, with k = 0 it separates them without any retrieval —
    either way it learns something other than membership (corpus artefacts, label order, prompt effects,
    the generator's own training data).  An uninformative control (constant scores, no answer read) is
    shown as such (:func:`control_cell`) and never flagged: it could not have failed."""
    control_of = {t: c["control"] for t, c in targets.items() if c["control"] != "none"}
    if not control_of:
        return df
    df = df.copy()
    suffix = CONTROL_SUFFIX
    key = df.set_index(["dataset", "target", "variant"])
    notes = list(df["note"]) if "note" in df else [""] * len(df)
    for kind, column in CONTROL_COLUMNS.items():
        if kind not in control_of.values():
            continue
        cells = []
        for i, r in enumerate(df.itertuples()):
            ctl = (r.dataset, r.target + suffix[kind], r.variant)
            if r.target in control_of or ctl not in key.index:
                cells.append("")
                continue
            c = key.loc[ctl]
            cells.append(control_cell(c))
            if control_failed(c):
                flag = (
                    f"{CONTROL_NAMES[kind]} control AUC [{c['auc_lo']:.2f}, {c['auc_hi']:.2f}] excludes 0.5: "
                    + (CONTROL_FLAGS[kind])
                )
                notes[i] = f"{notes[i]}; {flag}" if notes[i] else flag
        df[column] = cells
    if "note" in df:
        df["note"] = notes
    return df[~df["target"].isin(list(control_of))].reset_index(drop=True)


def ablation_frame(metrics: pd.DataFrame, attack: str) -> pd.DataFrame:
    """The rows of ``attack``'s ablation table: its variants in a sweep (the attack class's
    ``ablation_sweep``), a ``sweep`` column, sorted by the order of its ``ablation_sweeps``."""
    cls = attack_class(attack)
    df = metrics[metrics["attack"] == attack].copy()
    sweeps = df["variant"].map(cls.ablation_sweep)
    df = df[sweeps.notna()].copy()
    df.insert(3, "sweep", sweeps[sweeps.notna()])
    df["_o"] = df["sweep"].map({s: i for i, s in enumerate(cls.ablation_sweeps)})
    return df.sort_values(["dataset", "target", "_o", "variant"], kind="stable").drop(columns="_o")


def query_budget_frame(metrics: pd.DataFrame) -> pd.DataFrame:
    rows = metrics[metrics["variant"].str.match(BUDGET_VARIANT)].copy()
    parts = rows["variant"].str.extract(BUDGET_VARIANT)
    rows.insert(3, "n_questions", parts["n"].astype(int))
    rows.insert(3, "method", parts["base"])
    return rows.sort_values(["dataset", "target", "method", "n_questions"], kind="stable")


def _published_number(entries: list[dict], metric: str) -> str:
    return "; ".join(
        f"{_paper_number(p['value'])} ({p['paper']}" + (f"; {p['note']}" if p.get("note") else "") + ")"
        for p in entries
        if p["metric"] == metric
    )


def framework_frame(metrics: pd.DataFrame, published: list[dict], frameworks: dict, targets: dict) -> pd.DataFrame:
    """DCMI Table 4/10 layout: one row per (dataset, attack variant, framework) of the undefended,
    non-control targets; AUC and the decision rule's accuracy with their intervals and n, and the
    paper's AUC and accuracy of the same setting (source, generator model, variant, framework); the
    frameworks in the order of DCMI Tables 4 and 10 (each framework class's ``table_rank``)."""
    plain = [t for t, c in targets.items() if is_plain(c)]
    df = metrics[metrics["variant"].map(is_main_variant) & metrics["target"].isin(plain)].copy()
    df["framework"] = df["target"].map(frameworks)
    rows = []
    for _, r in df.iterrows():
        hits = published_entries(r, published, (), r["framework"])
        rows.append(
            {
                "dataset": r["dataset"],
                "attack": r["attack"],
                "variant": r["variant"],
                "framework": r["framework"],
                "target": r["target"],
                "generator": r.get("generator_model", ""),
                "n eval (m/nm)": format_n(r.get("n_members"), r.get("n_nonmembers")),
                "AUC": format_ci(r.get("auc"), r.get("auc_lo"), r.get("auc_hi")),
                "accuracy (rule)": format_ci(r.get("accuracy"), r.get("accuracy_lo"), r.get("accuracy_hi")),
                "published AUC": _published_number(hits, "auc"),
                "published accuracy": _published_number(hits, "accuracy"),
                **{c: r.get(c) for c in ("auc", "auc_lo", "auc_hi", "accuracy", "accuracy_lo", "accuracy_hi")},
                "n_members": r.get("n_members"),
                "n_nonmembers": r.get("n_nonmembers"),
            }
        )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["_o"] = out["framework"].map(framework_rank)
    out = out.sort_values(["dataset", "attack", "variant", "_o", "target"], kind="stable").drop(columns="_o")
    return out.reset_index(drop=True)


FRAMEWORK_DISPLAY = (
    "dataset",
    "variant",
    "framework",
    "target",
    "generator",
    "n eval (m/nm)",
    "AUC",
    "accuracy (rule)",
    "published AUC",
    "published accuracy",
)
