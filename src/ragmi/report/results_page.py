"""The results page: ``results/results.html``, one self-contained HTML file a person reads first.

Built by rule ``results_page`` (rules/results.smk) from the CSVs of the tables the configuration
builds and the figures it draws (ragmi.report.registry), and registered in the Snakemake report
(category *Results*, shown inline there).  Inline CSS, the figures embedded as base64 ``data:`` URIs,
a few lines of inline JavaScript that sort a table by the column whose header is clicked; nothing
is loaded from elsewhere.  The page reads well at 1,280 px: cells wrap, a wide table scrolls inside
its own box and never widens the page.

In order:

1. the summary: one row per (dataset ×) target × attack headline variant, with its verdict as a
   coloured badge (``leaks`` red; ``control failed`` and ``inverted`` orange; ``uninformative`` grey;
   ``no evidence at this n`` light; ``not computed`` outlined), the AUC with its 95% interval, the two
   TPR figures, each cell saying which it is (the evaluation ROC's TPR at x% FPR, "(eval ROC)"; the TPR
   at the reference threshold with the FPR it realised on the n evaluation non-members, interval and n)
   and the costs per candidate;
2. per target: its ROC figure (every attack), the per-attack ROC and score figures (folded) and the
   defense effect (ΔAUC against the undefended target);
3. the audit: hook inventory, canaries, leakage dashboard;
4. privacy against utility: the figure and the rows of the headline utility measure;
5. the run's provenance (ragmi.report.provenance);
6. every table the run wrote, with links to its Markdown and CSV.

Every number links to the CSV row it comes from: ``tables/<table>.csv#row-<i>`` (``i`` counts the
data rows from 1; the file's line is ``i + 1``), relative to the page, with a tooltip naming file and
row.  A table the configuration does not build is left out.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..cells import EVAL_ROC, realised_fpr, ref_tpr
from .audit_tables import MACHINE_COLUMNS  # numbers for the gate, not for people
from .provenance import format_seconds
from .run_summary import VERDICTS, ci, count, pct, verdict_counts

# columns that name a row rather than measure it: their cells are not linked as numbers
KEY_COLUMNS = frozenset(
    {
        "dataset",
        "target",
        "defenses",
        "defense",
        "attack",
        "variant",
        "kind",
        "block",
        "pool",
        "base_target",
        "utility_metric",
        "channels",
        "hooks active",
        "status",
        "verdict",
        "published",
        "note",
        "dominated_by",
    }
)
# the columns a wide table shows on the page (others: every column but the machine columns)
VIEWS: dict[str, tuple[str, ...]] = {
    "defense_effect": ("dataset", "target", "attack", "variant", "defenses", "channels", "effect", "verdict"),
    "privacy_utility": (
        "dataset",
        "target",
        "defenses",
        "utility_metric",
        "utility",
        "delta_utility",
        "utility_change",
        "variant",
        "auc",
        "tpr_low_fpr",
        "delta_auc",
        "leakage_change",
        "canaries_recovered",
        "nel_per_run",
        "copied",
        "delta_copied",
        "copied_change",
        "pareto",
    ),
}
HEADERS = {
    "utility_metric": "measure",
    "delta_utility": "Δ utility",
    "utility_change": "utility change",
    "delta_auc": "ΔAUC",
    "leakage_change": "leakage change",
    "canaries_recovered": "canaries recovered",
    "nel_per_run": "NEL/run",
    "auc": "AUC",
    "tpr_low_fpr": "TPR at ref. threshold, at its realised eval FPR",
    "copied": "copied verbatim by a campaign",
    "delta_copied": "Δ copied",
    "copied_change": "copy change",
}
AUDIT_TABLES = ("hook_inventory", "canaries", "leakage_dashboard")
SHOWN = ("summary", "defense_effect", *AUDIT_TABLES, "privacy_utility")
VERDICT_CLASS = {
    "leaks": "v-leaks",
    "inverted": "v-orange",
    "control failed": "v-orange",
    "uninformative": "v-grey",
    "no evidence at this n": "v-light",
    "not computed": "v-none",
}
EFFECT_CLASS = {
    "reduces": "e-good",
    "increases": "e-bad",
    "no detectable change": "e-light",
    "indirect": "e-grey",
    "not compared": "e-none",
    "baseline": "e-none",
}
VERDICT_MEANING = {
    "leaks": "the AUC interval lies above 0.5",
    "inverted": "it lies below 0.5: the score ranks non-members higher",
    "no evidence at this n": "it contains 0.5",
    "uninformative": "every evaluation candidate got the same score, or no answer was read",
    "control failed": "a negative control (null database, no retrieval) separates the candidates too: not membership",
    "not computed": "a skipped variant",
}

CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--head:#f6f8fa;--link:#0969da}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:26px;margin:0 0 6px}
h2{font-size:21px;margin:40px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:17px;margin:28px 0 8px}
h4{font-size:15px;margin:16px 0 6px}
a{color:var(--link)}
.lede{color:var(--muted);margin:4px 0}
nav.toc{margin:14px 0 0;font-size:14px}
nav.toc a{margin-right:16px;white-space:nowrap}
.wrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13.5px;margin:8px 0 6px}
th,td{border:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word;word-break:normal}
td.nw,span.nw{white-space:nowrap}
table.dense{font-size:12.5px}
table.dense th,table.dense td{padding:4px 5px}
th{background:var(--head);font-weight:600}
tbody tr:nth-child(even){background:#fafbfc}
td{font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th::after{content:" \\2195";color:#8c959f;font-size:11px}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2";color:var(--fg)}
table.sortable th[aria-sort=descending]::after{content:" \\25BC";color:var(--fg)}
a.n{color:inherit;text-decoration:none;border-bottom:1px dotted #8c959f}
a.n:hover{color:var(--link);border-bottom-color:var(--link)}
.badge,.pill{display:inline-block;padding:1px 9px;border-radius:11px;font-size:12.5px;font-weight:600;white-space:nowrap;border:1px solid transparent}
.v-leaks{background:#cf222e;color:#fff}
.v-orange{background:#e16f24;color:#fff}
.v-grey{background:#6e7781;color:#fff}
.v-light{background:#ddf4ff;color:#0a3069;border-color:#b6e3ff}
.v-none{background:#fff;color:#59636e;border:1px dashed #afb8c1}
.e-good{background:#dafbe1;color:#116329;border-color:#aceebb}
.e-bad{background:#ffebe9;color:#a40e26;border-color:#ffcecb}
.e-light{background:#f6f8fa;color:#1f2328;border-color:#d1d9e0}
.e-grey{background:#eaeef2;color:#59636e;font-style:italic}
.e-none{background:#fff;color:#59636e;border:1px dashed #afb8c1}
.detail{display:block;color:var(--muted);font-size:12px;margin-top:3px}
.sub{color:var(--muted);font-size:12.5px}
.counts .pill{margin:0 6px 4px 0}
figure{margin:12px 0}
figure img{max-width:100%;height:auto;border:1px solid var(--line);background:#fff}
figcaption{color:var(--muted);font-size:13px}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px}
details{margin:8px 0}
details>summary{cursor:pointer;color:var(--link)}
.notes{font-size:13px;color:var(--muted)}
.notes li{margin:3px 0}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.hash{word-break:break-all}
table.kv th{width:210px}
.target{border-left:4px solid var(--line);padding-left:14px;margin:22px 0}
"""

SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('thead th').forEach(function(th,i){
    th.title='Sort by this column';
    th.addEventListener('click',function(){
      var asc=th.getAttribute('aria-sort')!=='ascending', b=t.tBodies[0], rows=Array.prototype.slice.call(b.rows);
      t.querySelectorAll('thead th').forEach(function(h){h.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',asc?'ascending':'descending');
      function key(r){var c=r.cells[i];if(!c)return '';var s=c.getAttribute('data-sort');
        if(s!==null&&s!==''&&!isNaN(s))return parseFloat(s);return c.textContent.trim().toLowerCase();}
      rows.sort(function(a,c){var x=key(a),y=key(c),nx=typeof x==='number',ny=typeof y==='number',d;
        if(nx!==ny)return nx?-1:1;  /* numbers first, cells without one last, either way */
        d=nx?x-y:(x<y?-1:x>y?1:0);return asc?d:-d;});
      rows.forEach(function(r){b.appendChild(r);});
    });
  });
});
"""

_NUMBER = re.compile(r"[-−+]?\d+(?:\.\d+)?")


def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def read_csv(path: str | os.PathLike) -> tuple[list[str], list[dict[str, str]]]:
    """(columns, rows as strings) of a table's CSV."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


class Linker:
    """Links from the page to a table's CSV rows: ``href`` relative to the page, ``tooltip`` naming
    the file as the run names it and the row."""

    def __init__(self, csv_path: str | os.PathLike, page_dir: str | os.PathLike):
        self.path = str(csv_path)
        self.href = Path(os.path.relpath(csv_path, page_dir)).as_posix()

    def __call__(self, row: int, text: str, sort: float | None = None) -> str:
        """``text`` (already escaped) linked to data row ``row`` (0-based here, 1-based in the link)."""
        tip = f"{self.path}, row {row + 1} (line {row + 2})"
        return f'<a class="n" href="{esc(self.href)}#row-{row + 1}" title="{esc(tip)}">{text}</a>'


def _td(content: str, sort=None, cls: str = "") -> str:
    attrs = ""
    if sort is not None and not (isinstance(sort, float) and math.isnan(sort)):
        attrs += f' data-sort="{esc(sort)}"'
    if cls:
        attrs += f' class="{cls}"'
    return f"<td{attrs}>{content}</td>"


def _table(
    header: Sequence[str], body: Sequence[str], table_id: str = "", sortable: bool = True, dense: bool = False
) -> str:
    ident = f' id="{esc(table_id)}"' if table_id else ""
    classes = ["sortable"] * sortable + ["dense"] * dense
    cls = f' class="{" ".join(classes)}"' if classes else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    return f'<div class="wrap"><table{ident}{cls}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


# ---------------------------------------------------------------------------------------------------
# the summary


def badge(verdict: str) -> str:
    cls = VERDICT_CLASS.get(verdict, "v-none")
    tip = VERDICT_MEANING.get(verdict, "")
    return f'<span class="badge {cls}" data-verdict="{esc(verdict)}" title="{esc(tip)}">{esc(verdict)}</span>'


def pill(verdict: str, n: int) -> str:
    cls = VERDICT_CLASS.get(verdict, "v-none")
    return f'<span class="pill {cls}" title="{esc(VERDICT_MEANING.get(verdict, ""))}">{n} {esc(verdict)}</span>'


def _variant(r: Mapping) -> str:
    v, a = str(r.get("variant", "")), str(r.get("attack", ""))
    return v if v == a or v.startswith(f"{a}/") else f"{a}: {v}"


def _levels(rows, col) -> list[float]:
    return sorted({v for r in rows if not math.isnan(v := _num(r.get(col)))})


def _realised(fpr, lo, hi, n) -> str:
    """``"eval FPR 0.05 [0.00, 0.25], n = 20"`` from CSV strings (ragmi.cells.realised_fpr)."""
    return realised_fpr(*(None if math.isnan(_num(x)) else _num(x) for x in (fpr, lo, hi, n)))


def _ref_tpr_csv(r: Mapping) -> tuple[str, float]:
    """A privacy_utility row's operational TPR as the page prints it: ``"0.30 [0.18, 0.44] at the ref. threshold
    for 5% FPR (eval FPR 0.05 [0.00, 0.25], n = 20)"`` (ragmi.cells.ref_tpr), with its sort key."""
    v = [None if math.isnan(_num(r.get(c))) else _num(r.get(c)) for c in _REF_TPR_COLUMNS]
    return ref_tpr(*v), _num(r.get("tpr_low_fpr"))


_REF_TPR_COLUMNS = (
    "tpr_low_fpr",
    "tpr_low_fpr_lo",
    "tpr_low_fpr_hi",
    "tpr_fpr",
    "tpr_fpr_realized",
    "tpr_fpr_realized_lo",
    "tpr_fpr_realized_hi",
    "tpr_n_nonmembers",
)


def summary_table(rows: Sequence[Mapping], link: Linker) -> str:
    """The summary as an HTML table (``id="summary-table"``), one badge per row; each TPR cell says which TPR
    it is: "(eval ROC)", or the FPR its reference threshold realised on the n evaluation non-members."""
    datasets = sorted({r.get("dataset", "") for r in rows})
    roc_levels, ref_levels = _levels(rows, "roc_tpr_fpr"), _levels(rows, "tpr_fpr")
    roc_head = f"TPR@{pct(roc_levels[0])}FPR (eval ROC)" if len(roc_levels) == 1 else "TPR at low FPR (eval ROC)"
    ref_head = (
        f"TPR at ref. threshold for {pct(ref_levels[0])} FPR, at realised eval FPR"
        if len(ref_levels) == 1
        else "TPR at ref. threshold, at realised eval FPR"
    )
    header = (["dataset"] if len(datasets) > 1 else []) + [
        "target",
        "attack / variant",
        "n eval",
        "AUC [95% CI]",
        roc_head,
        ref_head,
        "queries / tokens per candidate",
        "verdict",
    ]
    order = {
        v: i
        for i, v in enumerate(
            ("leaks", "control failed", "inverted", "uninformative", "no evidence at this n", "not computed")
        )
    }
    body = []
    for i, r in enumerate(rows):
        cells = []
        if len(datasets) > 1:
            cells.append(_td(esc(r.get("dataset", ""))))
        target = f'<span class="nw">{esc(r.get("target", ""))}</span>'
        if r.get("defenses"):
            target += f'<span class="detail">defenses: {esc(r["defenses"])}</span>'
        cells.append(_td(target))
        cells.append(_td(esc(_variant(r))))
        n = f"{count(r.get('n_members'))}/{count(r.get('n_nonmembers'))}"
        cells.append(_td(link(i, esc(n)), _num(r.get("n_members")), "nw"))
        cells.append(_td(link(i, esc(ci(r.get("auc"), r.get("auc_lo"), r.get("auc_hi")))), _num(r.get("auc")), "nw"))
        if math.isnan(_num(r.get("roc_tpr"))):
            roc = esc("n/e")
        else:
            roc = esc(ci(r.get("roc_tpr"), r.get("roc_tpr_lo"), r.get("roc_tpr_hi")))
            if len(roc_levels) > 1:
                roc += esc(f" at {pct(r.get('roc_tpr_fpr'))}")
            roc = link(i, roc + esc(f" ({EVAL_ROC})"))
        cells.append(_td(roc, _num(r.get("roc_tpr"))))
        if math.isnan(_num(r.get("tpr"))):
            ref = esc(r.get("tpr_note") or "–")
        else:
            ref = ci(r.get("tpr"), r.get("tpr_lo"), r.get("tpr_hi"))
            if len(ref_levels) > 1:
                ref += f" at ref. threshold for {pct(r.get('tpr_fpr'))}"
            fpr = _realised(
                r.get("fpr_realized"), r.get("fpr_realized_lo"), r.get("fpr_realized_hi"), r.get("n_nonmembers")
            )
            ref = link(i, esc(f"{ref} ({fpr})"))
        cells.append(_td(ref, _num(r.get("tpr"))))
        cost = f"{count(r.get('queries_per_candidate'))} / {count(r.get('tokens_per_candidate'))}"
        cells.append(_td(link(i, esc(cost)), _num(r.get("tokens_per_candidate"))))
        v = str(r.get("verdict", ""))
        cell = badge(v)
        detail = str(r.get("verdict_detail") or "").strip()
        if v == "uninformative":
            detail = str(r.get("uninformative_reason") or "").strip() or detail
        if detail:
            cell += f'<span class="detail">{esc(detail)}</span>'
        cells.append(_td(cell, order.get(v, len(order))))
        body.append(f"<tr>{''.join(cells)}</tr>")
    caption = f'<p class="sub">Dataset: {esc(datasets[0])}.</p>' if len(datasets) == 1 else ""
    return caption + _table(header, body, "summary-table")


# ---------------------------------------------------------------------------------------------------
# other tables, from their CSVs


def _fmt_number(col: str, value: str) -> str:
    """A CSV number for people: integers as they are, others to 2 decimals (small ones to 2 significant
    digits), Δ columns signed."""
    v = _num(value)
    if math.isnan(v) or not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", value.strip()):
        return value
    if re.fullmatch(r"[-+]?\d+", value.strip()):
        text = f"{int(v):,}" if abs(v) >= 10_000 else str(int(v))
    elif v != 0 and abs(v) < 0.01:
        text = f"{v:.2g}"
    else:
        text = f"{v:.2f}"
    if col.startswith("delta_"):
        text = ("+" if v > 0 else "") + text
    return text.replace("-", "−") if col.startswith("delta_") else text


def _merged(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """{column: (its _lo, its _hi)} for every column whose interval ends are also in the CSV."""
    have = set(columns)
    return {c: (f"{c}_lo", f"{c}_hi") for c in columns if f"{c}_lo" in have and f"{c}_hi" in have}


def table_columns(name: str, columns: Sequence[str]) -> list[str]:
    """The columns table ``name`` shows: its view (:data:`VIEWS`) or every column but the machine
    columns and the interval ends merged into their value's cell."""
    merged = _merged(columns)
    ends = {e for pair in merged.values() for e in pair}
    if name in VIEWS:
        return [c for c in VIEWS[name] if c in columns]
    return [c for c in columns if c not in MACHINE_COLUMNS and c not in ends]


def _cell(col: str, r: Mapping, merged: Mapping[str, tuple[str, str]]) -> tuple[str, float]:
    """(text, sort key) of one cell; an operational TPR with the FPR its threshold realised."""
    value = str(r.get(col, "") or "")
    if col == "tpr_low_fpr" and value != "":
        return _ref_tpr_csv(r)
    if col in merged:
        lo, hi = merged[col]
        if value == "":
            return "–", float("nan")
        a, b = _fmt_number(col, str(r.get(lo, ""))), _fmt_number(col, str(r.get(hi, "")))
        text = _fmt_number(col, value) + (
            f" [{a}, {b}]" if r.get(lo) not in (None, "") and r.get(hi) not in (None, "") else ""
        )
        return text, _num(value)
    if value in ("True", "False"):
        return ("yes" if value == "True" else "no"), float(value == "True")
    if value == "":
        return "–", float("nan")
    return _fmt_number(col, value), _num(value)


def csv_table(
    name: str,
    columns: Sequence[str],
    rows: Sequence[Mapping],
    link: Linker,
    keep: Sequence[int] | None = None,
    drop: Sequence[str] = (),
    table_id: str = "",
) -> str:
    """Rows ``keep`` (indices into ``rows``; all when None) of table ``name`` as a sortable HTML table;
    numbers linked to their CSV rows; a ``verdict`` column of defense_effect as a coloured chip."""
    keep = list(range(len(rows))) if keep is None else list(keep)
    shown = [c for c in table_columns(name, columns) if c not in drop]
    if "dataset" in shown and len({rows[i].get("dataset") for i in keep}) <= 1:
        shown.remove("dataset")  # one dataset: said in the summary's caption
    # a column of JSON objects is for machines (e.g. canaries' per_seed)
    shown = [c for c in shown if not _json_column([rows[i].get(c) for i in keep])]
    merged = _merged(columns)
    header = [HEADERS.get(c, c.replace("_", " ")) + (" [95% CI]" if c in merged else "") for c in shown]
    body = []
    for i in keep:
        r = rows[i]
        cells = []
        for c in shown:
            text, key = _cell(c, r, merged)
            content = esc(text)
            if c == "verdict" and text in EFFECT_CLASS:
                content = f'<span class="pill {EFFECT_CLASS[text]}">{esc(text)}</span>'
            elif c not in KEY_COLUMNS and text != "–" and _NUMBER.search(text):
                content = link(i, content)
            cells.append(_td(content, key if not math.isnan(key) else None))
        body.append(f"<tr>{''.join(cells)}</tr>")
    return _table(header, body, table_id, dense=len(shown) > 10)


def _json_column(values: Sequence) -> bool:
    filled = [str(v).strip() for v in values if v not in (None, "")]
    return bool(filled) and all(v[:1] in "{[" and v[-1:] in "}]" for v in filled)


# ---------------------------------------------------------------------------------------------------
# figures


def img(path: str | os.PathLike, alt: str) -> str:
    """The PNG at ``path`` as an ``<img>`` with a base64 data URI."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}" loading="lazy">'


def figure(path: str | os.PathLike, alt: str, caption: str) -> str:
    return f"<figure>{img(path, alt)}<figcaption>{caption} <code>{esc(path)}</code></figcaption></figure>"


# ---------------------------------------------------------------------------------------------------
# provenance


def _kv_row(key: str, value_html: str) -> str:
    return f"<tr><th>{esc(key)}</th><td>{value_html}</td></tr>"


def _software_html(prov: Mapping) -> str:
    """Python's version and the listed packages' versions."""
    packages = prov.get("packages") or {}
    py = f"Python {esc(prov.get('python', '?'))}"
    if packages:
        py += "; " + ", ".join(f"{esc(k)} {esc(v)}" for k, v in packages.items())
    return py


def _cpu_html(cpu: Mapping) -> str:
    flags = ", ".join(cpu.get("flags") or []) or "none of the listed vector extensions"
    return (
        f"{esc(cpu.get('model') or '?')}, {esc(cpu.get('logical_cpus') or '?')} logical CPUs "
        f"({esc(cpu.get('machine') or '')}); flags: {esc(flags)}"
    )


def _precision_html(precision: Sequence[Mapping]) -> str:
    return "; ".join(
        f"<code>generators.{esc(p.get('generator'))}</code>: {esc(p.get('dtype'))}"
        f'<span class="detail">{esc(p.get("reason"))}</span>'
        for p in precision
    )


def _wall_time_html(wt: Mapping) -> str | None:
    """The wall-time row's cell; None when no wall time was recorded."""
    if wt.get("jobs"):
        text = (
            f"{esc(format_seconds(wt.get('span_seconds')))} from the first job's start ({esc(wt.get('first_job_start'))}) "
            f"to the last job's end ({esc(wt.get('last_job_end'))}); {esc(wt.get('jobs'))} jobs, "
            f"{esc(format_seconds(wt.get('jobs_seconds')))} of job time summed"
        )
        if wt.get("invocation_start"):
            text += f"; this snakemake invocation started {esc(wt['invocation_start'])}"
        return text + f'<span class="detail">{esc(wt.get("what", ""))}</span>'
    if wt:
        return "unknown (no Snakemake benchmark files)"
    return None


def _model_row(m: Mapping) -> str:
    """A model's row of the models table: role, name, kind (and package), SHA-256 (and its source)."""
    sha = m.get("sha256")
    files = m.get("files") or []
    if not sha and any(f.get("sha256") for f in files):
        sha_html = "<br>".join(
            f'{esc(f["file"])}: <code class="hash">{esc(f["sha256"])}</code>' for f in files if f.get("sha256")
        )
    else:
        sha_html = f'<code class="hash">{esc(sha)}</code>' if sha else "–"
    return (
        "<tr>"
        + _td(esc(m.get("role", "")))
        + _td(f"<code>{esc(m.get('name', ''))}</code>")
        + _td(esc(m.get("kind", "")) + (f'<span class="detail">{esc(m["package"])}</span>' if m.get("package") else ""))
        + _td(sha_html + f'<span class="detail">{esc(m.get("sha256_source", ""))}</span>')
        + "</tr>"
    )


def provenance_html(prov: Mapping) -> str:
    if not prov:
        return '<p class="sub">No provenance recorded.</p>'
    rows = [
        _kv_row(
            "config digest",
            f'<code class="hash">sha256:{esc(prov.get("config_sha256", ""))}</code>'
            '<span class="detail">SHA-256 of the validated config as canonical JSON (keys sorted, no spaces, UTF-8)</span>',
        )
    ]
    rg = prov.get("ragmi") or {}
    version = esc(rg.get("version", "?")) + (f" (git <code>{esc(rg['git'])}</code>)" if rg.get("git") else "")
    rows.append(_kv_row("ragmi", version))
    rows.append(_kv_row("software", _software_html(prov)))
    cpu = prov.get("cpu") or {}
    if cpu:
        rows.append(_kv_row("CPU", _cpu_html(cpu)))
    precision = prov.get("precision") or []
    if precision:
        rows.append(_kv_row("precision", _precision_html(precision)))
    gpus = prov.get("gpus") or []
    rows.append(
        _kv_row(
            "GPU",
            "; ".join(f"{esc(g.get('name'))} ({esc(g.get('memory'))}, driver {esc(g.get('driver'))})" for g in gpus)
            or "none (no nvidia-smi, or it lists no GPU)",
        )
    )
    rows.append(
        _kv_row("date", esc(prov.get("date", "?")) + '<span class="detail">when this page was written (UTC)</span>')
    )
    wall_time = _wall_time_html(prov.get("wall_time") or {})
    if wall_time is not None:
        rows.append(_kv_row("wall time", wall_time))
    out = f'<div class="wrap"><table class="kv"><tbody>{"".join(rows)}</tbody></table></div>'
    models = prov.get("models") or []
    if models:
        body = [_model_row(m) for m in models]
        out += "<h3>Models</h3>" + _table(["role", "model", "kind", "SHA-256"], body, "models-table", sortable=False)
    return out


# ---------------------------------------------------------------------------------------------------
# the page


def _registry_tables() -> dict:
    try:
        from .registry import TABLES

        return TABLES
    except Exception:  # noqa: BLE001 -- the page is still built without titles
        return {}


def _notes(name: str, registry: Mapping) -> str:
    t = registry.get(name)
    if t is None or not t.notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in t.notes)
    return f'<details class="notes"><summary>How to read this table</summary><ul>{items}</ul></details>'


def _title(name: str, registry: Mapping) -> str:
    t = registry.get(name)
    return t.title if t is not None else name.replace("_", " ")


ROOT = Path(__file__).resolve().parents[3]  # the repository: the figures' captions are report/*.rst


def _caption(path: str) -> str:
    """A figure's report caption (reStructuredText, ``code`` marks dropped) as one paragraph; empty when
    the file is not there."""
    try:
        text = (ROOT / path).read_text(encoding="utf-8")
    except OSError:
        return ""
    return " ".join(text.replace("``", "").split())


def _table_figures(name: str, registry: Mapping, fig) -> str:
    """The figures table ``name`` declares (registry) that the run drew, with their captions."""
    t = registry.get(name)
    out = []
    for f in getattr(t, "figures", ()) if t is not None else ():
        try:
            rel = Path(f.path).relative_to("results/figures").as_posix()
        except ValueError:
            continue
        path = fig(rel)
        if path:
            text = (_caption(f.caption) or _title(name, registry)).rstrip(".") + "."
            out.append(figure(path, f"{name}: {f.name}", esc(text)))
    return "".join(out)


def _find_figures(results_dir: Path) -> list[str]:
    return (
        sorted(str(p) for p in (results_dir / "figures").rglob("*.png")) if (results_dir / "figures").is_dir() else []
    )


class _DrawnFigures:
    """The figures the run draws, looked up by their path under ``<results_dir>/figures``."""

    def __init__(self, results_dir: Path, figures: Sequence[str]):
        self.results_dir = results_dir
        self.by_path = {Path(f).resolve().as_posix(): f for f in figures if Path(f).is_file()}

    def __call__(self, rel: str) -> str | None:
        """The figure ``<results_dir>/figures/<rel>`` when the run draws it."""
        return self.by_path.get((self.results_dir / "figures" / rel).resolve().as_posix())


def _ordered_tables(results_dir: Path, tables: Mapping[str, str] | None, registry: Mapping) -> dict[str, str]:
    """{table name: CSV path} in registry order (unknown names last, by name); None: every CSV found."""
    if tables is None:
        tables = {p.stem: str(p) for p in sorted((results_dir / "tables").glob("*.csv"))}
    order = {n: i for i, n in enumerate(registry)}
    return dict(sorted(tables.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def _summary_targets(summary_rows: Sequence[Mapping]) -> list[tuple[str, str, str]]:
    """(dataset, target, defenses) of the summary's rows, in the summary's order."""
    targets: list[tuple[str, str, str]] = []
    for r in summary_rows:
        key = (r.get("dataset", ""), r.get("target", ""), r.get("defenses", ""))
        if key not in targets:
            targets.append(key)
    return targets


def _gate_html(gate_json: str | os.PathLike | None, results_dir: Path, page_dir: Path) -> str:
    """The header's line on the release gate's verdict (empty without a gate file)."""
    gate_path = results_dir / "gate" / "gate.json" if gate_json == "auto" else gate_json
    if gate_path is None or not Path(gate_path).is_file():
        return ""
    try:
        g = json.loads(Path(gate_path).read_text())
        k = g.get("counts", {})
        cls = {"pass": "e-good", "fail": "v-leaks", "undecided": "v-orange"}.get(g.get("verdict"), "v-none")
        href = Path(os.path.relpath(gate_path, page_dir)).as_posix()
        return (
            f'<p class="lede">Release gate: <span class="pill {cls}">{esc(str(g.get("verdict", "?")).upper())}</span> '
            f"{esc(k.get('breach', 0))} breached, {esc(k.get('no evidence', 0))} without evidence, "
            f'{esc(k.get("pass", 0))} passed (<a href="{esc(href)}">{esc(gate_path)}</a>)</p>'
        )
    except (OSError, ValueError, AttributeError):
        return f'<p class="lede">Release gate: unreadable ({esc(gate_path)})</p>'


def _lede(summary_rows: Sequence[Mapping], targets: Sequence[tuple[str, str, str]]) -> str:
    n_targets = len({(d, t) for d, t, _ in targets})
    return (
        f"{len(summary_rows)} cells (target × attack headline variant) over {n_targets} target"
        f"{'s' if n_targets != 1 else ''}"
        if summary_rows
        else "This configuration builds no summary table (no attack ran on a target that is not a control)."
    )


def _header(lede: str, counts: Mapping[str, int], data: Mapping, prov: Mapping, gate_html: str) -> str:
    """The page's header: title, lede, verdict counts, gate verdict and table of contents."""
    pills = "".join(pill(v, n) for v, n in counts.items() if n)
    toc = [("summary", "Summary"), ("targets", "Per target")]
    if any(t in data for t in AUDIT_TABLES):
        toc.append(("audit", "Audit"))
    if "privacy_utility" in data or "utility" in data:
        toc.append(("privacy-utility", "Privacy vs utility"))
    toc += [("provenance", "Provenance"), ("tables", "All tables")]
    return (
        "<header><h1>ragmi results: membership-inference leakage</h1>"
        f'<p class="lede">{esc(lede.rstrip("."))}.{_stamp(prov)}</p>'
        f'<p class="counts">{pills}</p>{gate_html}'
        '<nav class="toc">' + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in toc) + "</nav></header>"
    )


def _summary_section(summary_rows: Sequence[Mapping], links: Mapping, registry: Mapping, lede: str) -> list[str]:
    parts = ['<section id="summary"><h2>Summary: does each attack leak membership on each target?</h2>']
    if summary_rows:
        parts.append(summary_table(summary_rows, links["summary"]))
        legend = "".join(f"<li>{badge_legend(v)}: {esc(m)}</li>" for v, m in VERDICT_MEANING.items())
        parts.append(f'<ul class="notes">{legend}</ul>')
        parts.append(_notes("summary", registry))
    else:
        parts.append(f'<p class="sub">{esc(lede)}</p>')
    parts.append("</section>")
    return parts


def _target_title(dataset: str, target: str, defenses: str, several_datasets: bool) -> str:
    title = esc(target) + (
        f' <span class="sub">defenses: {esc(defenses)}</span>' if defenses else ' <span class="sub">undefended</span>'
    )
    if several_datasets:
        title += f' <span class="sub">· dataset {esc(dataset)}</span>'
    return title


def _per_attack_figures(mine: Sequence[Mapping], dataset: str, target: str, fig: _DrawnFigures) -> list[str]:
    """The folded per-attack ROC and score figures of a target (nothing when it has none)."""
    per_attack = []
    for r in mine:
        for kind in ("roc", "scores"):
            p = fig(f"{r.get('attack')}/{dataset}__{target}_{kind}.png")
            if p and p not in per_attack:
                per_attack.append(p)
    if not per_attack:
        return []
    figs = "".join(
        figure(
            p,
            Path(p).stem,
            esc(f"{Path(p).parent.name}: {'ROC' if p.endswith('_roc.png') else 'score distributions'}."),
        )
        for p in per_attack
    )
    return [
        f'<details><summary>Per-attack figures ({len(per_attack)})</summary><div class="grid">{figs}</div></details>'
    ]


def _target_defense_effect(effect, dataset: str, target: str, defenses: str, link: Linker) -> list[str]:
    """A target's rows of defense_effect (or, undefended, the line saying it is the baseline)."""
    cols, rows = effect
    keep = [
        i
        for i, r in enumerate(rows)
        if r.get("dataset") == dataset and r.get("target") == target and r.get("verdict") != "baseline"
    ]
    if keep:
        return [
            "<h4>Defense effect (against the undefended target)</h4>",
            csv_table("defense_effect", cols, rows, link, keep, drop=("dataset", "target", "defenses")),
        ]
    if not defenses:
        return ['<p class="sub">Undefended: the baseline the defended targets are compared with (defense effect).</p>']
    return []


def _target_block(
    key: tuple[str, str, str], targets, summary_rows, effect, links: Mapping, fig: _DrawnFigures
) -> list[str]:
    """One target's block of the per-target section."""
    dataset, target, defenses = key
    ident = f"target-{slug(dataset)}-{slug(target)}"
    title = _target_title(dataset, target, defenses, len({d for d, _, _ in targets}) > 1)
    parts = [f'<div class="target" id="{esc(ident)}"><h3>{title}</h3>']
    mine = [r for r in summary_rows if r.get("dataset") == dataset and r.get("target") == target]
    c = verdict_counts(mine)
    parts.append('<p class="counts">' + "".join(pill(v, n) for v, n in c.items() if n) + "</p>")
    roc = fig(f"roc/{dataset}__{target}.png")
    if roc:
        parts.append(
            figure(
                roc,
                f"ROC curves of every attack on {target}",
                f"ROC curves of every attack on {esc(target)} (linear and low-FPR panels).",
            )
        )
    parts += _per_attack_figures(mine, dataset, target, fig)
    if effect is not None:
        parts += _target_defense_effect(effect, dataset, target, defenses, links["defense_effect"])
    parts.append("</div>")
    return parts


def _targets_section(targets, summary_rows, data: Mapping, links: Mapping, registry: Mapping, fig) -> list[str]:
    parts = ['<section id="targets"><h2>Per target</h2>']
    effect = data.get("defense_effect")
    for key in targets:
        parts += _target_block(key, targets, summary_rows, effect, links, fig)
    if not targets:
        parts.append('<p class="sub">No target was attacked.</p>')
    if effect is not None:
        drawn = _table_figures("defense_effect", registry, fig)
        if drawn:
            parts.append(f"<h3>Defense effect, every defended target</h3>{drawn}")
        parts.append(_notes("defense_effect", registry))
    parts.append("</section>")
    return parts


def _audit_section(data: Mapping, links: Mapping, registry: Mapping, fig) -> list[str]:
    if not any(t in data for t in AUDIT_TABLES):
        return []
    parts = ['<section id="audit"><h2>Audit</h2>']
    for name in AUDIT_TABLES:
        if name in data:
            cols, rows = data[name]
            parts.append(f'<h3 id="{name}">{esc(_title(name, registry))}</h3>')
            parts.append(csv_table(name, cols, rows, links[name], table_id=f"{name}-table"))
            parts.append(_table_figures(name, registry, fig))
            parts.append(_notes(name, registry))
    parts.append("</section>")
    return parts


def _privacy_utility_section(data: Mapping, links: Mapping, tables: Mapping, registry: Mapping, fig) -> list[str]:
    if "privacy_utility" not in data and "utility" not in data:
        return []
    parts = ['<section id="privacy-utility"><h2>Privacy against utility</h2>']
    name = "privacy_utility" if "privacy_utility" in data else "utility"
    parts.append(_table_figures(name, registry, fig))
    cols, rows = data[name]
    keep = None
    if "headline_metric" in cols and any(r.get("headline_metric") == "True" for r in rows):
        keep = [i for i, r in enumerate(rows) if r.get("headline_metric") == "True"]
        measure = rows[keep[0]].get("utility_metric", "")
        parts.append(
            f'<p class="sub">Rows of the headline utility measure ({esc(measure)}); every measure is in '
            f'<a href="{esc(links[name].href)}">{esc(tables[name])}</a>.</p>'
        )
    parts.append(f"<h3>{esc(_title(name, registry))}</h3>")
    parts.append(csv_table(name, cols, rows, links[name], keep, table_id=f"{name}-table"))
    parts.append(_notes(name, registry))
    parts.append("</section>")
    return parts


def _all_tables_section(
    tables: Mapping[str, str], data: Mapping, links: Mapping, page_dir: Path, registry: Mapping, fig
) -> str:
    """Every table the run wrote, with links to its Markdown and CSV."""
    items = []
    for name, path in tables.items():
        if name not in data:
            continue
        csv_href = links[name].href
        md = str(Path(path).with_suffix(".md"))
        md_href = Path(os.path.relpath(md, page_dir)).as_posix()
        shown = " (above)" if name in SHOWN else ""
        drawn = "" if name in SHOWN else _table_figures(name, registry, fig)
        if drawn:
            drawn = f"<details><summary>Figure</summary>{drawn}</details>"
        items.append(
            f"<li><b>{esc(name)}</b>{shown}: {esc(_title(name, registry))} — "
            f'<a href="{esc(md_href)}">Markdown</a> · <a href="{esc(csv_href)}">CSV</a> ({len(data[name][1])} rows)'
            f"{drawn}</li>"
        )
    return f'<section id="tables"><h2>All tables</h2><ul>{"".join(items)}</ul></section>'


def build_page(
    results_dir: str | os.PathLike = "results",
    tables: Mapping[str, str] | None = None,
    figures: Sequence[str] | None = None,
    provenance: Mapping | None = None,
    gate_json: str | os.PathLike | None = "auto",
    page: str | os.PathLike | None = None,
) -> str:
    """The page's HTML.  ``tables``: {table name: CSV path} of the tables the configuration builds
    (None: every CSV under ``<results_dir>/tables``); ``figures``: the PNGs it draws (None: every PNG
    under ``<results_dir>/figures``); ``gate_json``: the gate's verdict file (``"auto"``: when
    ``<results_dir>/gate/gate.json`` exists; None: no gate); ``page``: where the page is written (links
    are relative to it; default ``<results_dir>/results.html``)."""
    results_dir = Path(results_dir)
    page_dir = Path(page).parent if page is not None else results_dir
    registry = _registry_tables()
    tables = _ordered_tables(results_dir, tables, registry)
    figures = _find_figures(results_dir) if figures is None else list(figures)
    fig = _DrawnFigures(results_dir, figures)
    data = {n: read_csv(p) for n, p in tables.items() if Path(p).is_file()}
    links = {n: Linker(tables[n], page_dir) for n in data}
    prov = provenance or {}

    summary_cols, summary_rows = data.get("summary", ([], []))
    targets = _summary_targets(summary_rows)
    lede = _lede(summary_rows, targets)
    gate_html = _gate_html(gate_json, results_dir, page_dir)
    parts = [_header(lede, verdict_counts(summary_rows), data, prov, gate_html)]
    parts += _summary_section(summary_rows, links, registry, lede)  # 1. summary
    parts += _targets_section(targets, summary_rows, data, links, registry, fig)  # 2. per target
    parts += _audit_section(data, links, registry, fig)  # 3. audit
    parts += _privacy_utility_section(data, links, tables, registry, fig)  # 4. privacy against utility
    parts.append('<section id="provenance"><h2>Provenance</h2>' + provenance_html(prov) + "</section>")  # 5.
    parts.append(_all_tables_section(tables, data, links, page_dir, registry, fig))  # 6. every table

    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>ragmi results</title><style>{CSS}</style></head>\n<body><main>\n{body}\n</main>"
        f"<script>{SORT_JS}</script></body></html>\n"
    )


def _stamp(prov: Mapping) -> str:
    """`` Config sha256:<12 hex>, written <date>.`` from the provenance (what it has of them)."""
    parts = []
    if prov.get("config_sha256"):
        parts.append(f"config <code>sha256:{esc(str(prov['config_sha256'])[:12])}</code>")
    if prov.get("date"):
        parts.append(f"written {esc(prov['date'])}")
    text = ", ".join(parts)
    return f" {text[:1].upper()}{text[1:]}." if parts else ""


def badge_legend(verdict: str) -> str:
    """A verdict's colour in the legend (a pill: only the summary's badges carry ``data-verdict``)."""
    return f'<span class="pill {VERDICT_CLASS.get(verdict, "v-none")}">{esc(verdict)}</span>'


def write_page(out: str | os.PathLike, **kwargs) -> str:
    """:func:`build_page` written atomically to ``out`` (links relative to it); the HTML."""
    from ..io import atomic_write_text

    text = build_page(page=out, **kwargs)
    atomic_write_text(text, out)
    return text


__all__ = ["VERDICTS", "build_page", "write_page", "summary_table", "csv_table"]
