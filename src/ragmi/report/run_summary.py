"""The end of a run: its verdicts in a few terminal lines, and ``results/run.json``.

:func:`summary_text` reads ``<results>/tables/summary.csv`` (one row per dataset × target × attack
headline variant, ragmi.report.summary) and writes, at most :data:`WIDTH` columns wide:

* one line counting the cells per verdict;
* the leaking cells as a table: target, attack/variant, AUC with its 95% interval, the evaluation
  ROC's TPR at x% FPR, the TPR at the reference threshold with the FPR it realised, queries per
  candidate;
* the cells whose verdict needs reading, one line each with the reason: ``control failed``,
  ``inverted``, ``uninformative``;
* the rest compressed to counts (``no evidence at this n``, with the AUC the run's n detects, and
  ``not computed``);
* one line on the p-values the run prints (:func:`pvalue_line`): how many, how many below 0.05 read
  one by one and how many after Holm over all of them (ragmi.multiplicity.holm);
* where to read on: the results page, the tables, ``run.json`` and, when the gate ran, its verdict.

The Snakefile's ``onsuccess:`` prints it (:func:`end_of_run`, which never raises) and so does
``python -m ragmi summary [--results DIR]`` (:func:`main`).

:func:`run_record` is ``results/run.json`` (written by rule ``results_page`` with the results page):
every summary row (numbers as numbers, empty cells null), the verdicts (counts and the cells of each),
the provenance (ragmi.report.provenance) and the gate's verdict when ``results/gate/gate.json`` exists;
:data:`RUN_JSON_SCHEMA` is its JSON Schema.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

WIDTH = 100
JSON_VERSION = 1
# ragmi.analysis.summary.VERDICTS (not imported: this module stays light for the command and onsuccess)
VERDICTS = ("leaks", "inverted", "no evidence at this n", "uninformative", "control failed", "not computed")
NAMED = ("control failed", "inverted", "uninformative")  # named one per line, in this order
DASH = "–"
TEXT_COLUMNS = frozenset(
    {
        "dataset",
        "target",
        "defenses",
        "attack",
        "variant",
        "verdict",
        "verdict_detail",
        "controls",
        "controls_from",
        "tpr_note",
        "uninformative_reason",
        "informative_controls",
        "verdict_holm",
    }
)
CANARY_P = "Fisher p (one-sided, vs undefended)"  # the canaries table's column (ragmi.report.audit_tables)


class NoSummary(Exception):
    """The results folder has no (readable) summary table."""


def summary_path(results_dir: str | os.PathLike) -> Path:
    return Path(results_dir) / "tables" / "summary.csv"


def read_summary(results_dir: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of ``<results_dir>/tables/summary.csv`` as strings; :class:`NoSummary` when it is
    missing or lacks the columns that name a cell and its verdict."""
    path = summary_path(results_dir)
    if not path.is_file():
        raise NoSummary(f"no summary table: {path} does not exist")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        missing = [c for c in ("target", "attack", "variant", "verdict") if c not in (reader.fieldnames or [])]
    if missing:
        raise NoSummary(f"{path} is not a summary table (no column {', '.join(missing)})")
    return rows


# ---------------------------------------------------------------------------------------------------
# cells


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return float("nan")
    return v


def _f(x, digits: int = 2) -> str:
    v = _num(x)
    return DASH if math.isnan(v) else f"{v:.{digits}f}"


def ci(value, lo, hi) -> str:
    """``"0.81 [0.68, 0.90]"``; the point alone without an interval; ``–`` without a value."""
    if math.isnan(_num(value)):
        return DASH
    if math.isnan(_num(lo)) or math.isnan(_num(hi)):
        return _f(value)
    return f"{_f(value)} [{_f(lo)}, {_f(hi)}]"


def pct(level) -> str:
    """A fraction as a percentage: 0.05 → ``"5%"``."""
    v = _num(level)
    return DASH if math.isnan(v) else f"{round(100 * v, 6):g}%"


def count(x) -> str:
    v = _num(x)
    if math.isnan(v):
        return DASH
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.1f}"


def cell_name(r: Mapping, datasets: int = 1) -> str:
    """``target attack/variant`` (``dataset/target`` when the run has several datasets)."""
    return f"{_target(r, datasets)} {_variant(r)}"


def _target(r: Mapping, datasets: int = 1) -> str:
    t = str(r.get("target", ""))
    return f"{r.get('dataset', '')}/{t}" if datasets > 1 else t


def _variant(r: Mapping) -> str:
    v, a = str(r.get("variant", "")), str(r.get("attack", ""))
    return v if v == a or v.startswith(f"{a}/") else f"{a}: {v}"


def _levels(rows: Sequence[Mapping], col: str) -> list[float]:
    return sorted({v for r in rows if not math.isnan(v := _num(r.get(col)))})


def roc_tpr_cell(r: Mapping, with_level: bool = False) -> str:
    """The evaluation ROC's TPR at x% FPR (point); ``n/e`` when no level is resolved."""
    if math.isnan(_num(r.get("roc_tpr"))):
        return "n/e"
    return _f(r["roc_tpr"]) + (f"@{pct(r.get('roc_tpr_fpr'))}" if with_level else "")


def ref_tpr_cell(r: Mapping) -> str:
    """The TPR at the reference threshold and, in brackets, the FPR it realised (points)."""
    if math.isnan(_num(r.get("tpr"))):
        return DASH
    fpr = _num(r.get("fpr_realized"))
    return _f(r["tpr"]) + ("" if math.isnan(fpr) else f" ({fpr:.2f})")


def reason(r: Mapping) -> str:
    """Why a cell is named: the row's detail (for uninformative, its reason first)."""
    v = r.get("verdict", "")
    detail = str(r.get("verdict_detail") or "").strip()
    if v == "uninformative":
        why = str(r.get("uninformative_reason") or "").strip()
        return why or detail or "every evaluation candidate got the same score"
    if v == "inverted" and not detail:
        return "the AUC interval lies below 0.5: the score ranks non-members higher"
    if v == "control failed" and not detail:
        return "a negative control's AUC interval excludes 0.5"
    return detail


# ---------------------------------------------------------------------------------------------------
# the terminal text


def _fit(header: list[str], rows: list[list[str]], width: int, shrink: Sequence[int], mins: Sequence[int]) -> str:
    """A left-aligned table two spaces apart, at most ``width`` columns: columns ``shrink`` (with their
    minimum widths ``mins``) are cut, widest first, their cells elided in the middle (``…``)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    total = lambda: 2 + sum(widths) + 2 * (len(widths) - 1)  # noqa: E731
    while total() > width:
        cands = [i for i, m in zip(shrink, mins) if widths[i] > m]
        if not cands:
            break
        i = max(cands, key=lambda j: widths[j])
        widths[i] -= 1

    def cut(text: str, w: int) -> str:  # the middle elided: a target's name and a variant's end stay
        if len(text) <= w:
            return text
        head = (w - 1) * 2 // 5
        return text[:head] + "…" + text[len(text) - (w - 1 - head) :]

    lines = []
    for r in [header, *rows]:
        lines.append(("  " + "  ".join(cut(str(c), w).ljust(w) for c, w in zip(r, widths))).rstrip())
    return "\n".join(lines)


def _wrap(text: str, width: int, indent: str = "", subsequent: str = "    ") -> list[str]:
    lines = textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=subsequent, break_on_hyphens=False
    )
    return lines or [indent]


def verdict_counts(rows: Sequence[Mapping]) -> dict[str, int]:
    """{verdict: cells}: every verdict of :data:`VERDICTS` (0 included), then any other in the table."""
    out = {v: 0 for v in VERDICTS}
    for r in rows:
        out[r.get("verdict", "")] = out.get(r.get("verdict", ""), 0) + 1
    return out


def _power_note(rest: Sequence[Mapping]) -> str:
    sizes = {}
    for r in rest:
        a50, a80 = _num(r.get("min_detectable_auc")), _num(r.get("min_detectable_auc_80"))
        if not math.isnan(a50):
            sizes.setdefault((count(r.get("n_members")), count(r.get("n_nonmembers"))), (a50, a80))
    parts = []
    for (m, n), (a50, a80) in sorted(sizes.items()):
        tail = "" if math.isnan(a80) else f", {a80:.2f} with 80%"
        parts.append(f"at n = {m}/{n} an AUC of {a50:.2f} is told from chance with 50% power{tail}")
    return "; ".join(parts)


def summary_text(
    results_dir: str | os.PathLike = "results",
    rows: Sequence[Mapping] | None = None,
    width: int = WIDTH,
) -> str:
    """The end-of-run summary (module docstring), every line at most ``width`` characters."""
    results_dir = Path(results_dir)
    rows = read_summary(results_dir) if rows is None else rows
    counts = verdict_counts(rows)
    datasets = len({r.get("dataset", "") for r in rows})
    head = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    what = "dataset × target × attack variant" if datasets > 1 else "target × attack variant"
    lines = _wrap(f"ragmi: {len(rows)} cells ({what}): {head or 'none'}", width, subsequent="  ")
    if datasets == 1 and rows:
        lines.append(f"  dataset: {rows[0].get('dataset', '')}")

    leaking = [r for r in rows if r.get("verdict") == "leaks"]
    if leaking:
        roc_levels, ref_levels = _levels(leaking, "roc_tpr_fpr"), _levels(leaking, "tpr_fpr")
        roc_head = f"TPR@{pct(roc_levels[0])}FPR" if len(roc_levels) == 1 else "TPR@FPR"
        ref_head = f"TPR@ref.{pct(ref_levels[0])} (FPR)" if len(ref_levels) == 1 else "TPR@ref. (FPR)"
        table = [
            [
                _target(r, datasets),
                _variant(r),
                ci(r.get("auc"), r.get("auc_lo"), r.get("auc_hi")),
                roc_tpr_cell(r, with_level=len(roc_levels) > 1),
                ref_tpr_cell(r),
                count(r.get("queries_per_candidate")),
            ]
            for r in leaking
        ]
        header = ["target", "attack/variant", "AUC [95% CI]", roc_head, ref_head, "queries"]
        lines += ["", "Leaking (AUC interval above 0.5):"]
        lines.append(_fit(header, table, width, shrink=(0, 1), mins=(10, 14)))
        lines += _wrap(
            f"{roc_head}: the evaluation ROC's TPR; {ref_head}: the TPR at the threshold the reference set "
            "gives for that FPR, with the FPR it realised; queries: sent per candidate.",
            width,
            indent="  ",
            subsequent="  ",
        )
    else:
        lines += ["", "No cell leaks (no AUC interval lies above 0.5)."]

    named = [r for v in NAMED for r in rows if r.get("verdict") == v]
    if named:
        lines += ["", "To read before trusting a number:"]
        for r in named:
            auc = ci(r.get("auc"), r.get("auc_lo"), r.get("auc_hi"))
            text = f"{r['verdict']}: {cell_name(r, datasets)}, AUC {auc}"
            why = reason(r)
            lines += _wrap(f"{text}: {why}" if why else text, width, indent="  ", subsequent="      ")

    rest = [r for r in rows if r.get("verdict") not in ("leaks", *NAMED)]
    if rest:
        others = {v: n for v, n in counts.items() if v not in ("leaks", *NAMED) and n}
        text = "The rest: " + ", ".join(f"{n} {v}" for v, n in others.items())
        power = _power_note([r for r in rest if r.get("verdict") == "no evidence at this n"])
        lines += [""] + _wrap(f"{text} ({power})." if power else f"{text}.", width, subsequent="  ")

    lines += dataset_inference_lines(results_dir, width)
    lines += coverage_lines(results_dir, width)
    pv = pvalue_line(results_dir, rows, width)
    if pv:
        lines += [""] + pv
    lines += [""] + where_lines(results_dir)
    return "\n".join(lines) + "\n"


def _p(x: float) -> str:
    return "–" if x != x else (f"{x:.0e}" if x < 0.001 else f"{x:.3f}")


def dataset_inference_lines(results_dir: str | os.PathLike, width: int = WIDTH) -> list[str]:
    """The data owner's view, from ``tables/dataset_inference.csv`` when the run wrote it: per dataset and
    target, each suspect set's p-value and verdict, and a warning where the test's calibration failed."""
    path = Path(results_dir) / "tables" / "dataset_inference.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        return []
    lines = ["", "Dataset inference (is the set, as a whole, in the database? one-sided p, level α):"]
    order: dict = {}
    for r in rows:
        order.setdefault((r["dataset"], r["target"], r.get("evidence") or ""), []).append(r)
    several = len({d for d, _, _ in order}) > 1
    kinds = len({e for _, _, e in order}) > 1
    for (d, t, e), every in order.items():
        rs = [r for r in every if (r.get("shift") or "none") == "none"]
        designs = len({r.get("design") or "raw" for r in rs}) > 1
        parts = []
        for r in rs:
            name = r["suspect_set"] if r["suspect_set"] != "mixture" else f"f={float(r['f']):.2f}"
            if designs and (r.get("design") or "raw") != "raw":
                name = f"{name} [{r['design']}]"
            p, floor = _num(r["p_value"]), _num(r.get("p_floor"))
            shown = f"≤{_p(floor)}" if p == p and floor == floor and p <= floor * (1 + 1e-9) else _p(p)
            holm = _num(r.get("p_holm"))
            holm_part = f" Holm p={_p(holm)}" if r.get("p_holm") is not None else ""
            after = r.get("verdict_holm")
            after_part = f" ({after} after Holm)" if after and after != r["verdict"] else ""
            parts.append(f"{name} p={shown}{holm_part} {r['verdict']}{after_part}")
        who = (f"{d}/{t}" if several else t) + (f" ({e})" if kinds else "")
        lines += _wrap(f"{who}: " + "; ".join(parts), width, indent="  ", subsequent="      ")
        shifted = [
            r for r in every if (r.get("shift") or "none") != "none" and _num(r["p_value"]) == _num(r["p_value"])
        ]
        if shifted:
            counts = {}
            for r in shifted:
                k = counts.setdefault(r.get("design") or "raw", [0, 0])
                k[0] += _num(r["p_value"]) < _num(r.get("alpha"))
                k[1] += 1
            text = "; ".join(f"{dsg} {k} of {n}" for dsg, (k, n) in counts.items())
            lines += _wrap(f"{who}: shifted non-member sets read 'in the database': {text}", width, "  ")
        alpha = _num(rs[0].get("alpha")) if rs and rs[0].get("alpha") else 0.05
        if rs and rs[0].get("calibrated") == "False" and _num(rs[0].get("calibration_lo")) > alpha:
            lines += _wrap(
                f"{who}: the test's false-positive rate is above {alpha:g}: its p-values are not to be trusted",
                width,
                "  ",
            )
    return lines


def coverage_lines(results_dir: str | os.PathLike, width: int = WIDTH) -> list[str]:
    """The adaptive extraction campaigns, from ``tables/coverage.csv`` when the run wrote it: per row the
    share of the knowledge base copied verbatim and in meaning against its chance floor, with the verdict."""
    from .campaign_tables import share_cell

    rows = _csv_rows(Path(results_dir) / "tables" / "coverage.csv")
    if not rows:
        return []
    lines = ["", "How much of the knowledge base the campaigns copied (coverage.md; chance: documents outside it):"]
    for r in rows:
        head = f"{r['variant']} on {r['dataset']}/{r['target']} ({r['budget']} queries x {r['seeds']} seeds)"
        text = (
            f"{head}: verbatim {share_cell(r, 'extraction_rouge')} of {r['kb_size']} chunks, chance "
            f"{share_cell(r, 'chance_rouge')}: {r['verdict_rouge']} (p {_p(_num(r['p_rouge']))}, Holm "
            f"{_p(_num(r['p_rouge_holm']))}); in meaning {share_cell(r, 'extraction_semantic')}, chance "
            f"{share_cell(r, 'chance_semantic')}: {r['verdict_semantic']} (p {_p(_num(r['p_semantic']))}, Holm "
            f"{_p(_num(r['p_semantic_holm']))}); retrieved {share_cell(r, 'retrieval')}"
        )
        lines += _wrap(text, width, indent="  ", subsequent="      ")
    return lines


def _csv_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def run_pvalues(results_dir: str | os.PathLike, rows: Sequence[Mapping]) -> dict[str, list[float]]:
    """Every p-value the run prints, by source, each test once: the summary cells' one-sided p of AUC >
    0.5 (``auc_p_greater`` of the cells read family-wise, those with ``auc_p_greater_holm``), the
    negative controls' two-sided p (``control_p_*`` of the rows that own them), dataset inference's
    ``p_value``, the canaries' one-sided Fisher p (the canaries table, else privacy_utility's
    ``canary_fisher_p``: the same test) and the campaigns' one-sided Fisher p of copying above chance
    (``coverage``'s ``p_rouge`` and ``p_semantic``)."""
    tables = Path(results_dir) / "tables"
    out: dict[str, list[float]] = {"cells": [], "controls": [], "dataset inference": [], "canaries": [], "coverage": []}
    for r in rows:
        if not math.isnan(_num(r.get("auc_p_greater_holm"))):
            out["cells"].append(_num(r.get("auc_p_greater")))
        if r.get("controls_from") and r.get("controls_from") == r.get("target"):
            for c in ("control_p_null_database", "control_p_no_retrieval"):
                if not math.isnan(_num(r.get(c))):
                    out["controls"].append(_num(r.get(c)))
    out["dataset inference"] = [_num(r.get("p_value")) for r in _csv_rows(tables / "dataset_inference.csv")]
    fisher = {r.get("target"): _num(r.get(CANARY_P)) for r in _csv_rows(tables / "canaries.csv")}
    if not fisher:
        fisher = {r.get("target"): _num(r.get("canary_fisher_p")) for r in _csv_rows(tables / "privacy_utility.csv")}
    out["canaries"] = list(fisher.values())
    out["coverage"] = [_num(r.get(c)) for r in _csv_rows(tables / "coverage.csv") for c in ("p_rouge", "p_semantic")]
    return {k: [p for p in v if not math.isnan(p)] for k, v in out.items()}


def pvalue_line(results_dir: str | os.PathLike, rows: Sequence[Mapping], width: int = WIDTH) -> list[str]:
    """One line: how many p-values the run prints (:func:`run_pvalues`), how many are below 0.05 read one
    by one and how many after Holm over all of them (family-wise 0.05); nothing when there are none."""
    from ..multiplicity import holm

    by = run_pvalues(results_dir, rows)
    pvals = [p for v in by.values() for p in v]
    if not pvals:
        return []
    raw = sum(p < 0.05 for p in pvals)
    after = int((holm(pvals) < 0.05).sum())
    parts = ", ".join(f"{len(v)} {k}" for k, v in by.items() if v)
    return _wrap(
        f"p-values: {len(pvals)} printed by this run ({parts}): {raw} below 0.05 read one by one, {after} after "
        f"Holm over all {len(pvals)} (family-wise 0.05).",
        width,
        subsequent="  ",
    )


def gate_line(results_dir: str | os.PathLike) -> str | None:
    """``"FAIL: 1 breached, 0 without evidence, 3 passed"`` from ``gate/gate.json``; None without one."""
    path = Path(results_dir) / "gate" / "gate.json"
    if not path.is_file():
        return None
    try:
        g = json.loads(path.read_text())
        k = g.get("counts", {})
        return (
            f"{str(g['verdict']).upper()}: {k.get('breach', 0)} breached, {k.get('no evidence', 0)} without "
            f"evidence, {k.get('pass', 0)} passed ({path})"
        )
    except (OSError, ValueError, KeyError, AttributeError):
        return f"unreadable ({path})"


def where_lines(results_dir: str | os.PathLike) -> list[str]:
    """Where to read on: the results page, the tables, run.json and the gate's verdict."""
    results_dir = Path(results_dir)

    def shown(p: Path) -> str:
        return str(p) if p.exists() else f"{p} (not written)"

    tables = results_dir / "tables"
    n = len(list(tables.glob("*.csv"))) if tables.is_dir() else 0
    out = [
        f"Results page  {shown(results_dir / 'results.html')}",
        f"Tables        {tables}/ ({n} tables as .md and .csv; summary.md first)",
        f"Run record    {shown(results_dir / 'run.json')}",
    ]
    gate = gate_line(results_dir)
    if gate:
        out.append(f"Gate          {gate}")
    return out


def end_of_run(results_dir: str | os.PathLike = "results", built: Sequence[str] | None = None, file=None) -> None:
    """What the Snakefile's ``onsuccess:`` prints: :func:`summary_text` when this run's DAG has the
    summary table (``built``: the outputs of its jobs; None: whenever the table exists), else nothing.
    Never raises: a summary that cannot be printed says so in one line."""
    out = sys.stdout if file is None else file
    try:
        path = summary_path(results_dir)
        if built is not None and str(path) not in {str(b) for b in built}:
            return
        if not path.is_file():
            return
        print("\n" + summary_text(results_dir), file=out, end="", flush=True)
    except Exception as e:  # noqa: BLE001 -- the end-of-run summary never fails a run
        print(f"ragmi: no end-of-run summary ({type(e).__name__}: {e})", file=out, flush=True)


# ---------------------------------------------------------------------------------------------------
# run.json


def _typed_rows(rows: Sequence[Mapping]) -> list[dict]:
    """The CSV's strings typed per column as pandas reads them: numbers (all non-empty cells parse as
    numbers; integers as integers), booleans (all ``True``/``False``), else strings; empty cells and
    NaN null."""
    cols = list(rows[0]) if rows else []
    kinds = {}
    for c in cols:
        vals = [r.get(c) for r in rows if r.get(c) not in (None, "")]
        if c in TEXT_COLUMNS or not vals:
            kinds[c] = "text" if c in TEXT_COLUMNS else "null"
        elif all(v in ("True", "False") for v in vals):
            kinds[c] = "bool"
        elif all(not math.isnan(_num(v)) or v.lower() == "nan" for v in vals):
            kinds[c] = "num"
        else:
            kinds[c] = "text"

    def conv(v, kind):
        if v is None or v == "":
            return "" if kind == "text" else None
        if kind == "bool":
            return v == "True"
        if kind == "num":
            x = _num(v)
            if math.isnan(x) or math.isinf(x):
                return None
            return int(x) if x == int(x) and "." not in v and "e" not in v.lower() else x
        if kind == "null":
            return None
        return v

    return [{c: conv(r.get(c), kinds[c]) for c in cols} for r in rows]


def cell_id(r: Mapping) -> str:
    """``dataset/target/variant``: one summary cell."""
    return f"{r.get('dataset', '')}/{r.get('target', '')}/{r.get('variant', '')}"


def run_record(
    results_dir: str | os.PathLike = "results",
    provenance: Mapping | None = None,
    rows: Sequence[Mapping] | None = None,
    gate_json: str | os.PathLike | None = "auto",
) -> dict:
    """The content of ``results/run.json`` (module docstring); paths as the run names them.
    ``gate_json``: the gate's verdict file (``"auto"``: ``<results_dir>/gate/gate.json`` when it exists;
    None: the gate did not run)."""
    results_dir = Path(results_dir)
    if rows is None:
        rows = read_summary(results_dir) if summary_path(results_dir).is_file() else []
    counts = verdict_counts(rows)
    gate_path = results_dir / "gate" / "gate.json" if gate_json == "auto" else gate_json
    gate = None
    if gate_path is not None and Path(gate_path).is_file():
        gate_path = Path(gate_path)
        g = json.loads(gate_path.read_text())
        gate = {
            "file": str(gate_path),
            "verdict": g.get("verdict"),
            "exit_code": g.get("exit_code"),
            "counts": g.get("counts", {}),
        }
    tables = sorted(results_dir.glob("tables/*.csv"))
    return {
        "version": JSON_VERSION,
        "results_dir": str(results_dir),
        "files": {
            "results_page": str(results_dir / "results.html"),
            "summary": str(summary_path(results_dir)),
            "tables": {p.stem: str(p) for p in tables},
        },
        "verdicts": {
            "counts": counts,
            "cells": {v: [cell_id(r) for r in rows if r.get("verdict") == v] for v in counts},
        },
        "summary": _typed_rows(rows),
        "gate": gate,
        "provenance": dict(provenance or {}),
    }


_NUM_OR_NULL = {"type": ["number", "null"]}
RUN_JSON_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ragmi results/run.json",
    "type": "object",
    "required": ["version", "results_dir", "files", "verdicts", "summary", "gate", "provenance"],
    "properties": {
        "version": {"const": JSON_VERSION},
        "results_dir": {"type": "string"},
        "files": {
            "type": "object",
            "required": ["results_page", "summary", "tables"],
            "properties": {
                "results_page": {"type": "string"},
                "summary": {"type": "string"},
                "tables": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "verdicts": {
            "type": "object",
            "required": ["counts", "cells"],
            "properties": {
                "counts": {
                    "type": "object",
                    "required": list(VERDICTS),
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
                "cells": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            },
        },
        "summary": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["dataset", "target", "attack", "variant", "verdict"],
                "properties": {
                    "dataset": {"type": "string"},
                    "target": {"type": "string"},
                    "attack": {"type": "string"},
                    "variant": {"type": "string"},
                    "verdict": {"type": "string"},
                    "auc": _NUM_OR_NULL,
                    "auc_lo": _NUM_OR_NULL,
                    "auc_hi": _NUM_OR_NULL,
                    "n_members": {"type": ["integer", "null"]},
                    "n_nonmembers": {"type": ["integer", "null"]},
                },
            },
        },
        "gate": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["file", "verdict", "exit_code", "counts"],
                    "properties": {"verdict": {"enum": ["pass", "fail", "undecided"]}},
                },
            ]
        },
        "provenance": {
            "type": "object",
            "required": ["config_sha256", "ragmi", "python", "models", "cpu", "gpus", "date", "wall_time"],
            "properties": {
                "config_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "ragmi": {"type": "object", "required": ["version"]},
                "models": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["role", "name", "sha256"],
                        "properties": {"sha256": {"type": ["string", "null"]}},
                    },
                },
                "cpu": {"type": "object"},
                "gpus": {"type": "array"},
                "date": {"type": "string"},
                "wall_time": {"type": "object"},
            },
        },
    },
}


def write_run_json(record: Mapping, path: str | os.PathLike) -> None:
    """``record`` as indented JSON, atomically (ragmi.io)."""
    from ..io import atomic_write_text

    atomic_write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n", path)


# ---------------------------------------------------------------------------------------------------
# python -m ragmi summary


def main(argv: Sequence[str] | None = None) -> int:
    """``ragmi summary [--results DIR]``: the end-of-run summary of a run's results folder; exit 0, or 1
    with one message when DIR has no summary table."""
    parser = argparse.ArgumentParser(
        prog="ragmi summary",
        description="Print a run's verdicts (results/tables/summary.csv) as at the end of the run.",
    )
    parser.add_argument(
        "--results", default="results", metavar="DIR", help="the run's results folder (default: results)"
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        text = summary_text(args.results)
    except NoSummary as e:
        print(
            f"ragmi summary: {e}; run the pipeline (snakemake --cores all), or name a run's results folder "
            "with --results DIR",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
