"""Parsers of the target's short answers: Yes / No / "I don't know", and P(Yes), P(No) at the first
generated token that is a Yes or No token (:func:`yes_no_at_first_generated`, the reading of the
code DCMI's gray-box numbers came from, FlashRAG's generator) or, as the named variant
``first-topk`` (:func:`yes_no_at_first_position`), at the first position whose top-K alternatives
hold one.  Every attack that reads such answers (RAG-MIA, DCMI, IA, MEntA's IDK check) uses these.

Word boundaries everywhere, so "know", "not" or "Nothing" never read as No.  Provenance:
docs/provenance.md#answers.
"""

from __future__ import annotations

import math
import re

YES_NO_RE = re.compile(r"\b(yes|no)\b", re.IGNORECASE)

# "I don't know"-style answers (abstentions).
IDK_RE = re.compile(
    r"\b(?:i\s+(?:do\s+not|don[\u2019']?t|dont|cannot|can[\u2019']?t)\s+know"
    r"|unanswerable"
    r"|not\s+enough\s+information"
    r"|no\s+information"
    r"|insufficient\s+information"
    r"|not\s+sure)\b",
    re.IGNORECASE,
)


def parse_yes_no(text: str) -> int | None:
    """1 for Yes, 0 for No, None when neither word appears (first occurrence wins)."""
    m = YES_NO_RE.search(text or "")
    if m is None:
        return None
    return 1 if m.group(1).lower() == "yes" else 0


def parse_yes_no_idk(text: str) -> str:
    """``"yes"``, ``"no"``, ``"idk"`` or ``"other"`` for a short answer.

    The earliest match wins; an IDK phrase that starts where a Yes/No word starts wins the tie
    ("No information is given" -> idk, "No, it is not" -> no).
    """
    text = text or ""
    yn = YES_NO_RE.search(text)
    idk = IDK_RE.search(text)
    if idk is not None and (yn is None or idk.start() <= yn.start()):
        return "idk"
    if yn is not None:
        return yn.group(1).lower()
    return "other"


# Markup a chat model wraps its answer in ("**Yes**", "`No`", "\"Yes\""), stripped from a token's ends.
MARKUP = "*_`#~\"'\u201c\u201d\u2018\u2019\u00ab\u00bb"


def yes_no_key(token) -> str | None:
    """``"yes"`` / ``"no"`` when a token reads Yes / No once whitespace and markup are stripped from its
    ends and case is folded (" Yes", "**No", "YES"), else None ("No.", "Nothing", "**" are not)."""
    key = str(token).strip().strip(MARKUP).strip().casefold()
    return key if key in ("yes", "no") else None


def yes_no_probabilities(top: list) -> tuple[float, float]:
    """(P(Yes), P(No)) at one generated position from its top-K list of {"token", "logprob"}.

    Top-K entries that read Yes (or No) by :func:`yes_no_key` are summed; a label absent from the
    top-K gets the smallest listed probability (an upper bound of its true value).  NaN, NaN
    without a top-K list.
    """
    if top is None or len(top) == 0:
        return float("nan"), float("nan")
    probs = {"yes": 0.0, "no": 0.0}
    floor = math.inf
    for entry in top:
        lp = float(entry["logprob"])
        floor = min(floor, math.exp(lp))
        key = yes_no_key(entry["token"])
        if key is not None:
            probs[key] += math.exp(lp)
    return (probs["yes"] or floor), (probs["no"] or floor)


def yes_no_at_first_position(top_per_position) -> tuple[float, float, int]:
    """(P(Yes), P(No), position) at the first generated position whose top-K alternatives hold a
    token reading Yes or No (:func:`yes_no_key`).

    ``top_per_position`` is the response's ``token_top_logprobs``: one top-K list per generated token.  A
    chat model often opens with a space, "Sure", "Based" or "**" and says Yes or No a few tokens later;
    reading token 0 only would then give both labels the floor probability.  When no position has a
    Yes or No among its top tokens the position is -1 (the caller flags it) and the probabilities are
    those of token 0 (the floor for both); NaN, NaN, -1 without any top-K list.
    """
    positions = [] if top_per_position is None else list(top_per_position)
    for i, top in enumerate(positions):
        if top is not None and any(yes_no_key(e["token"]) for e in top):
            py, pn = yes_no_probabilities(top)
            return py, pn, i
    py, pn = yes_no_probabilities(positions[0] if positions else None)
    return py, pn, -1


def generated_token(top: list, logprob: float | None = None):
    """The entry of a position's top-K list that was generated: the one whose log-probability is
    ``logprob`` (the response's ``token_logprobs`` at that position) when given, else the most
    probable one (greedy decoding).  None without a top-K list."""
    if top is None or len(top) == 0:
        return None
    if logprob is not None and not (isinstance(logprob, float) and math.isnan(logprob)):
        return min(top, key=lambda e: abs(float(e["logprob"]) - float(logprob)))
    return max(top, key=lambda e: float(e["logprob"]))


def yes_no_at_first_generated(top_per_position, token_logprobs=None) -> tuple[float, float, int]:
    """(P(Yes), P(No), position) at the first position whose *generated* token reads Yes or No
    (:func:`generated_token`, :func:`yes_no_key`), the probabilities summed over that position's
    top-K (:func:`yes_no_probabilities`).  This is where DCMI's code reads ``P_yes`` ("the first
    generated token that is a Yes/No token"): an opener such as "Sure" or "**" whose low-ranked
    alternatives happen to hold a Yes or No does not decide the score.  Without a generated Yes/No
    token the position is -1 and the probabilities are token 0's (the floor for a label absent
    there); NaN, NaN, -1 without any top-K list."""
    positions = [] if top_per_position is None else list(top_per_position)
    lps = list(token_logprobs) if token_logprobs is not None else []
    for i, top in enumerate(positions):
        g = generated_token(top, lps[i] if i < len(lps) else None)
        if g is not None and yes_no_key(g["token"]):
            py, pn = yes_no_probabilities(top)
            return py, pn, i
    py, pn = yes_no_probabilities(positions[0] if positions else None)
    return py, pn, -1


# The two readings of P(Yes): the default follows DCMI's code; "first-topk" is the earlier reading.
PYES_READINGS = {"first-generated": yes_no_at_first_generated, "first-topk": yes_no_at_first_position}
