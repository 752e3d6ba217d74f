"""PAD: regex masking of e-mail addresses and identifiers in the response (Mind the Hook §IV,
Tables I-II: "our regex masker for email and identifier patterns"; its regexes are not published).

The output hook fires only when a pattern matches ("pattern-limited"): e-mail addresses become
``[EMAIL]`` and identifiers (phone numbers, SSN- and card-shaped numbers, runs of 7+ digits, ID-like
tokens with 5+ digits) become ``[ID]``; a response without a match is left untouched.  The patterns
(module ``_patterns``) match any top-level domain (``.canary``, ``.museum``, internationalised ones),
Unicode local parts, and addresses inside URLs.  ``mask`` selects the families.  Only the text
changes; the log-prob columns pass through (``logprobs = "keep"``).  docs/provenance.md#pad
"""

from __future__ import annotations

from ._common import CountingDefense
from ._patterns import mask_emails, mask_ids
from .base import set_response_text

EMAIL_PLACEHOLDER, ID_PLACEHOLDER = "[EMAIL]", "[ID]"


def mask(text: str, families=("email", "id")) -> tuple[str, int, int]:
    """(masked text, #e-mails, #identifiers); e-mails first, so their digits are not read as IDs."""
    n_email = n_id = 0
    if "email" in families:
        text, n_email = mask_emails(text, EMAIL_PLACEHOLDER)
    if "id" in families:
        text, n_id = mask_ids(text, ID_PLACEHOLDER)
    return text, n_email, n_id


class Pad(CountingDefense):
    kind = "pad"
    hooks = ("output",)
    channels = ("text",)
    vocabulary = (EMAIL_PLACEHOLDER, ID_PLACEHOLDER)
    logprobs = "keep"
    source = "Mind the Hook §IV PAD (regex masker for e-mail and identifier patterns)"
    chosen = {
        "patterns": "ragmi's own (the paper's are unpublished); see ragmi.defenses._patterns",
        "placeholders": "[EMAIL], [ID]",
        "log-prob columns": "kept (text-only masking)",
    }

    def on_output(self, states, ctx):
        for s in states:
            text = (s.response or {}).get("response_text", "")
            new, n_email, n_id = mask(text, self.params["mask"])
            self.stats["responses"] += 1
            if n_email or n_id:
                self.stats["fired"] += 1
                self.stats["emails"] += n_email
                self.stats["ids"] += n_id
                set_response_text(s, new)
