"""The release gate: limits on a run's tables, a verdict per (limit, cell), JUnit XML, SARIF 2.1.0.

A limit (``gate.limits`` in config/schema.yaml) names a metric, a bound (``max`` or ``min``) and the
cells it applies to (``dataset``, ``target``, ``attack``, ``variant``; ``*`` matches every one). Each
metric reads one column of one table under ``results/tables/``:

* ``auc``, ``auc_lo``, ``auc_hi``, ``tpr_low_fpr``, ``tpr_low_fpr_lo``, ``tpr_low_fpr_hi``: ``summary.csv``
  (one row per dataset × target × attack headline variant);
* ``canaries_recovered``, ``canary_rate``: ``canaries.csv`` (one row per target);
* ``email_nel_per_run``, ``name_nel_per_run`` and their ``_hi``: ``leakage_dashboard.csv``, its
  per-target rows (one per dataset × target);
* ``utility``, ``utility_lo``, ``delta_utility``, ``delta_utility_lo``: ``privacy_utility.csv`` (one
  row per dataset × target × utility metric).

Every matched cell gets one of three outcomes:

* ``breach``: the value is above ``max`` (below ``min``). An interval end is compared as it is: an
  ``auc_hi`` limit whose interval straddles it breaches, because the data cannot show the AUC is
  below it (the finding prints the interval and the smallest AUC the n can detect). A ``max`` on an
  AUC (``auc``, ``auc_lo``, ``auc_hi``) is two-sided: the leakage of a score is its distance from
  chance, and an attacker who finds a score ranking non-members higher flips its sign, so the cell
  also breaches when the same metric of the flipped score -- ``1 - auc``, ``1 - auc_hi`` (the
  flipped interval's lower end), ``1 - auc_lo`` (its upper end) -- is above the limit: an inverted
  cell with ``auc_hi < 1 - max`` breaches every AUC max limit (:func:`flipped_value`);
* ``pass``: the value is within the limit (for a two-sided limit: on both sides);
* ``no evidence``: nothing at this n decides the limit -- no row of the table matches (a named target
  or attack that did not run, a table this configuration does not build), the cell's n is 0 or below
  the limit's ``min_n`` (configured, else the default of :func:`default_min_n`: for an AUC limit the
  smallest n per class at which an AUC at the limit is told apart from chance), the number is
  missing (a skipped variant, a TPR no FPR level resolves, no AUC interval, 0 canaries planted, 0
  leakage runs), the row says ``informative`` false (its ``uninformative_reason`` is quoted), the
  summary row's verdict is ``control failed`` (a negative control separates members from
  non-members, so the number does not measure membership), or a ``max`` on a TPR meets an inverted
  cell (its AUC interval lies below 0.5: the flipped score's TPR at low FPR is not in the table). It
  is never reported as a pass; with ``gate.fail_on_no_evidence`` (the default) it fails the gate
  like a breach.

The gate's verdict: ``fail`` (exit 1) when a cell breaches or, with ``fail_on_no_evidence``, a cell
has no evidence beside decided ones; ``undecided`` when no cell of any limit has evidence (exit 3,
unless both ``fail_on_no_evidence`` and ``fail_on_undecided`` are false: exit 0, the verdict still
``undecided``, never ``pass``); else ``pass`` (exit 0). Exit 2 is bad input (the command). Files:
``gate.json`` (the machine-readable verdict), ``junit.xml`` (one testcase per limit × cell: a
``failure`` for a breach, an ``error`` for no evidence that fails the gate, ``skipped`` for one that
does not; JUnit readers show errors as red, skipped tests as neutral), ``gate.sarif`` (SARIF 2.1.0,
https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/sarif-v2.1.0-errata01-os-complete.html:
one rule per limit, one result per breached or undecided cell, with the table's CSV row as location).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

from .errors import RagmiError
from .io import atomic_write_text, write_json

PASS, BREACH, NO_EVIDENCE = "pass", "breach", "no evidence"
VERDICT_PASS, VERDICT_FAIL, VERDICT_UNDECIDED = "pass", "fail", "undecided"
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3
GATE_FILES = ("gate.json", "junit.xml", "gate.sarif")
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
JSON_VERSION = 2  # 2: verdict undecided (exit 3), two-sided AUC limits, the default min_n
READ_VERSIONS = (1, 2)


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
SELECTORS = ("dataset", "target", "attack", "variant")
ANY = "*"


def limit_id(limit: Mapping) -> str:
    """The limit's ``id``, or metric, bound and selectors joined (``*`` written ``any``)."""
    if limit.get("id"):
        return str(limit["id"])
    bound = "max" if "max" in limit else "min"
    parts = [limit["metric"], bound] + [str(limit.get(k, ANY)).replace(ANY, "any") for k in SELECTORS]
    return ".".join(p.replace("/", "_") for p in parts)


def tables_read(limits: Sequence[Mapping]) -> list[str]:
    """The tables the limits read, in the order first named."""
    return list(dict.fromkeys(METRICS[lim["metric"]].table for lim in limits))


def two_sided(metric: str, op: str) -> bool:
    """Whether a limit is checked on the sign-flipped score too: a ``max`` on an AUC metric."""
    return op == "max" and METRICS[metric].flipped is not None


def flipped_value(metric: str, row: Mapping) -> float:
    """The metric of the sign-flipped score (1 - the score's AUC: interval [1 - auc_hi, 1 - auc_lo]):
    ``1 - auc`` for ``auc``, ``1 - auc_hi`` for ``auc_lo``, ``1 - auc_lo`` for ``auc_hi``; NaN for a
    metric that has none or a missing number."""
    col = METRICS[metric].flipped
    return float("nan") if col is None else 1.0 - _num(row.get(col))


def _first_n(ok, cap: int = 2**40) -> int | None:
    """The smallest n >= 1 with ``ok(n)`` for a predicate false below some n and true from it on
    (doubling, then bisection); None when it is false up to ``cap``."""
    hi = 1
    while not ok(hi):
        if hi >= cap:
            return None
        hi *= 2
    lo = hi // 2  # 0, or an n where ok is false
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def auc_decidable_n(limit: float) -> int | None:
    """The smallest n (members = non-members = n) at which an AUC at ``limit``'s distance from chance,
    ``0.5 + |limit - 0.5|`` (at most 1), has a 95% interval excluding 0.5:
    ``ragmi.metrics.min_detectable_auc(n, n) <= 0.5 + |limit - 0.5|``; None for a limit at 0.5 (no n
    tells an AUC of 0.5 from chance). Below it an attack at the limit and one at chance give the same
    tables, so neither a pass nor a breach is evidence."""
    from .metrics import min_detectable_auc

    # rounded: 0.5 + |0.35 - 0.5| is 0.65, not 0.65000000000000002
    target = round(min(0.5 + abs(float(limit) - 0.5), 1.0), 12)
    if target <= 0.5:
        return None

    def ok(n: int) -> bool:
        m = min_detectable_auc(n, n)  # NaN where the Hanley-McNeil error is undefined (n < 3)
        return not math.isnan(m) and m <= target

    return _first_n(ok)


def default_min_n(metric: str, limit: float) -> tuple[int | None, str]:
    """``(min_n, the rule in words)`` of a limit that gives no ``min_n``:

    * an AUC metric (``auc``, ``auc_lo``, ``auc_hi``; max or min): :func:`auc_decidable_n` -- the
      smallest n per class at which an AUC at the limit is told apart from chance (None for a limit
      of 0.5: no cell is decided until ``min_n`` is given);
    * a rate (``tpr_low_fpr*``, ``canary_rate``) with 0 < limit < 1: ``ceil(1 / limit)``, the smallest
      n at which a rate at the limit is one whole member (canary): below it the rate steps from 0
      straight past the limit, so one member decides the cell;
    * anything else (counts, NEL per run, utility; a rate limit of 0 or 1): 1.
    """
    kind = METRICS[metric].kind
    if kind == "auc":
        n = auc_decidable_n(limit)
        d = abs(float(limit) - 0.5)
        if n is None:
            return None, "no n tells an AUC at 0.5 from chance: give min_n"
        from .metrics import min_detectable_auc

        return n, (
            f"the smallest n per class at which an AUC {d:g} from chance is told apart from it: "
            f"min_detectable_auc({n}, {n}) = {min_detectable_auc(n, n):.4f}"
        )
    if kind == "rate" and 0 < float(limit) < 1:
        n = math.ceil(1 / float(limit) - 1e-9)
        return n, f"the smallest n at which a rate of {float(limit):g} is one whole trial: ceil(1/{float(limit):g})"
    return 1, "1: the table has no chance level for this metric"


def _is_false(x) -> bool:
    """A CSV cell that says false (``informative``); empty or anything else is not."""
    return str(x).strip().casefold() in ("false", "0", "0.0", "no", "f")


# ---------------------------------------------------------------------------------------------------
# reading the tables


@dataclass
class Row:
    values: dict
    line: int  # the CSV line the record starts on (1 = header)


def read_rows(path: str | os.PathLike) -> list[Row]:
    """The records of a table's CSV with the line each starts on."""
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        start = 2
        for rec in reader:
            rows.append(Row(dict(rec), start))
            start = reader.line_num + 1
    return rows


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _fmt(x: float) -> str:
    return "missing" if math.isnan(x) else f"{x:.4g}"


def _cell_n(metric: Metric, r: Mapping) -> tuple[float, str]:
    """``(n, wording)``: the n that decides the cell."""
    if metric.n == "eval":
        nm, nn = _num(r.get("n_members")), _num(r.get("n_nonmembers"))
        return min(nm, nn), f"n = {_fmt(nm)}+{_fmt(nn)}"
    if metric.n == "canaries":
        n = _num(r.get("n_planted"))
        return n, f"{_fmt(n)} canaries planted"
    if metric.n == "runs":
        n = _num(r.get("runs (distinct)"))
        return n, f"{_fmt(n)} distinct leakage runs"
    n = _num(r.get("n"))
    return n, f"n = {_fmt(n)}"


def _detail(metric: Metric, r: Mapping) -> str:
    """What the finding adds to the number: the interval, the FPR level, the table's verdict."""
    if metric.table == "summary":
        out = f"AUC {_fmt(_num(r.get('auc')))} [{_fmt(_num(r.get('auc_lo')))}, {_fmt(_num(r.get('auc_hi')))}]"
        level = _num(r.get("tpr_fpr"))
        if not math.isnan(level):
            out += (
                f", TPR at the reference threshold for {100 * level:g}% FPR {_fmt(_num(r.get('tpr')))} "
                f"[{_fmt(_num(r.get('tpr_lo')))}, {_fmt(_num(r.get('tpr_hi')))}]"
            )
            realised = _num(r.get("fpr_realized"))
            if not math.isnan(realised):
                out += f" at evaluation FPR {_fmt(realised)}"
        mda, mda80 = _num(r.get("min_detectable_auc")), _num(r.get("min_detectable_auc_80"))
        if not math.isnan(mda):
            out += f", AUC detected at this n with 50% power {mda:.2f}"
            if not math.isnan(mda80):
                out += f", with 80% power {mda80:.2f}"
        return out + f"; table verdict: {r.get('verdict') or 'none'}"
    if metric.table == "canaries":
        return f"{r.get('total') or ''}".strip()
    if metric.table == "leakage_dashboard":
        return f"Email NEL/run {r.get('Email NEL/run')}, Name NEL/run {r.get('Name NEL/run')}"
    return (
        f"{r.get('utility_metric') or 'utility'} {_fmt(_num(r.get('utility')))} "
        f"[{_fmt(_num(r.get('utility_lo')))}, {_fmt(_num(r.get('utility_hi')))}], "
        f"change {_fmt(_num(r.get('delta_utility')))} "
        f"[{_fmt(_num(r.get('delta_utility_lo')))}, {_fmt(_num(r.get('delta_utility_hi')))}]"
    )


def _matches(limit: Mapping, metric: Metric, r: Mapping) -> bool:
    return all(limit.get(k, ANY) in (ANY, r.get(k)) for k in metric.keys)


def _cell_name(metric: Metric, r: Mapping, limit: Mapping | None = None) -> dict:
    """The cell's keys (from the row, or from the limit's selectors for a cell without a row)."""
    src = r if limit is None else {k: limit.get(k, ANY) for k in metric.keys}
    out = {k: str(src.get(k, "")) for k in SELECTORS if k in metric.keys}
    if metric.table == "privacy_utility" and limit is None and r.get("utility_metric"):
        out["utility_metric"] = str(r["utility_metric"])
    return out


def _limit_cells(lim: Mapping, rows: list[Row] | None, path: Path) -> tuple[dict, list[dict]]:
    """The limit as described in gate.json, and one entry per cell it matches in ``rows`` (None: the
    table's CSV does not exist)."""
    metric = METRICS[lim["metric"]]
    lid = limit_id(lim)
    op, bound = ("max", float(lim["max"])) if "max" in lim else ("min", float(lim["min"]))
    both = two_sided(lim["metric"], op)
    if lim.get("min_n") is not None:
        min_n, source, rule = int(lim["min_n"]), "config", "configured"
    else:
        (min_n, rule), source = default_min_n(lim["metric"], bound), "default"
    described = {
        "id": lid,
        "metric": lim["metric"],
        "op": op,
        "limit": bound,
        "two_sided": both,
        "min_n": min_n,
        "min_n_source": source,
        "min_n_rule": rule,
        "selectors": {k: lim.get(k, ANY) for k in metric.keys},
        "table": str(path),
        "description": lim.get("description", ""),
    }
    cells: list[dict] = []
    sign = ">" if op == "max" else "<"

    def cell(name, status, value, n_text, detail, line, flipped=float("nan")):
        fl = _fmt(flipped)
        if status == BREACH and (value > bound if op == "max" else value < bound):
            msg = f"{metric.what} {_fmt(value)} {sign} {op} {bound:g}"
        elif status == BREACH:  # the flipped score's
            msg = (
                f"{metric.what} {_fmt(value)}, inverted: of the flipped score (1 - {metric.flipped}) {fl} "
                f"{sign} {op} {bound:g}"
            )
        elif status == PASS:
            msg = f"{metric.what} {_fmt(value)} within {op} {bound:g}" + (
                f", of the flipped score (1 - {metric.flipped}) {fl} too" if both else ""
            )
        else:
            msg = f"no evidence for {metric.what} {op} {bound:g}"
        where = ", ".join(f"{k} {v}" for k, v in name.items())
        msg = f"{lid}: {where}: {msg}" + (f" ({n_text})" if n_text else "") + (f"; {detail}" if detail else "")
        cells.append(
            {
                "limit": lid,
                "metric": lim["metric"],
                "op": op,
                "limit_value": bound,
                **{k: name.get(k, "") for k in SELECTORS},
                "utility_metric": name.get("utility_metric", ""),
                "status": status,
                "value": None if value is None or math.isnan(value) else value,
                "flipped_value": None if math.isnan(flipped) else flipped,
                "n": n_text,
                "min_n": min_n,
                "detail": detail,
                "table": str(path),
                "line": line,
                "message": msg,
            }
        )

    if rows is None:
        why = f"{path} was not built by this configuration" if path.is_file() else f"{path} does not exist"
        cell(_cell_name(metric, {}, lim), NO_EVIDENCE, None, "", f"{why}: the table was not built", None)
        return described, cells
    if metric.table == "leakage_dashboard":
        rows = [r for r in rows if r.values.get("block") == "per target"]
    matched = [r for r in rows if _matches(lim, metric, r.values)]
    if not matched:
        sel = ", ".join(f"{k} {lim.get(k, ANY)}" for k in metric.keys)
        cell(_cell_name(metric, {}, lim), NO_EVIDENCE, None, "", f"no row of {path.name} matches {sel}", None)
    for row in matched:
        r = row.values
        name = _cell_name(metric, r)
        n, n_text = _cell_n(metric, r)
        value = _num(r.get(metric.column))
        flipped = flipped_value(lim["metric"], r) if both else float("nan")
        detail = _detail(metric, r)
        if math.isnan(n) or n < 1:
            cell(name, NO_EVIDENCE, value, n_text, "no data at this n; " + detail, row.line)
        elif min_n is None:
            cell(name, NO_EVIDENCE, value, n_text, f"no evidence at any n: {rule}; " + detail, row.line)
        elif n < min_n and source == "config":
            cell(name, NO_EVIDENCE, value, n_text, f"below min_n {min_n}; " + detail, row.line)
        elif n < min_n:
            note = f"no evidence at this n: below the default min_n {min_n} ({rule})"
            cell(name, NO_EVIDENCE, value, n_text, f"{note}; " + detail, row.line)
        elif metric.table == "summary" and r.get("verdict") == "control failed":
            note = r.get("verdict_detail") or ""
            cell(name, NO_EVIDENCE, value, n_text, f"a negative control failed ({note}): not membership", row.line)
        elif "informative" in r and _is_false(r["informative"]):
            why = (r.get("uninformative_reason") or "").strip() or "no reason given"
            cell(name, NO_EVIDENCE, value, n_text, f"the row is not informative ({why}); " + detail, row.line)
        elif math.isnan(value):
            why = r.get("tpr_note") or r.get("verdict_detail") or "no number in the table"
            cell(name, NO_EVIDENCE, value, n_text, f"{why}; " + detail, row.line)
        elif both and math.isnan(flipped):
            why = f"no {metric.flipped} to check the flipped score against the limit"
            cell(name, NO_EVIDENCE, value, n_text, f"{why}; " + detail, row.line)
        elif metric.table == "summary" and metric.kind == "rate" and op == "max" and _num(r.get("auc_hi")) < 0.5:
            why = (
                "the AUC interval lies below 0.5 (inverted: the score ranks non-members higher); the flipped "
                "score's TPR at low FPR is not in the table, so a TPR limit is not decided here (an AUC limit is)"
            )
            cell(name, NO_EVIDENCE, value, n_text, f"{why}; " + detail, row.line)
        else:
            bad = value > bound if op == "max" else value < bound
            bad = bad or (both and flipped > bound)
            cell(name, BREACH if bad else PASS, value, n_text, detail, row.line, flipped)
    return described, cells


def verdict_of(counts: Mapping[str, int], fail_on_no_evidence: bool = True, fail_on_undecided: bool = True):
    """``(verdict, exit code)`` from the cells' ``counts``:

    * ``fail`` / 1: a cell breaches, or (``fail_on_no_evidence``) a cell has no evidence while
      others are decided;
    * ``undecided`` / 3: no cell breaches or passes -- every cell of every limit lacks evidence; exit
      0 only when ``fail_on_no_evidence`` and ``fail_on_undecided`` are both false (still never a pass);
    * ``pass`` / 0: otherwise (cells without evidence beside passing ones, with ``fail_on_no_evidence``
      false, are reported but do not fail the gate).
    """
    if counts.get(BREACH, 0):
        return VERDICT_FAIL, EXIT_FAIL
    if not counts.get(PASS, 0):
        return VERDICT_UNDECIDED, EXIT_UNDECIDED if (fail_on_no_evidence or fail_on_undecided) else EXIT_PASS
    if fail_on_no_evidence and counts.get(NO_EVIDENCE, 0):
        return VERDICT_FAIL, EXIT_FAIL
    return VERDICT_PASS, EXIT_PASS


def evaluate(
    limits: Sequence[Mapping],
    tables_dir: str | os.PathLike,
    fail_on_no_evidence: bool = True,
    built: Collection[str] | None = None,
    fail_on_undecided: bool = True,
) -> dict:
    """The gate's verdict over the tables in ``tables_dir`` (``<table>.csv``) as the dict written to
    gate.json: ``verdict`` (pass / fail / undecided, :func:`verdict_of`), ``exit_code``, ``counts``,
    ``limits`` and one ``cells`` entry per (limit, matched cell), each with ``fails_gate``.
    ``built``: the tables the run's configuration builds (None: every CSV present); another table's
    CSV, left by an earlier run, is not read."""
    tables_dir = Path(tables_dir)
    cache: dict[str, list[Row] | None] = {}
    cells, described = [], []
    for lim in limits:
        table = METRICS[lim["metric"]].table
        path = tables_dir / f"{table}.csv"
        if table not in cache:
            fresh = built is None or table in built
            cache[table] = read_rows(path) if fresh and path.is_file() else None
        d, c = _limit_cells(lim, cache[table], path)
        described.append(d)
        cells += c
    counts = {s: sum(c["status"] == s for c in cells) for s in (PASS, BREACH, NO_EVIDENCE)}
    verdict, code = verdict_of(counts, fail_on_no_evidence, fail_on_undecided)
    undecided_fails = verdict == VERDICT_UNDECIDED and code != EXIT_PASS
    for c in cells:
        c["fails_gate"] = c["status"] == BREACH or (
            c["status"] == NO_EVIDENCE and (fail_on_no_evidence or undecided_fails)
        )
    return {
        "version": JSON_VERSION,
        "verdict": verdict,
        "exit_code": code,
        "fail_on_no_evidence": bool(fail_on_no_evidence),
        "fail_on_undecided": bool(fail_on_undecided),
        "counts": counts,
        "limits": described,
        "cells": cells,
    }


# ---------------------------------------------------------------------------------------------------
# files


def _fails(cell: Mapping, fail_on_no_evidence: bool) -> bool:
    """Whether the cell fails the gate (``fails_gate``; a version-1 gate.json has none)."""
    if "fails_gate" in cell:
        return bool(cell["fails_gate"])
    return cell["status"] == BREACH or (cell["status"] == NO_EVIDENCE and fail_on_no_evidence)


def junit_xml(result: Mapping, timestamp: str | None = None, hostname: str | None = None) -> str:
    """JUnit XML: ``<testsuites>`` with one ``<testsuite>`` per limit and one ``<testcase>`` per cell.

    Written to validate against both the Apache Ant schema (windyroad/JUnit-Schema's JUnit.xsd: a
    bare ``testsuites``, every testsuite with package, id, timestamp, hostname, properties,
    system-out and system-err) and Jenkins' junit-10.xsd; ``skipped`` (no evidence without
    fail_on_no_evidence, the gate not failing on it) is Jenkins' and most CI readers' extension to the
    Ant format."""
    stamp = timestamp or time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    host = hostname or socket.gethostname() or "localhost"
    fone = result["fail_on_no_evidence"]
    root = ET.Element("testsuites")
    for i, lim in enumerate(result["limits"]):
        cells = [c for c in result["cells"] if c["limit"] == lim["id"]]
        failures = sum(c["status"] == BREACH for c in cells)
        errors = sum(c["status"] == NO_EVIDENCE and _fails(c, fone) for c in cells)
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": lim["id"],
                "package": "ragmi.gate",
                "id": str(i),
                "timestamp": stamp,
                "hostname": host,
                "tests": str(len(cells)),
                "failures": str(failures),
                "errors": str(errors),
                "time": "0",
            },
        )
        props = ET.SubElement(suite, "properties")
        for k in ("metric", "op", "limit", "two_sided", "min_n", "min_n_source", "table", "description"):
            value = lim.get(k, "")
            ET.SubElement(props, "property", {"name": k, "value": "none" if value is None else str(value)})
        for k, v in lim["selectors"].items():
            ET.SubElement(props, "property", {"name": k, "value": str(v)})
        for c in cells:
            name = "/".join(c[k] for k in SELECTORS if c[k]) + (
                f"/{c['utility_metric']}" if c["utility_metric"] else ""
            )
            case = ET.SubElement(suite, "testcase", {"name": name, "classname": f"ragmi.gate.{lim['id']}", "time": "0"})
            if c["status"] == BREACH:
                ET.SubElement(case, "failure", {"message": c["message"], "type": "breach"}).text = c["message"]
            elif c["status"] == NO_EVIDENCE:
                if _fails(c, fone):
                    ET.SubElement(case, "error", {"message": c["message"], "type": "no-evidence"}).text = c["message"]
                else:  # the JUnit schema gives <skipped> a message, no type
                    ET.SubElement(case, "skipped", {"message": c["message"]}).text = c["message"]
        ET.SubElement(suite, "system-out").text = "\n".join(c["message"] for c in cells)
        ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _uri(path: str) -> str:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return p.as_uri()
    return p.as_posix()


def sarif(result: Mapping) -> dict:
    """SARIF 2.1.0: one ``reportingDescriptor`` per limit (``ruleId`` = the limit's id), one result per
    breached cell (``level: error``, ``kind: fail``) and per cell without evidence (``error`` when it
    fails the gate; otherwise ``kind: open`` with level ``none``, SARIF §3.27.9–10), located at the
    table's CSV row; ``partialFingerprints`` keep a finding's identity across runs. The invocation's
    ``exitCode`` is the gate's (3 for undecided)."""
    from . import __version__

    fone = result["fail_on_no_evidence"]
    rules, index = [], {}
    for lim in result["limits"]:
        index[lim["id"]] = len(rules)
        sel = ", ".join(f"{k} {v}" for k, v in lim["selectors"].items())
        text = f"{METRICS[lim['metric']].what} {lim['op']} {lim['limit']:g} on {sel}"
        rules.append(
            {
                "id": lim["id"],
                "name": lim["metric"],
                "shortDescription": {"text": text},
                "fullDescription": {"text": lim["description"] or text},
                "defaultConfiguration": {"level": "error"},
                "properties": {
                    "metric": lim["metric"],
                    "op": lim["op"],
                    "limit": lim["limit"],
                    "two_sided": lim.get("two_sided", False),
                    "min_n": lim["min_n"],
                    "min_n_source": lim.get("min_n_source", "config"),
                },
            }
        )
    results = []
    for c in result["cells"]:
        if c["status"] == PASS:
            continue
        region = {"startLine": c["line"]} if c["line"] else None
        loc = {"physicalLocation": {"artifactLocation": {"uri": _uri(c["table"])}}}
        if region:
            loc["physicalLocation"]["region"] = region
        key = ":".join([c["limit"], *(c[k] for k in SELECTORS), c["utility_metric"]])
        res = {
            "ruleId": c["limit"],
            "ruleIndex": index[c["limit"]],
            "kind": "fail" if _fails(c, fone) else "open",
            "level": "error" if _fails(c, fone) else "none",
            "message": {"text": c["message"]},
            "locations": [loc],
            "partialFingerprints": {"ragmiGateCell/v1": key},
            "properties": {
                **{
                    k: c[k]
                    for k in ("status", "metric", "op", "limit_value", "value", "n", *SELECTORS, "utility_metric")
                },
                "flipped_value": c.get("flipped_value"),
            },
        }
        results.append(res)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ragmi gate",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "invocations": [{"executionSuccessful": True, "exitCode": result["exit_code"]}],
                "results": results,
            }
        ],
    }


def write_outputs(result: Mapping, out_dir: str | os.PathLike) -> dict[str, str]:
    """gate.json, junit.xml and gate.sarif in ``out_dir`` (atomically); their paths."""
    out = Path(out_dir)
    paths = {name: str(out / name) for name in GATE_FILES}
    write_json(result, paths["gate.json"])
    atomic_write_text(junit_xml(result), paths["junit.xml"])
    atomic_write_text(json.dumps(sarif(result), indent=2) + "\n", paths["gate.sarif"])
    return paths


_DECIMAL = re.compile(r"(?<![\w.+/-])-?\d+\.\d+(?:e[+-]?\d+)?(?![\w/]|\.\d)")
_AGAINST = re.compile(r"(>|<|within) (max|min) (-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)")


def _short(x: float, digits: int) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.{digits}g}"


def readable(text: str, digits: int = 3) -> str:
    """``text`` with every decimal of more than 3 decimal places rounded to ``digits`` significant
    digits (0.91346 -> 0.913, 0.051234 -> 0.0512, 12.3456 -> 12.3), for the lines a person reads;
    gate.json keeps the numbers as they are.  The bound after ``max``/``min`` is left as configured,
    and a number compared with one (``0.80004 > max 0.8``) keeps the digits that show the comparison."""

    def one(m: re.Match) -> str:
        token = m.group(0)
        mantissa = token.split("e")[0]
        if "e" not in token and len(mantissa.split(".")[1]) <= 3:
            return token
        if text[: m.start()].endswith(("max ", "min ")):
            return token
        x = float(token)
        against = _AGAINST.match(text, m.end() + 1) if text[m.end() : m.end() + 1] == " " else None
        for d in range(digits, 18):
            out = _short(x, d)
            if against is None:
                return out
            op, side, bound = against.group(1), against.group(2), float(against.group(3))
            y = float(out)
            shown = {">": y > bound, "<": y < bound}.get(op, y <= bound if side == "max" else y >= bound)
            if shown or out == token:
                return out
        return token

    return _DECIMAL.sub(one, text)


def summary_lines(result: Mapping) -> list[str]:
    """One line per cell that fails the gate (or is undecided), then the totals; numbers rounded for
    reading (:func:`readable`; the cells' messages in gate.json keep them as evaluated)."""
    fone = result["fail_on_no_evidence"]
    lines = []
    for c in result["cells"]:
        if c["status"] == BREACH:
            lines.append(readable(f"ragmi gate: BREACH {c['message']}"))
        elif c["status"] == NO_EVIDENCE:
            lines.append(
                readable(
                    f"ragmi gate: {'NO EVIDENCE' if _fails(c, fone) else 'no evidence (not failing)'} {c['message']}"
                )
            )
    k = result["counts"]
    total = (
        f"ragmi gate: {result['verdict'].upper()}: {k[BREACH]} breached, {k[NO_EVIDENCE]} without evidence, "
        f"{k[PASS]} passed, over {len(result['limits'])} limit(s)"
    )
    if result["verdict"] == VERDICT_UNDECIDED:
        total += ": no cell has evidence, the gate decides nothing at this n" + (
            f" (exit {result['exit_code']})" if result["exit_code"] else " (not failing: fail_on_undecided false)"
        )
    lines.append(total)
    return lines


def read_result(path: str | os.PathLike) -> dict:
    """A gate.json written by :func:`write_outputs` (RagmiError when it is not one)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise RagmiError(f"cannot read the gate's verdict {path}: {e}") from None
    codes = (EXIT_PASS, EXIT_FAIL, EXIT_UNDECIDED)
    if not isinstance(doc, dict) or doc.get("version") not in READ_VERSIONS or doc.get("exit_code") not in codes:
        raise RagmiError(f"{path} is not a gate.json of this ragmi (version {JSON_VERSION})")
    return doc


# ---------------------------------------------------------------------------------------------------
# the command


def built_tables(cfg: Mapping) -> list[str]:
    """The tables the gate's limits read that the validated config ``cfg`` builds."""
    from .report.registry import TABLES, built

    return [t for t in tables_read(cfg["gate"]["limits"]) if t in TABLES and built(TABLES[t], cfg)]


RUN_KEYS = ("datasets", "targets", "attacks")  # what a config that defines a run sets (config/schema.yaml)


def default_config_path() -> Path:
    """The embedded default config/config.yaml: the run's config when snakemake got no --configfile."""
    from .config import SCHEMA_PATH

    return SCHEMA_PATH.with_name("config.yaml")


def _merge(a: dict, b: Mapping) -> dict:
    """``b`` merged into ``a`` as Snakemake merges config files (later keys win, mappings nested)."""
    for k, v in b.items():
        a[k] = _merge(dict(a[k]), v) if isinstance(v, Mapping) and isinstance(a.get(k), Mapping) else v
    return a


def _merged_config(paths: Sequence[str]) -> dict:
    """The config files merged as Snakemake merges several --configfile (later keys win, nested)."""
    from .config import read_config_file

    cfg: dict = {}
    for p in paths:
        doc = read_config_file(p)
        if not isinstance(doc, Mapping):
            raise RagmiError(f"config file {p} does not hold a mapping")
        cfg = _merge(cfg, doc)
    return cfg


def _limits_file(path: str) -> dict:
    """A --limits file: a mapping with a ``gate:`` section and nothing else."""
    from .config import read_config_file

    doc = read_config_file(path)
    other = sorted(str(k) for k in doc if k != "gate")
    if other or not isinstance(doc.get("gate"), Mapping):
        raise RagmiError(
            f"limits file {path} must hold a gate: section only (gate: {{limits: [...]}})"
            + (f", not {', '.join(other)}: pass those with --configfile" if other else "")
        )
    return doc


def gate_config(configfiles: Sequence[str] | None, limits: str | None) -> dict:
    """The unvalidated config the command evaluates: the --configfile files merged (layered on the
    embedded default when they set none of ``datasets``, ``targets``, ``attacks``, e.g. a file with
    only a ``gate:`` section; a file that defines a run stands alone, as in snakemake), or the
    embedded default without them; the --limits file's ``gate:`` on top."""
    from .config import read_config_file

    cfg = _merged_config(configfiles) if configfiles else {}
    if not any(k in cfg for k in RUN_KEYS):
        cfg = _merge(read_config_file(default_config_path()), cfg)
    if limits:
        cfg = _merge(cfg, _limits_file(limits))
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """``ragmi gate``: 0 pass, 1 breach (or no evidence under fail_on_no_evidence), 2 bad input, 3
    undecided (no cell has evidence)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="ragmi gate",
        description=(
            "Check a run's tables against the config's gate.limits (exit 0: pass, 1: a limit breached or a cell "
            "without evidence, 2: bad input, 3: undecided, no cell has evidence at this n). With --configfile or "
            "--limits the limits are evaluated on <results>/tables and the files written to <results>/gate; "
            "without either, the verdict the rule gate wrote to <results>/gate/gate.json is read. See docs/gate.md."
        ),
        epilog=(
            "examples: ragmi gate --limits limits.yaml (a file with only a gate: section, on a run of the embedded "
            "default); ragmi gate --configfile my.yaml --limits limits.yaml (a run of my.yaml, other limits)"
        ),
    )
    parser.add_argument("--results", default="results", help="the run's results folder (default: results)")
    parser.add_argument(
        "--configfile",
        nargs="+",
        metavar="FILE",
        help=(
            "the run's config file(s), merged as Snakemake merges them; files that set none of datasets, targets, "
            "attacks (e.g. only a gate: section) are layered on the embedded default config/config.yaml"
        ),
    )
    parser.add_argument(
        "--limits",
        metavar="FILE",
        help=(
            "a YAML file with only a gate: section (limits, fail_on_no_evidence, ...), layered on the run's config: "
            "the --configfile files, else the embedded default config/config.yaml"
        ),
    )
    parser.add_argument(
        "--out", metavar="DIR", help="where to write gate.json, junit.xml and gate.sarif (default: <results>/gate)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_BAD_INPUT if e.code else EXIT_PASS
    results = Path(args.results)
    try:
        if args.configfile or args.limits:
            from .config import validate_config

            cfg = validate_config(gate_config(args.configfile, args.limits))
            gate = cfg["gate"]
            if not gate["limits"]:
                raise RagmiError("config key gate.limits: no limits configured, nothing to check")
            if not (results / "tables").is_dir():
                raise RagmiError(f"{results / 'tables'} does not exist: run the pipeline first (or pass --results)")
            result = evaluate(
                gate["limits"],
                results / "tables",
                gate["fail_on_no_evidence"],
                built_tables(cfg),
                fail_on_undecided=gate.get("fail_on_undecided", True),
            )
            write_outputs(result, args.out or results / "gate")
        else:
            path = results / "gate" / "gate.json"
            if not path.is_file():
                raise RagmiError(
                    f"{path} does not exist: run snakemake with gate.enabled: true, or pass --configfile or "
                    "--limits to evaluate here"
                )
            result = read_result(path)
    except RagmiError as e:
        print(f"ragmi: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in summary_lines(result):
        print(line, file=sys.stderr)
    return int(result["exit_code"])
