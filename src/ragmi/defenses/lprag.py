"""LPRAG, simplified as in Mind the Hook (§IV; Tables I-III): deterministic entity substitution in
the retrieved documents (content hook) and in the response (output hook), without LPRAG's local DP.

* Person names -> fixed names (:data:`NAMES`: Alice, Bob, Carol, Dave, ...).  The name detector has
  no model: a lexicon of first and last names (faker's ``en_US`` person provider) plus
  capitalisation.  A name is
    - a capitalised first name followed by a capitalised last name from the lexicon, optionally with
      a middle initial ("John F. Smith"), or an unambiguous first name followed by any capitalised
      word ("Sarah Okonkwo");
    - one or two capitalised words after a title (Mr, Mrs, Ms, Miss, Mx, Dr, Prof, Sir, Dame);
    - a capitalised first name alone, unless it is also a common English word or place
      (:data:`AMBIGUOUS`: Grace, Mark, Hunter, Dallas, ...);
    - a last name alone, when the same text also used it in a full name or after a title.
  Each name is replaced by one fixed name chosen by a hash of its last word, so "John Smith",
  "Mr. Smith" and a later "Smith" become the same name, in the documents and the response alike.
  The fixed names themselves are never replaced, so a real person called "Alice" stays "Alice".
  Limits: lower-case or all-caps names, names outside the en_US lexicon standing alone, non-Latin
  names and names inside e-mail local parts are missed; a capitalised lexicon word that is not a name
  ("Bishop", "Young") is replaced after a title or next to a first name.
* E-mail domains -> fixed domains (:data:`DOMAINS`: example.com, example.org, example.net), chosen by
  a hash of the domain; the local part is kept (Mind the Hook replaces domains; its canary
  ``operator_N@acmetest-internal.canary`` becomes ``operator_N@example.com``).

The output hook leaves the log-prob columns as they are (text-only, ``logprobs = "keep"``); the
generation itself already saw substituted documents.  docs/provenance.md#lprag
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

from ._common import CONTEXT_DOWNSTREAM, CountingDefense
from ._patterns import replace_email_domains
from .base import set_response_text

NAMES = (
    "Alice",
    "Bob",
    "Carol",
    "Dave",
    "Erin",
    "Frank",
    "Grace",
    "Heidi",
    "Ivan",
    "Judy",
    "Mallory",
    "Niaj",
    "Olivia",
    "Peggy",
    "Rupert",
    "Sybil",
    "Trent",
    "Victor",
    "Walter",
    "Wendy",
)
DOMAINS = ("example.com", "example.org", "example.net")

# First names that are also common English words or places: replaced only inside a full name or
# after a title, never alone.
AMBIGUOUS = frozenset(
    """
Amber Angel April Austin Autumn Bailey Bill Blake Bob Brandy Brooke Carol Chad Chase Cheyenne Christian
Cole Crystal Daisy Dakota Dale Dallas Dawn Dean Destiny Diamond Don Drew Earl Ebony Ernest Faith
Francisco Frank Gene Grace Grant Guy Heather Holly Hunter Jack Jade Jasmine Jay Jean Jesus Jo Joy Kent
Kim Lance Lee Logan Madison Mark Mason Max Melody Mercedes Misty Parker Penny Randy Raven Ray Regina
Robin Rose Sandy Savannah Shannon Sierra Spencer Sue Summer Sydney Tanner Victoria Virginia
""".split()
)
_TITLE = r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame)\.?"
# A capitalised name word: "Smith", "O'Brien", "McDonald", "Smith-Jones".
_CAP = r"(?:[A-Z][a-z]?['\u2019]?(?=[A-Z]))?[A-Z][a-z]+(?:-[A-Z][a-z]+)*"
_NOT_SURNAME = frozenset(
    """
The A An And Or But Of In On At To For From With By As Is Was Are Were Be Been Has Had Have Do Did
I He She It We They You His Her Its Our Their This That These Those Then When Where Who Why How
Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July
August September October November December Yes No Not
""".split()
)


@lru_cache(maxsize=1)
def lexicon() -> tuple[frozenset, frozenset]:
    from faker.providers.person.en_US import Provider

    return frozenset(Provider.first_names), frozenset(Provider.last_names)


def fixed_name(key: str) -> str:
    h = int.from_bytes(hashlib.sha256(key.lower().encode()).digest()[:8], "little")
    return NAMES[h % len(NAMES)]


def fixed_domain(domain: str, domains=DOMAINS) -> str:
    if domain.lower() in domains:
        return domain
    h = int.from_bytes(hashlib.sha256(domain.lower().encode()).digest()[:8], "little")
    return domains[h % len(domains)]


_FULL = re.compile(rf"\b(?P<first>{_CAP})\s+(?:(?P<mid>[A-Z])\.\s+)?(?P<last>{_CAP})\b")
_TITLED = re.compile(rf"\b{_TITLE}\s+(?P<name>{_CAP}(?:\s+{_CAP})?)\b")
_WORD = re.compile(rf"\b{_CAP}\b")


def find_names(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping person-name spans ``(start, end, key)`` in ``text``; ``key`` is the name's last
    word (what the fixed name is chosen by)."""
    first, last = lexicon()
    spans: list[tuple[int, int, str]] = []
    taken = [False] * len(text)

    def add(start, end, key):
        if any(taken[start:end]):
            return
        spans.append((start, end, key))
        taken[start:end] = [True] * (end - start)

    surnames = set()
    for m in _TITLED.finditer(text):
        words = m.group("name").split()
        if all(w in NAMES for w in words):
            continue  # already a fixed name
        if len(words) == 2 and words[1] in _NOT_SURNAME:
            add(m.start("name"), m.start("name") + len(words[0]), words[0])
            surnames.add(words[0])
            continue
        add(m.start("name"), m.end("name"), words[-1])
        surnames.add(words[-1])
    pos = 0
    while True:
        m = _FULL.search(text, pos)
        if m is None:
            break
        given, family = m.group("first"), m.group("last")
        full = given in first and family not in _NOT_SURNAME and (family in last or given not in AMBIGUOUS)
        if full:
            add(m.start(), m.end(), family)
            surnames.add(family)
            pos = m.end()
        else:
            pos = m.start("last")  # the second word may start the next name
    for m in _WORD.finditer(text):
        w = m.group(0)
        if w in NAMES:
            continue
        if (w in first and w not in AMBIGUOUS) or w in surnames:
            add(m.start(), m.end(), w)
    return sorted(spans)


def substitute_names(text: str) -> tuple[str, int]:
    spans = find_names(text)
    out, prev = [], 0
    for start, end, key in spans:
        out.append(text[prev:start])
        out.append(fixed_name(key))
        prev = end
    out.append(text[prev:])
    return "".join(out), len(spans)


def substitute(text: str, domains=DOMAINS) -> tuple[str, int, int]:
    """``text`` with e-mail domains and person names replaced: (text, #domains, #names)."""
    text, n_domains = replace_email_domains(text, lambda d: fixed_domain(d, domains))
    text, n_names = substitute_names(text)
    return text, n_domains, n_names


class Lprag(CountingDefense):
    kind = "lprag"
    hooks = ("content", "output")
    channels = CONTEXT_DOWNSTREAM
    vocabulary = NAMES + DOMAINS
    logprobs = "keep"
    source = "Mind the Hook §IV LPRAG (deterministic entity substitution simplification of He et al.)"
    chosen = {
        "name detection": "faker en_US first/last-name lexicon + capitalisation (no NER model)",
        "name choice": "fixed name by a hash of the name's last word (consistent across hooks and runs)",
        "domain choice": "fixed domain by a hash of the domain; e-mail local parts kept",
        "local DP": "none (as in Mind the Hook's simplification)",
    }

    def __init__(self, name, params):
        super().__init__(name, params)
        self.domains = tuple(d.lower() for d in self.params["domains"])
        self.vocabulary = NAMES + self.domains

    def _apply(self, text: str) -> str:
        new, n_domains, n_names = substitute(text, self.domains)
        self.stats["domains_replaced"] += n_domains
        self.stats["names_replaced"] += n_names
        return new

    def on_content(self, states, ctx):
        for s in states:
            s.docs = [self._apply(d) for d in s.docs]

    def on_output(self, states, ctx):
        for s in states:
            text = (s.response or {}).get("response_text", "")
            new = self._apply(text)
            if new != text:
                set_response_text(s, new)
