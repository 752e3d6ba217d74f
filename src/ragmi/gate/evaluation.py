"""The gate's evaluation: every cell a limit matches in its table gets ``pass``, ``breach`` or ``no
evidence`` (the rules: the package's docstring, :mod:`ragmi.gate`), and the verdict over all cells:
``pass`` (exit 0), ``fail`` (exit 1), ``undecided`` (exit 3), as the dict written to gate.json.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .limits import flipped_value, limit_bound, limit_id, limit_min_n, matches, two_sided
from .metrics import ANY, METRICS, SELECTORS, Metric, number

PASS, BREACH, NO_EVIDENCE = "pass", "breach", "no evidence"
VERDICT_PASS, VERDICT_FAIL, VERDICT_UNDECIDED = "pass", "fail", "undecided"
EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_UNDECIDED = 0, 1, 2, 3
JSON_VERSION = 2  # 2: verdict undecided (exit 3), two-sided AUC limits, the default min_n


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


def _fmt(x: float) -> str:
    return "missing" if math.isnan(x) else f"{x:.4g}"


def _cell_n(metric: Metric, r: Mapping) -> tuple[float, str]:
    """``(n, wording)``: the n that decides the cell."""
    if metric.n == "eval":
        nm, nn = number(r.get("n_members")), number(r.get("n_nonmembers"))
        return min(nm, nn), f"n = {_fmt(nm)}+{_fmt(nn)}"
    if metric.n == "canaries":
        n = number(r.get("n_planted"))
        return n, f"{_fmt(n)} canaries planted"
    if metric.n == "runs":
        n = number(r.get("runs (distinct)"))
        return n, f"{_fmt(n)} distinct leakage runs"
    n = number(r.get("n"))
    return n, f"n = {_fmt(n)}"


def _realised_fpr(r: Mapping) -> str:
    """``"at evaluation FPR 0.05 [0, 0.25] (n = 20 non-members)"``: the FPR the summary row's reference
    threshold realised on the evaluation non-members, with its interval and n -- a TPR at the reference
    threshold for x% FPR is "at x% FPR" only as far as this says so; ``"(evaluation FPR not in the table)"``
    when the row has none."""
    realised = number(r.get("fpr_realized"))
    if math.isnan(realised):
        return "(evaluation FPR not in the table)"
    lo, hi, n = number(r.get("fpr_realized_lo")), number(r.get("fpr_realized_hi")), number(r.get("n_nonmembers"))
    out = f"at evaluation FPR {_fmt(realised)}"
    if not (math.isnan(lo) or math.isnan(hi)):
        out += f" [{_fmt(lo)}, {_fmt(hi)}]"
    return out + ("" if math.isnan(n) else f" (n = {_fmt(n)} non-members)")


def _detail(metric: Metric, r: Mapping) -> str:
    """What the finding adds to the number: the interval, the FPR level and the evaluation FPR the
    reference threshold realised (:func:`_realised_fpr`), the table's verdict."""
    if metric.table == "summary":
        out = f"AUC {_fmt(number(r.get('auc')))} [{_fmt(number(r.get('auc_lo')))}, {_fmt(number(r.get('auc_hi')))}]"
        level = number(r.get("tpr_fpr"))
        if not math.isnan(level):
            out += (
                f", TPR at the reference threshold for {100 * level:g}% FPR {_fmt(number(r.get('tpr')))} "
                f"[{_fmt(number(r.get('tpr_lo')))}, {_fmt(number(r.get('tpr_hi')))}]"
            )
            out += " " + _realised_fpr(r)
        mda, mda80 = number(r.get("min_detectable_auc")), number(r.get("min_detectable_auc_80"))
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
        f"{r.get('utility_metric') or 'utility'} {_fmt(number(r.get('utility')))} "
        f"[{_fmt(number(r.get('utility_lo')))}, {_fmt(number(r.get('utility_hi')))}], "
        f"change {_fmt(number(r.get('delta_utility')))} "
        f"[{_fmt(number(r.get('delta_utility_lo')))}, {_fmt(number(r.get('delta_utility_hi')))}]"
    )


def _is_false(x) -> bool:
    """A CSV cell that says false (``informative``); empty or anything else is not."""
    return str(x).strip().casefold() in ("false", "0", "0.0", "no", "f")


# ---------------------------------------------------------------------------------------------------
# the cells and the verdict


def _cell_name(metric: Metric, r: Mapping, limit: Mapping | None = None) -> dict:
    """The cell's keys (from the row, or from the limit's selectors for a cell without a row)."""
    src = r if limit is None else {k: limit.get(k, ANY) for k in metric.keys}
    out = {k: str(src.get(k, "")) for k in SELECTORS if k in metric.keys}
    if metric.table == "privacy_utility" and limit is None and r.get("utility_metric"):
        out["utility_metric"] = str(r["utility_metric"])
    return out


@dataclass
class _LimitSpec:
    """A limit as its cells read it (:func:`_limit_cells`)."""

    metric: Metric
    metric_name: str  # the limit's ``metric`` key
    lid: str
    op: str  # "max" or "min"
    bound: float
    both: bool  # two-sided: the flipped score is held to the limit too
    min_n: int | None
    source: str
    rule: str
    path: Path

    def crosses(self, value: float) -> bool:
        """Whether ``value`` lies beyond the bound."""
        return value > self.bound if self.op == "max" else value < self.bound


def _cell_message(spec: _LimitSpec, name: Mapping, status: str, value, n_text: str, detail: str, flipped: float) -> str:
    """The cell's one-line finding, as gate.json and the console print it."""
    metric, op, bound = spec.metric, spec.op, spec.bound
    sign = ">" if op == "max" else "<"
    fl = _fmt(flipped)
    if status == BREACH and spec.crosses(value):
        msg = f"{metric.what} {_fmt(value)} {sign} {op} {bound:g}"
    elif status == BREACH:  # the flipped score's
        msg = (
            f"{metric.what} {_fmt(value)}, inverted: of the flipped score (1 - {metric.flipped}) {fl} "
            f"{sign} {op} {bound:g}"
        )
    elif status == PASS:
        msg = f"{metric.what} {_fmt(value)} within {op} {bound:g}" + (
            f", of the flipped score (1 - {metric.flipped}) {fl} too" if spec.both else ""
        )
    else:
        msg = f"no evidence for {metric.what} {op} {bound:g}"
    where = ", ".join(f"{k} {v}" for k, v in name.items())
    return f"{spec.lid}: {where}: {msg}" + (f" ({n_text})" if n_text else "") + (f"; {detail}" if detail else "")


def _cell(
    spec: _LimitSpec, name: Mapping, status: str, value, n_text: str, detail: str, line, flipped=float("nan")
) -> dict:
    """One cell's entry of gate.json."""
    return {
        "limit": spec.lid,
        "metric": spec.metric_name,
        "op": spec.op,
        "limit_value": spec.bound,
        **{k: name.get(k, "") for k in SELECTORS},
        "utility_metric": name.get("utility_metric", ""),
        "status": status,
        "value": None if value is None or math.isnan(value) else value,
        "flipped_value": None if math.isnan(flipped) else flipped,
        "n": n_text,
        "min_n": spec.min_n,
        "detail": detail,
        "table": str(spec.path),
        "line": line,
        "message": _cell_message(spec, name, status, value, n_text, detail, flipped),
    }


def _no_evidence_detail(spec: _LimitSpec, r: Mapping, n: float, value: float, flipped: float, detail: str):
    """The detail of a matched row's cell that gives no evidence (in the rules' order); None when the row
    decides the limit."""
    metric, min_n, rule = spec.metric, spec.min_n, spec.rule
    if math.isnan(n) or n < 1:
        return "no data at this n; " + detail
    if min_n is None:
        return f"no evidence at any n: {rule}; " + detail
    if n < min_n and spec.source == "config":
        return f"below min_n {min_n}; " + detail
    if n < min_n:
        note = f"no evidence at this n: below the default min_n {min_n} ({rule})"
        return f"{note}; " + detail
    if metric.table == "summary" and r.get("verdict") == "control failed":
        note = r.get("verdict_detail") or ""
        return f"a negative control failed ({note}): not membership"
    if "informative" in r and _is_false(r["informative"]):
        why = (r.get("uninformative_reason") or "").strip() or "no reason given"
        return f"the row is not informative ({why}); " + detail
    if math.isnan(value):
        why = r.get("tpr_note") or r.get("verdict_detail") or "no number in the table"
        return f"{why}; " + detail
    if spec.both and math.isnan(flipped):
        why = f"no {metric.flipped} to check the flipped score against the limit"
        return f"{why}; " + detail
    if metric.table == "summary" and metric.kind == "rate" and spec.op == "max" and number(r.get("auc_hi")) < 0.5:
        why = (
            "the AUC interval lies below 0.5 (inverted: the score ranks non-members higher); the flipped "
            "score's TPR at low FPR is not in the table, so a TPR limit is not decided here (an AUC limit is)"
        )
        return f"{why}; " + detail
    return None


def _row_cell(spec: _LimitSpec, row: Row) -> dict:
    """The cell of a row the limit matches: ``pass``, ``breach`` or ``no evidence``."""
    metric = spec.metric
    r = row.values
    name = _cell_name(metric, r)
    n, n_text = _cell_n(metric, r)
    value = number(r.get(metric.column))
    flipped = flipped_value(spec.metric_name, r) if spec.both else float("nan")
    detail = _detail(metric, r)
    why = _no_evidence_detail(spec, r, n, value, flipped, detail)
    if why is not None:
        return _cell(spec, name, NO_EVIDENCE, value, n_text, why, row.line)
    bad = spec.crosses(value)
    bad = bad or (spec.both and flipped > spec.bound)
    return _cell(spec, name, BREACH if bad else PASS, value, n_text, detail, row.line, flipped)


def _limit_cells(lim: Mapping, rows: list[Row] | None, path: Path) -> tuple[dict, list[dict]]:
    """The limit as described in gate.json, and one entry per cell it matches in ``rows`` (None: the
    table's CSV does not exist)."""
    metric = METRICS[lim["metric"]]
    lid = limit_id(lim)
    op, bound = limit_bound(lim)
    both = two_sided(lim["metric"], op)
    min_n, source, rule = limit_min_n(lim, bound)
    spec = _LimitSpec(metric, lim["metric"], lid, op, bound, both, min_n, source, rule, path)
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
    if rows is None:
        why = f"{path} was not built by this configuration" if path.is_file() else f"{path} does not exist"
        return described, [
            _cell(spec, _cell_name(metric, {}, lim), NO_EVIDENCE, None, "", f"{why}: the table was not built", None)
        ]
    if metric.table == "leakage_dashboard":
        rows = [r for r in rows if r.values.get("block") == "per target"]
    matched = [r for r in rows if matches(lim, metric, r.values)]
    cells: list[dict] = []
    if not matched:
        sel = ", ".join(f"{k} {lim.get(k, ANY)}" for k in metric.keys)
        cells.append(
            _cell(
                spec, _cell_name(metric, {}, lim), NO_EVIDENCE, None, "", f"no row of {path.name} matches {sel}", None
            )
        )
    cells += [_row_cell(spec, row) for row in matched]
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
