"""E-mail and identifier patterns shared by PAD (masking) and LPRAG (domain substitution).
docs/provenance.md#pad

E-mail: a local part of word characters (any script) and ``!$'*+^`{|}~-``, dot-separated, then ``@``
(also its URL encoding ``%40`` and the full-width ``＠``), then a domain of dot-separated labels
ending in a top-level label of letters in any script (any length, so ``.canary``, ``.museum`` and
``.рф`` match) or a punycode label, or an ``[address literal]``.  ``/ ? = & # :`` are not local-part
characters, so an address inside a URL (``mailto:a@b.org``, ``https://x.org/?u=a@b.c``) matches
without the URL around it.  Not covered: quoted local parts, obfuscated forms ("a at b dot com").

Identifiers: phone numbers (``+`` international, ``(area) number``, ``ddd-ddd-dddd`` with one
separator kind), US SSN-shaped ``ddd-dd-dddd``, card-shaped groups of four digits, runs of 7 or more
digits, and ID-like tokens mixing letters and at least 5 digits (``MRN-00482913``, ``AB1234567``).
Dates (``2024-01-15``), years, decimals and short codes (``COVID-19``) are left alone.
"""

from __future__ import annotations

import re

_LOCAL_CHAR = r"[\w!$'*+^`{|}~\-]"
_LOCAL = rf"{_LOCAL_CHAR}+(?:\.{_LOCAL_CHAR}+)*"
AT = r"(?:@|%40|\uff20)"
_LABEL = r"[^\W_](?:[\w\-]*[^\W_])?"
_TLD = r"(?:xn--[a-z0-9\-]+|[^\W\d_]+)"
DOMAIN = rf"(?:(?:{_LABEL}\.)+{_TLD}|\[[^\]\s]+\])"

EMAIL = re.compile(
    rf"(?<![\w!$'*+^`{{|}}~.\-])(?P<local>{_LOCAL})(?P<at>{AT})(?P<domain>{DOMAIN})(?![\w\-])", re.IGNORECASE
)

_PHONE = re.compile(
    r"(?<![\w.+])(?:"
    r"\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}"  # +1 (555) 123-4567, +44 20 7946 0958
    r"|\(\d{2,4}\)[ .\-]?\d{3,4}[ .\-]?\d{3,4}"  # (555) 123-4567
    r"|\d{3}([ .\-])\d{3}\1\d{4}"  # 555-123-4567, 555.123.4567, 555 123 4567
    r"|\d{3}-\d{2}-\d{4}"  # 123-45-6789 (SSN-shaped)
    r"|\d{4}(?:[ \-]\d{4}){2,4}"  # 4111 1111 1111 1111 (card-shaped)
    r")(?![\w])"
)
_LONG_DIGITS = re.compile(r"(?<![\w.,])\d{7,}(?![\w]|[.,]\d)")
_TOKEN = re.compile(r"(?<![\w\-])[^\W_]+(?:[\-_][^\W_]+)*(?![\w\-])")


def _id_like(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    return digits >= 5 and any(c.isalpha() for c in token)


def _phone_ok(m: re.Match) -> bool:
    return sum(c.isdigit() for c in m.group(0)) >= 7


def mask_emails(text: str, placeholder: str = "[EMAIL]") -> tuple[str, int]:
    return EMAIL.subn(placeholder, text)


def mask_ids(text: str, placeholder: str = "[ID]") -> tuple[str, int]:
    n = 0

    def sub(pred):
        def repl(m):
            nonlocal n
            if pred(m):
                n += 1
                return placeholder
            return m.group(0)

        return repl

    text = _PHONE.sub(sub(_phone_ok), text)
    text = _TOKEN.sub(sub(lambda m: _id_like(m.group(0))), text)
    text = _LONG_DIGITS.sub(sub(lambda m: True), text)
    return text, n


def replace_email_domains(text: str, new_domain) -> tuple[str, int]:
    """Every e-mail address with its domain replaced by ``new_domain(domain)``."""
    n = 0

    def repl(m):
        nonlocal n
        domain = new_domain(m.group("domain"))
        if domain == m.group("domain"):
            return m.group(0)
        n += 1
        return f"{m.group('local')}@{domain}"

    return EMAIL.sub(repl, text), n
