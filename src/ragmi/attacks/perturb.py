"""Antonym perturbations of a candidate sample for DCMI's differential calibration.

A perturbed copy has a fraction θ of its words, adjectives or adverbs, replaced by antonyms;
``replace_count(text, θ) = max(1, int(θ · len(text.split())))`` words are requested.

* :class:`LLMPerturber`: the attacker LLM rewrites the sample with :data:`PERTURB_PROMPT`.  The answer
  is cleaned (:func:`clean_llm_output`: preambles, code fences, wrapping quotes, trailing notes); an
  empty, identical or implausible answer (:func:`plausibility_failure`) falls back to the WordNet
  perturber for that document (``method = "wordnet-fallback"``, the reason in ``llm_failure``).
* :class:`WordNetPerturber`: offline and deterministic, antonyms from :mod:`ragmi.attacks.wordnet`.
  Tier-1 candidates come first, tier 2 only when tier 1 has too few; which candidates are swapped is
  a permutation seeded from ``(seed, doc_id)``, so the swaps for a smaller θ are a subset of those
  for a larger θ.  Case and the surrounding punctuation and spacing are kept; an "a"/"an" right
  before a swapped word is re-agreed.  With fewer candidates than requested, all are swapped
  (``n_swapped < n_requested``).  Role labels (:func:`label_spans`: the first word of the text or
  of a line, right before a ':', as "Patient:" and "Doctor:" in HealthCareMagic-style dialogues)
  are never swapped: only the body is perturbed (DCMI §5.1: keywords swapped "to introduce slight
  semantic contradictions").  They still count in ``replace_count`` (the authors' formula over
  ``text.split()``).  The LLM perturber's rewrite is not checked for labels.

Provenance: docs/provenance.md#dcmi.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field

import numpy as np

from .wordnet import load_wordnet

# DCMI Appendix D, as in the authors' perturb.py (single user message).
PERTURB_PROMPT = (
    "Replace {replace_count} key adjectives or adverbs in noticeable positions with their antonyms "
    "in the following text, ensuring the modified text remains logically correct:\n{text}\n"
    "Return only the modified text."
)

_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]+(?:['\u2019-][A-Za-z]+)*(?![A-Za-z0-9_])")
# A role / speaker label: a word (as _WORD spells one) that starts the text or a line -- only spaces
# or tabs before it -- and is immediately followed by ':'.
_LABEL = re.compile(r"^[ \t]*([A-Za-z]+(?:['\u2019-][A-Za-z]+)*):", re.MULTILINE)


def label_spans(text: str) -> set[tuple[int, int]]:
    """(start, end) of every role label of ``text``: a word that starts the text or a line (after
    optional spaces or tabs) and is immediately followed by ':' -- "Patient" and "Doctor" in
    ``"Patient: ...\nDoctor: ..."``.  A ':' elsewhere ("two days: a ...", "Dr. Lee: ...", "at 10:30")
    makes no label."""
    return {m.span(1) for m in _LABEL.finditer(str(text))}


def replace_count(text: str, theta: float) -> int:
    """Words to replace: ``max(1, int(θ · len(text.split())))`` (the authors' ``int(θ·n) or 1``;
    a 1e-9 guard keeps e.g. 0.07·100 from flooring to 6)."""
    return max(1, int(theta * len(str(text).split()) + 1e-9))


def doc_rng(seed: int, doc_id: str) -> np.random.Generator:
    """A Generator that depends only on (seed, doc_id)."""
    h = int.from_bytes(hashlib.sha256(str(doc_id).encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, h & 0xFFFFFFFF, h >> 32])


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
    """Swap ``replace_count(text, θ)`` adjectives/adverbs of the body (role labels excepted,
    :func:`label_spans`) for their WordNet antonyms."""

    method = "wordnet"

    def __init__(self, seed: int = 0, wordnet_dir: str | None = None):
        self.seed = int(seed)
        self.wn = load_wordnet(wordnet_dir)

    def perturb(self, text: str, theta: float, doc_id: str) -> Perturbation:
        text = str(text)
        n_req = replace_count(text, theta)
        tokens = list(_WORD.finditer(text))
        labels = label_spans(text)
        tiers: dict[int, list[int]] = {1: [], 2: []}
        for i, m in enumerate(tokens):
            if m.span() in labels:  # role labels stay: only the body is perturbed
                continue
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
            if (
                prev is not None
                and prev.group(0).lower() in ("a", "an")
                and (i - 1) not in repl
                and text[prev.end() : m.start()].isspace()
            ):
                art = match_case(prev.group(0), _article_for(new))
                out.append(text[pos : prev.start()] + art + text[prev.end() : m.start()])
            else:
                out.append(text[pos : m.start()])
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
_TRAILER = re.compile(
    r"\n\s*\n\s*\(?(?:note|notes|explanation|changes|replacements|i replaced)\b.*$", re.IGNORECASE | re.DOTALL
)
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
            t = t[len(lq) : -len(rq)].strip()
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
    """The LLM perturbation (:data:`PERTURB_PROMPT`) with a WordNet fallback per document."""

    method = "llm"

    def __init__(self, tools, max_tokens: int, temperature: float, fallback: WordNetPerturber | None = None):
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
                out.append(
                    Perturbation(rewrite, changed_words(text, rewrite), n_req, "llm", [], dict(extra, llm_failure=None))
                )
                continue
            if self.fallback is None:
                raise RuntimeError(f"LLM perturbation of {doc_id} failed ({why}) and no fallback is set")
            p = self.fallback.perturb(text, theta, doc_id)
            p.method = "wordnet-fallback"
            p.extra = dict(extra, llm_failure=why)
            out.append(p)
        return out


# The perturbers attacks.dcmi.perturber may name (the schema's enum must match; tests/test_registries.py).
PERTURBERS = {"wordnet": WordNetPerturber, "llm": LLMPerturber}
