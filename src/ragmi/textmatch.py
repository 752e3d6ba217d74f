"""Text-overlap primitives shared by an attack that compares answers with its candidate
(:mod:`ragmi.attacks.extraction`) and by the evaluator's verbatim-reproduction check
(:mod:`ragmi.audit.extraction`)."""

from __future__ import annotations

import numpy as np


def normalise(text) -> str:
    """Every whitespace run collapsed to one space, ends stripped (case kept)."""
    return " ".join(str("" if text is None else text).split())


def longest_common_substring(a: str, b: str) -> int:
    """Length in characters of the longest common substring of ``a`` and ``b`` (dynamic programming:
    one numpy row over the longer string per character of the shorter one)."""
    if not a or not b:
        return 0
    if len(a) > len(b):
        a, b = b, a
    bv = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    prev = np.zeros(len(b) + 1, dtype=np.int32)
    cur = np.zeros_like(prev)
    best = 0
    for ch in a:
        np.multiply(prev[:-1] + 1, bv == ord(ch), out=cur[1:])
        m = int(cur.max())
        if m > best:
            best = m
        prev, cur = cur, prev
    return best
