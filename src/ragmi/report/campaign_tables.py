"""The Markdown of the coverage table (rows: :func:`ragmi.analysis.coverage.coverage_frame`)."""

from __future__ import annotations

import pandas as pd

from ..cells import DASH


def share_cell(r, name: str) -> str:
    """``"1.7% [0.6%, 3.6%]"``: the share ``name`` of a coverage row and its interval (``<name>_lo``,
    ``_hi``); the share alone without an interval, ``–`` without a share.  ``r``: a row of the frame
    or of its CSV (values as text)."""
    m, lo, hi = (pd.to_numeric(r.get(c), errors="coerce") for c in (name, f"{name}_lo", f"{name}_hi"))
    if pd.isna(m):
        return DASH
    return f"{m:.1%}" + ("" if pd.isna(lo) else f" [{lo:.1%}, {hi:.1%}]")


def _flagged(r) -> str:
    if not r["judged"]:
        return DASH
    return f"{r['flagged_share']:.0%} [{r['flagged_lo']:.0%}, {r['flagged_hi']:.0%}] ({int(r['flagged'])}/{int(r['judged'])})"


def _verdict(r, measure: str) -> str:
    p, ph = r[f"p_{measure}"], r[f"p_{measure}_holm"]
    return r[f"verdict_{measure}"] + ("" if pd.isna(p) else f" (p {p:.2g}, Holm {ph:.2g})")


def coverage_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    head = [
        "dataset / target",
        "attack",
        "budget · seeds",
        "knowledge base",
        "retrieved",
        "copied verbatim",
        "chance (verbatim)",
        "copied in meaning",
        "chance (meaning)",
        "verdict (verbatim / meaning)",
        "PII items found (chance)",
        "canaries recovered",
        "new chunks / query",
        "refused",
        "flagged by the target's detectors",
        "target tokens / query",
        "attacker tokens / query",
    ]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in df.to_dict("records"):
        cells = [
            f"{r['dataset']} / {r['target']}",
            r["variant"] + (" (random baseline)" if r["baseline"] else ""),
            f"{int(r['budget'])} · {int(r['seeds'])}",
            f"{int(r['kb_size'])} chunks",
            share_cell(r, "retrieval"),
            share_cell(r, "extraction_rouge"),
            share_cell(r, "chance_rouge"),
            share_cell(r, "extraction_semantic"),
            share_cell(r, "chance_semantic"),
            f"{_verdict(r, 'rouge')} / {_verdict(r, 'semantic')}",
            f"{r['pii_found']:.1f} of {int(r['pii_total'])} ({r['pii_chance']:.1f})",
            DASH if not r["canaries_total"] else f"{r['canaries_found']:.1f} of {int(r['canaries_total'])}",
            f"{r['new_chunks_per_query']:.3f}",
            f"{r['refused_share']:.0%}",
            _flagged(r),
            f"{r['tokens_per_query']:.0f}",
            f"{r['attacker_tokens_per_query']:.0f}",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines.append("")
    lines += [f"{n}\n" for n in notes]
    return "\n".join(lines)
