"""Standard RAG (DCMI Table 8, "Standard RAG"): retrieve the top-k, fill the target's template,
generate once.  This is the behaviour of every target without a ``framework`` key."""

from __future__ import annotations

from .base import Framework


class Standard(Framework):
    name = "standard"
    table_rank = 0
    source = "DCMI Appendix H (Standard RAG)"
