"""Parsers of the target's short answers: Yes / No / "I don't know", and P(Yes), P(No) of the first
token.  Every attack that reads such answers (RAG-MIA, DCMI, IA, MEntA's IDK check) uses these.

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


def yes_no_probabilities(top: list) -> tuple[float, float]:
    """(P(Yes), P(No)) of the first token from its top-K list of {"token", "logprob"}.

    Top-K entries whose stripped, case-folded text is "yes" (or "no") are summed; a label absent from
    the top-K gets the smallest listed probability (an upper bound of its true value).  NaN, NaN
    without a top-K list.
    """
    if top is None or len(top) == 0:
        return float("nan"), float("nan")
    probs = {"yes": 0.0, "no": 0.0}
    floor = math.inf
    for entry in top:
        lp = float(entry["logprob"])
        floor = min(floor, math.exp(lp))
        key = str(entry["token"]).strip().casefold()
        if key in probs:
            probs[key] += math.exp(lp)
    return (probs["yes"] or floor), (probs["no"] or floor)
