"""Antonym perturbations of a target sample for DCMI's differential calibration (Gao et al., §5.1).

DCMI builds a perturbed query q' from a copy of the target sample in which a fraction θ (the
"perturbation magnitude") of its words, "typically adjectives or adverbs", is replaced by antonyms
(§5.1 "Differential Calibration", Appendix D).  Two perturbers:

* :class:`LLMPerturber`: the paper's way: the attacker LLM gets the authors' perturbation prompt
  (``perturb.py`` of the official repo, verbatim in :data:`PERTURB_PROMPT`) with
  ``replace_count = max(1, int(θ · len(text.split())))`` (the official ``int(θ·n) or 1``).  The
  answer is cleaned tolerantly (preambles such as "Here is the modified text:", code fences,
  wrapping quotes, trailing "Note: ..." paragraphs); an empty, identical or implausible answer
  (see :func:`plausibility_failure`) is a *failure* and that document falls back to the WordNet
  perturber (``perturb_method = "wordnet-fallback"``, the reason in ``llm_failure``).
* :class:`WordNetPerturber`: offline, deterministic, for machines without a capable attacker LLM.
  WordNet 3.0's database files (Debian's ``wordnet-base`` puts them under /usr/share/wordnet; an
  unpacked nltk_data ``corpora/wordnet`` folder works too) are read directly (wndb(5WN) format);
  nltk is not needed.  There is no POS tagger: WordNet itself decides.  A word is a *candidate*
  when WordNet lists it as an adjective or adverb lemma with a direct antonym ("!" pointer) in
  one of its senses; candidates whose most frequent WordNet POS (SemCor tagged-sense counts of the
  index files, synset counts when no sense is tagged; a noun/verb count includes the lemmas the
  word inflects by WordNet's morphy rules, so "covered" counts as the verb "cover") is
  adjective/adverb come first ("tier 1"), the others ("tier 2", e.g. "clear", mostly a verb, or
  "used") are used only when tier 1 has too few.  A
  small list of function words (a, all, no, in, out, up, ...) is never swapped.  The antonym is
  that of the word's most frequent adjective/adverb sense that has one.  Which candidates are
  swapped is a seeded permutation (numpy Generator seeded from ``(seed, doc_id)``), so the swaps
  for a smaller θ are a subset of those for a larger θ.  Case (lower / Capitalised / UPPER) and
  the surrounding punctuation and spacing are kept; an "a"/"an" right before a swapped word is
  re-agreed.  With fewer candidates than requested, all are swapped (``n_swapped < n_requested``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

# Official DCMI repo (Xinyu140203/RAG_MIA, perturb.py), single user message; the paper's Appendix D
# writes the count as {num_to_replace}.
PERTURB_PROMPT = (
    "Replace {replace_count} key adjectives or adverbs in noticeable positions with their antonyms "
    "in the following text, ensuring the modified text remains logically correct:\n{text}\n"
    "Return only the modified text."
)

WORDNET_DIRS = (
    "/usr/share/wordnet",  # Debian/Ubuntu: apt-get install wordnet-base
    "~/nltk_data/corpora/wordnet",
    "/usr/share/nltk_data/corpora/wordnet",
    "/usr/local/share/nltk_data/corpora/wordnet",
)

# Function words that WordNet also lists as adjectives/adverbs with antonyms; swapping them breaks
# the grammar rather than the meaning.
STOP_WORDS = frozenset("""
a an the this that these those all some any no none each every both either neither few many much
more most less least other another such same own only
in out on off up down over under above below into onto from to with without within by at for
against before after about around through between among across along behind beyond inside
outside near far here there then now again once twice
i me my we us our you your he him his she her it its they them their
am is are was were be been being have has had do does did will would shall should can could may
might must not nor and or but if so yet as than too very also just even still ever never
""".split())

_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]+(?:['\u2019-][A-Za-z]+)*(?![A-Za-z0-9_])")
_MARKER = re.compile(r"\([a-z]+\)$")  # adjective syntactic markers in data.adj: (a) (p) (ip)


def replace_count(text: str, theta: float) -> int:
    """Words to replace: ``max(1, int(θ · len(text.split())))`` (official ``int(θ·n) or 1``;
    a 1e-9 guard keeps e.g. 0.07·100 from flooring to 6)."""
    return max(1, int(theta * len(str(text).split()) + 1e-9))


def doc_rng(seed: int, doc_id: str) -> np.random.Generator:
    """A Generator that depends only on (seed, doc_id)."""
    h = int.from_bytes(hashlib.sha256(str(doc_id).encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, h & 0xFFFFFFFF, h >> 32])


# ----------------------------------------------------------------------------------- WordNet


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
        + "); install them with `apt-get install wordnet-base` or set RAGMI_WORDNET_DIR"
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
        rest = f[4 + p_cnt:]
        tagsense = int(rest[1])
        out[lemma] = (n_syn, tagsense, [int(x) for x in rest[2:2 + n_syn]])
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
            sym, tgt, _pos, st = f[i + 1 + 4 * k: i + 5 + 4 * k]
            if sym == "!":
                ants.append((int(st[:2], 16), int(tgt), int(st[2:], 16)))
        synsets[offset] = (words, ants)
    return synsets


# WordNet's morphy detachment rules (wndb's morph(7WN)), to see that e.g. "covered" is mostly a form
# of the verb "cover" although WordNet also lists the adjective "covered" (antonym "uncovered").
_DETACH = {
    "noun": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y")],
    "verb": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
             ("ing", "")],
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
        idx = {p: _parse_index(self.root / f"index.{p}") if (self.root / f"index.{p}").is_file() else {}
               for p in ("adj", "adv", "noun", "verb")}
        data = {p: _parse_data(self.root / f"data.{p}") for p in ("adj", "adv")}
        exc = {p: _parse_exc(self.root / f"{p}.exc") for p in ("noun", "verb")}
        self._table: dict[str, Candidate] = {}
        for lemma in set(idx["adj"]) | set(idx["adv"]):
            if lemma in STOP_WORDS or "_" in lemma:
                continue

            def weight(p):
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


def match_case(src: str, repl: str) -> str:
    """``repl`` written in the case pattern of ``src`` (UPPER, Capitalised or as WordNet has it)."""
    if len(src) > 1 and src.isupper():
        return repl.upper()
    if src[:1].isupper():
        return repl[:1].upper() + repl[1:]
    return repl


def _article_for(word: str) -> str:
    w = word.lower()
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    if w.startswith(("uni", "use", "usu", "eu", "one", "once")):
        return "a"
    return "an" if w[:1] in "aeiou" else "a"


@dataclass
class Perturbation:
    text: str
    n_swapped: int
    n_requested: int
    method: str
    swaps: list = field(default_factory=list)  # [(original word, replacement)], in text order
    extra: dict = field(default_factory=dict)  # LLM bookkeeping (prompt, tokens, failure reason)


class WordNetPerturber:
    """Swap ``replace_count(text, θ)`` adjectives/adverbs for their WordNet antonyms."""

    method = "wordnet"

    def __init__(self, seed: int = 0, wordnet_dir: str | None = None):
        self.seed = int(seed)
        self.wn = load_wordnet(wordnet_dir)

    def perturb(self, text: str, theta: float, doc_id: str) -> Perturbation:
        text = str(text)
        n_req = replace_count(text, theta)
        tokens = list(_WORD.finditer(text))
        tiers: dict[int, list[int]] = {1: [], 2: []}
        for i, m in enumerate(tokens):
            c = self.wn.lookup(m.group(0))
            if c is not None:
                tiers[c.tier].append(i)
        # One permutation per tier, drawn the same way for every θ: swaps are nested in θ.
        rng = doc_rng(self.seed, doc_id)
        order = [tiers[1][j] for j in rng.permutation(len(tiers[1]))]
        order += [tiers[2][j] for j in rng.permutation(len(tiers[2]))]
        chosen = sorted(order[:n_req])
        repl = {}
        for i in chosen:
            word = tokens[i].group(0)
            repl[i] = match_case(word, self.wn.lookup(word).antonym)
        out, pos, swaps = [], 0, []
        for i, m in enumerate(tokens):
            if i not in repl:
                continue
            new = repl[i]
            prev = tokens[i - 1] if i > 0 else None
            if (prev is not None and prev.group(0).lower() in ("a", "an") and (i - 1) not in repl
                    and text[prev.end():m.start()].isspace()):
                art = match_case(prev.group(0), _article_for(new))
                out.append(text[pos:prev.start()] + art + text[prev.end():m.start()])
            else:
                out.append(text[pos:m.start()])
            out.append(new)
            pos = m.end()
            swaps.append((m.group(0), new))
        out.append(text[pos:])
        return Perturbation("".join(out), len(swaps), n_req, self.method, swaps)


# --------------------------------------------------------------------------------------- LLM

_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly|of course)[!,.]?\s*)?"
    r"(?:here(?:'s| is| are)[^\n:]*|(?:the )?(?:modified|perturbed|rewritten|revised|updated) (?:text|version)"
    r"[^\n:]*|output|result)\s*:\s*",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^\s*```[A-Za-z]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_TRAILER = re.compile(r"\n\s*\n\s*\(?(?:note|notes|explanation|changes|replacements|i replaced)\b.*$",
                      re.IGNORECASE | re.DOTALL)
_QUOTES = [('"', '"'), ("\u201c", "\u201d"), ("'", "'"), ("`", "`")]


def clean_llm_output(text: str) -> str:
    """Strip preambles, code fences, wrapping quotes and trailing notes from the LLM's rewrite."""
    t = str(text or "").strip()
    t = _PREAMBLE.sub("", t, count=1).strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1).strip()
    t = _TRAILER.sub("", t).strip()
    for lq, rq in _QUOTES:
        if len(t) >= 2 and t.startswith(lq) and t.endswith(rq) and t.count(lq if lq == rq else rq) <= 2:
            t = t[len(lq):-len(rq)].strip()
    return t


def _words(text: str) -> list[str]:
    return [m.group(0).lower() for m in _WORD.finditer(text)]


def plausibility_failure(original: str, rewrite: str) -> str | None:
    """Why ``rewrite`` is not a plausible antonym rewrite of ``original`` (None when it is):
    empty; identical (up to whitespace); sharing < 50 % of the original's words (multiset); or
    over 1.5 × its word count + 5 (an appended explanation)."""
    if not rewrite.strip():
        return "empty"
    if " ".join(rewrite.split()) == " ".join(str(original).split()):
        return "identical"
    a, b = _words(original), _words(rewrite)
    if not a:
        return None
    common = sum(min(a.count(w), b.count(w)) for w in set(a))
    if common < 0.5 * len(a):
        return "low-overlap"
    if len(b) > 1.5 * len(a) + 5:
        return "too-long"
    return None


def changed_words(original: str, rewrite: str) -> int:
    """Words of ``original`` replaced or deleted in ``rewrite`` (word-level diff)."""
    a, b = _words(original), _words(rewrite)
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return sum(i2 - i1 for tag, i1, i2, _, _ in sm.get_opcodes() if tag in ("replace", "delete"))


class LLMPerturber:
    """The paper's LLM perturbation (Appendix D prompt) with a WordNet fallback per document."""

    method = "llm"

    def __init__(self, tools, max_tokens: int = 1024, temperature: float = 0.0,
                 fallback: WordNetPerturber | None = None):
        self.tools = tools
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self.fallback = fallback

    @staticmethod
    def prompt(text: str, theta: float) -> list[dict]:
        return [{"role": "user", "content": PERTURB_PROMPT.format(replace_count=replace_count(text, theta), text=text)}]

    def perturb_many(self, items: list[tuple[str, str, float]]) -> list[Perturbation]:
        """``items``: (doc_id, text, θ); one batched ``tools.chat`` call."""
        prompts = [self.prompt(text, theta) for _, text, theta in items]
        answers = self.tools.chat(prompts, max_tokens=self.max_tokens, temperature=self.temperature) if prompts else []
        if len(answers) != len(prompts):
            raise RuntimeError(f"attacker LLM returned {len(answers)} answers for {len(prompts)} prompts")
        out = []
        for (doc_id, text, theta), prompt, ans in zip(items, prompts, answers):
            extra = {
                "prompt": prompt[0]["content"],
                "llm_model": ans.get("model"),
                "llm_max_tokens": self.max_tokens,
                "llm_temperature": self.temperature,
                "llm_prompt_tokens": ans.get("prompt_tokens"),
                "llm_completion_tokens": ans.get("completion_tokens"),
                "llm_raw_output": ans.get("text"),
            }
            rewrite = clean_llm_output(ans.get("text", ""))
            why = plausibility_failure(text, rewrite)
            n_req = replace_count(text, theta)
            if why is None:
                out.append(Perturbation(rewrite, changed_words(text, rewrite), n_req, "llm", [],
                                        dict(extra, llm_failure=None)))
                continue
            if self.fallback is None:
                raise RuntimeError(f"LLM perturbation of {doc_id} failed ({why}) and no fallback is set")
            p = self.fallback.perturb(text, theta, doc_id)
            p.method = "wordnet-fallback"
            p.extra = dict(extra, llm_failure=why)
            out.append(p)
        return out
