"""The audit's canary address (``operator_<n>@acmetest-internal.canary``, Mind the Hook §VI-A): its
parts, and the rule that it lies outside every defense's fixed vocabulary.  The validator checks that
rule before any job runs, so it lives here, below the validator; the canary experiment itself is
:mod:`ragmi.audit.canaries`, which reads these."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .errors import ConfigError

PREFIX = "operator_"
DOMAIN = "acmetest-internal.canary"  # NELstrict classifies it as CANARY (ragmi.nel.CANARY_DOMAIN)
DOMAIN_LABEL = "acmetest-internal"
TLD = "canary"


def mentions_canary(s: str) -> str | None:
    """What part of the canary ``s`` contains (prefix, domain), or None."""
    f = str(s).casefold()
    if PREFIX in f:
        return f"the prefix {PREFIX!r}"
    if DOMAIN_LABEL in f:
        return f"the domain {DOMAIN!r}"
    return None


def check_outside_vocabulary(vocabularies: Mapping[str, Iterable[str]]) -> None:
    """Raise ConfigError naming the defense whose vocabulary collides with the canary: an entry that
    contains the prefix ``operator_``, the domain label ``acmetest-internal`` (so any canary address),
    or a domain in the canary's TLD ``.canary``."""
    for defense, vocabulary in vocabularies.items():
        for v in vocabulary:
            s = str(v)
            hit = mentions_canary(s)
            f = s.strip().casefold().lstrip("@.").rstrip(".")
            if hit is None and "." in s and re.fullmatch(rf"(?:[\w-]+\.)*{TLD}", f):
                hit = f"the canary TLD '.{TLD}'"
            if hit:
                raise ConfigError(
                    f"defense {defense!r}: its vocabulary entry {s!r} contains {hit}; the canary "
                    f"{PREFIX}N@{DOMAIN} must lie outside every defense's vocabulary (Mind the Hook §VI-A)"
                )
