"""The metrics a gate limit can name: each reads one column of one table under ``results/tables/``,
with the columns that name a cell (the selectors it takes) and how the cell's n is read.

Imports nothing of ragmi: the config's validation reads :data:`METRICS` (ragmi.config).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One metric a limit can name: ``column`` of ``table``; ``keys`` the columns that name a cell (the
    selectors the metric takes); ``n`` how the cell's n is read; ``what`` its wording in findings;
    ``kind`` what the default ``min_n`` and the two-sided rule know of it (``auc``: an AUC or an end
    of its interval, chance 0.5; ``rate``: a fraction of the cell's n trials; ``""``: neither);
    ``flipped`` the column whose ``1 - x`` is this metric of the sign-flipped score (AUC metrics)."""

    table: str
    column: str
    keys: tuple[str, ...]
    n: str
    what: str
    kind: str = ""
    flipped: str | None = None


_SUMMARY_KEYS = ("dataset", "target", "attack", "variant")
_ROW_KEYS = ("dataset", "target")
METRICS: dict[str, Metric] = {
    "auc": Metric("summary", "auc", _SUMMARY_KEYS, "eval", "AUC", "auc", "auc"),
    "auc_lo": Metric("summary", "auc_lo", _SUMMARY_KEYS, "eval", "AUC 95% CI lower end", "auc", "auc_hi"),
    "auc_hi": Metric("summary", "auc_hi", _SUMMARY_KEYS, "eval", "AUC 95% CI upper end", "auc", "auc_lo"),
    "tpr_low_fpr": Metric("summary", "tpr", _SUMMARY_KEYS, "eval", "TPR", "rate"),
    "tpr_low_fpr_lo": Metric("summary", "tpr_lo", _SUMMARY_KEYS, "eval", "TPR 95% CI lower end", "rate"),
    "tpr_low_fpr_hi": Metric("summary", "tpr_hi", _SUMMARY_KEYS, "eval", "TPR 95% CI upper end", "rate"),
    "canaries_recovered": Metric("canaries", "n_recovered", ("target",), "canaries", "canaries recovered"),
    "canary_rate": Metric("canaries", "canary_rate", ("target",), "canaries", "canary recovery rate", "rate"),
    "email_nel_per_run": Metric("leakage_dashboard", "EMAIL_REAL_mean", _ROW_KEYS, "runs", "e-mail NEL per run"),
    "email_nel_per_run_hi": Metric(
        "leakage_dashboard", "EMAIL_REAL_hi", _ROW_KEYS, "runs", "e-mail NEL per run, 95% CI upper end"
    ),
    "name_nel_per_run": Metric("leakage_dashboard", "PERSON_NAME_mean", _ROW_KEYS, "runs", "name NEL per run"),
    "name_nel_per_run_hi": Metric(
        "leakage_dashboard", "PERSON_NAME_hi", _ROW_KEYS, "runs", "name NEL per run, 95% CI upper end"
    ),
    "utility": Metric("privacy_utility", "utility", _ROW_KEYS, "utility", "utility"),
    "utility_lo": Metric("privacy_utility", "utility_lo", _ROW_KEYS, "utility", "utility 95% CI lower end"),
    "delta_utility": Metric("privacy_utility", "delta_utility", _ROW_KEYS, "utility", "utility change"),
    "delta_utility_lo": Metric(
        "privacy_utility", "delta_utility_lo", _ROW_KEYS, "utility", "utility change 95% CI lower end"
    ),
}
SELECTORS = ("dataset", "target", "attack", "variant")  # the keys that name a cell, in this order
ANY = "*"  # a selector that matches every cell


def number(x) -> float:
    """A table cell as a number: NaN when it is missing or not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")
