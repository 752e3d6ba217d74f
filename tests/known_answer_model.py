"""Rule-based stand-in "models" with known behaviour, for the known-answer tests of every attack
(tests/test_known_answers.py), served over the OpenAI chat-completion API by tests/stand_in.py.

The target's RAG template is recognised from its own format strings (ragmi.rag.templates), which
gives the retrieved context and the attack's query; the query is recognised from each attack's own
prompt templates (ragmi.attacks.*).  Two target models answer it:

* ``leaky`` reads the context as a capable model would: Yes exactly when the quoted text is in the
  context (RAG-MIA, DCMI; with matching top-K log-probabilities), the rest of the document on a
  continuation prompt (S2MIA), the context verbatim on extraction prompts, the context's words for
  MBA's masks, the context sentence that answers a question or "I don't know" when there is none
  (IA, MEntA);
* ``blind`` never looks at the context: every answer is a function of the query alone.  A yes/no
  question (RAG-MIA, DCMI's original and perturbed queries, IA) gets P(Yes) = :func:`blind_p_yes`, a
  hash of the query text spread uniformly over [0.2, 0.8), in its top-K log-probabilities, and the
  answer Yes when that is at least 0.5, else No: the scores vary from candidate to candidate as a
  real model's do, but carry nothing about membership, so an attack whose AUC interval on it excludes
  0.5 learnt from something other than the target (e.g. the evaluation labels: the leaky-scorer test
  of tests/test_known_answers.py).  Free-form prompts get the query's own text echoed (S2MIA's first
  half, the extraction anchor, the subject of a MEntA question), the word before each of MBA's masks.

``attacker`` (the attacker LLM of the offline query generation) writes summaries and questions from
the candidate document its prompt holds, and answers IA's ground-truth (shadow) prompt from the
document as ``leaky`` does.  Everything is deterministic.
"""

from __future__ import annotations

import hashlib
import math
import re
import string

from stand_in import logprobs_content, openai_body

from ragmi.attacks import extraction as ext
from ragmi.attacks import ia, menta, rag_mia, s2mia
from ragmi.attacks.dcmi import QUERY_TEMPLATE as DCMI_TEMPLATE
from ragmi.attacks.mba import QUERY_TEMPLATE as MBA_TEMPLATE
from ragmi.attacks.questions import SUMMARY_PROMPT
from ragmi.rag.templates import TEMPLATES

IDK = "I don't know."


# --------------------------------------------------------------------------------------------- parsing
def format_regex(fmt: str, fields: dict[str, str] | None = None, brackets: bool = False) -> re.Pattern:
    """A regex matching the strings ``fmt`` formats to: each ``{field}`` (or ``[field]`` with
    ``brackets``) a named group (``fields`` may give its pattern; default ``.*?``), a repeated field a
    back-reference; whole-string, DOTALL."""
    fields = fields or {}
    out, seen = [], set()
    if brackets:
        parts = re.split(r"\[(context|question)\]", fmt)
        pieces = [(parts[i], parts[i + 1] if i + 1 < len(parts) else None) for i in range(0, len(parts), 2)]
    else:
        pieces = [(lit, name) for lit, name, _, _ in string.Formatter().parse(fmt)]
    for literal, name in pieces:
        out.append(re.escape(literal))
        if name is None:
            continue
        if name in seen:
            out.append(f"(?P={name})")
        else:
            seen.add(name)
            out.append(f"(?P<{name}>{fields.get(name, '.*?')})")
    return re.compile("".join(out) + r"\Z", re.DOTALL)


# The target templates: system and user message joined by NUL (a template without a system message
# has none), context and question groups.
RAG_TEMPLATES = [
    (t.name, t.doc_separator, bool(t.system), format_regex((t.system + "\x00" if t.system else "") + t.user))
    for t in TEMPLATES.values()
]

# The attacks' queries (what the target gets as the question).
QUERIES = [
    *[("rag_mia", format_regex(p, {"sample": ".+?"})) for p in rag_mia.PROMPTS.values()],
    ("dcmi", format_regex(DCMI_TEMPLATE, {"sample": ".+?"})),
    ("s2mia", format_regex(s2mia.QUERY_TEMPLATE, {"first_half": ".+?"})),
    ("mba", format_regex(MBA_TEMPLATE, {"masked_document": ".+?"})),
    *[(f"extraction/{k}", format_regex(p, {"anchor": ".+?"})) for k, p in ext.PROMPTS.items()],
    # the leakage prompts, which never quote the candidate
    *[("extraction/targeted", format_regex(p, {"topic": ".+?"})) for p in ext.TARGETED_TEMPLATES],
    *[("extraction/generic", re.compile(re.escape(p) + r"\Z", re.DOTALL)) for p in ext.GENERIC_POOL],
]
IA_QUERY = re.compile(r"(?P<text>.+?)\s*Please answer with 'Yes,' 'No,' or 'I don't know'\s*\Z", re.DOTALL)

# The attacker LLM's prompts.
IA_QUESTIONS = format_regex(ia.QUESTION_PROMPT, {"n": r"\d+", "text": ".+"})
IA_SHADOW = format_regex(ia.SHADOW_PROMPT_PAPER, brackets=True)
SUMMARY = format_regex(SUMMARY_PROMPT, {"title": ".*?", "text": ".+"})
MENTA_QUESTIONS = format_regex(
    menta.QUESTION_SYSTEM
    + "\x00"
    + menta.QUESTION_USER.replace("{candidate_document}", "Title: {title} Content: {text}"),
    {"n": r"\d+", "title": ".*?", "text": ".+?"},
)

STOPWORDS = frozenset(
    """a an the and or but of to in on at for with from by is are was were be been am i me my you your he she
    it its this that these those have has had do does did not no yes it's is stated what about there their
    they we our us as so if then than too very can will just said say says account begins""".split()
)
_TOKEN = re.compile(r"[a-z0-9@.'-]+")


def content_tokens(text: str) -> set[str]:
    """Lower-cased words and numbers of ``text`` without stop-words and trailing punctuation."""
    toks = (t.strip(".'-") for t in _TOKEN.findall(str(text).casefold()))
    return {t for t in toks if t and t not in STOPWORDS}


def norm(text: str) -> str:
    return " ".join(str(text).split())


_LABEL = re.compile(r"^(?:Patient|Doctor)\s*:\s*")


def sentences(text: str) -> list[str]:
    """Lines, then sentences (split after . ! ? before whitespace), role labels removed."""
    out = []
    for line in str(text).splitlines():
        for s in re.split(r"(?<=[.!?])\s+", line.strip()):
            s = _LABEL.sub("", s.strip())
            if s:
                out.append(s)
    return out


def h01(*parts) -> float:
    """A deterministic number in [0, 1) from ``parts``."""
    d = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return int.from_bytes(d[:8], "little") / 2**64


def parse_rag(messages: list[dict]):
    """(template name, [documents], question) of a target request, or None for another prompt."""
    sys_msg = "".join(m["content"] for m in messages if m["role"] == "system")
    user = "".join(m["content"] for m in messages if m["role"] == "user")
    for name, sep, has_system, rx in RAG_TEMPLATES:
        if has_system != bool(sys_msg):
            continue
        m = rx.match((sys_msg + "\x00" if has_system else "") + user)
        if m:
            ctx = m.group("context")
            return (
                name,
                [d for d in (ctx.split(sep) if sep else [ctx]) if d.strip()] if ctx else [],
                m.group("question"),
            )
    return None


def classify_query(question: str):
    """(kind, match) of an attack query; kind None for a free-form question (MEntA)."""
    for kind, rx in QUERIES:
        m = rx.match(question)
        if m:
            return kind, m
    m = IA_QUERY.match(question)
    if m:
        return "ia", m
    return None, None


def last_question(text: str) -> str:
    """The last sentence of ``text`` that ends in "?" (an IA / MEntA query is summary + question)."""
    text = norm(text)
    end = text.rfind("?")
    if end < 0:
        return text
    head = text[:end]
    starts = [m.end() for m in re.finditer(r"[.!?]\s+", head)]
    return text[(starts[-1] if starts else 0) : end + 1]


# ------------------------------------------------------------------------------------- log-probabilities
def _steps(text: str, lp_of) -> list:
    tokens = re.findall(r"\s*\S+", text) or [text]
    return [(t, lp_of(i, t), [(t, lp_of(i, t)), (" the", lp_of(i, t) - 2.5)]) for i, t in enumerate(tokens)]


def yes_no_answer(yes: bool, confidence: float, k: int) -> tuple[str, list]:
    """The answer Yes (or No), with top-K log-probabilities in which it has probability ``confidence``."""
    word, other = ("Yes", "No") if yes else ("No", "Yes")
    c = min(max(confidence, 0.5), 0.995)
    first = [(word, math.log(c)), (other, math.log((1 - c) * 0.8)), ("The", math.log((1 - c) * 0.1))]
    first.append(("I", math.log((1 - c) * 0.05)))
    steps = [(word, first[0][1], first), (".", math.log(0.98), [(".", math.log(0.98)), (",", math.log(0.01))])]
    return f"{word}.", logprobs_content(steps, k or None)


def yes_no_p_answer(p_yes: float, k: int) -> tuple[str, list]:
    """The answer Yes (P(Yes) >= 0.5) or No, with top-K log-probabilities at the first token in which
    P(Yes) / (P(Yes) + P(No)) is exactly ``p_yes`` (Yes and No share 0.95 of the mass, "The" and "I"
    the rest; ``p_yes`` in [0.2, 0.8] keeps the generated token the most probable)."""
    word = "Yes" if p_yes >= 0.5 else "No"
    alts = [("Yes", math.log(0.95 * p_yes)), ("No", math.log(0.95 * (1 - p_yes))), ("The", math.log(0.03))]
    alts = sorted(alts, key=lambda a: -a[1]) + [("I", math.log(0.02))]
    steps = [(word, dict(alts)[word], alts), (".", math.log(0.98), [(".", math.log(0.98)), (",", math.log(0.01))])]
    return f"{word}.", logprobs_content(steps, k or None)


def text_answer(text: str, copied: bool, key: str, k: int) -> tuple[str, list]:
    """``text`` with log-probabilities of a copy from the context (``copied``: near 0) or of free text."""
    base = -0.04 if copied else -1.6

    def lp(i, tok):
        return base - (0.05 if copied else 0.8) * h01(key, i, tok)

    return text, logprobs_content(_steps(text, lp), k or None)


def truncate(text: str, max_tokens: int) -> str:
    tokens = re.findall(r"\s*\S+", text)
    return "".join(tokens[: max(1, int(max_tokens))]).strip() if tokens else text


# ------------------------------------------------------------------------------------------ knowledge
def units(docs: list[str]) -> list[str]:
    return [s for d in docs for s in sentences(d)]


def quoted(text: str) -> list[str]:
    return re.findall(r"\u201c([^\u201d]*)\u201d", text)


def answering_document(question: str, docs: list[str]) -> str | None:
    """The first context document holding every content word of ``question`` (None when none does)."""
    want = content_tokens(question)
    if not want:
        return None
    return next((d for d in docs if want <= content_tokens(d)), None)


def answer_unit(question: str, docs: list[str]) -> str | None:
    """The sentence that answers ``question`` from the context: in :func:`answering_document`, the one
    sharing most words with the question outside its quotation (the quotation says whose account)."""
    doc = answering_document(question, docs)
    if doc is None:
        return None
    topic = content_tokens(question) - content_tokens(" ".join(quoted(question)))
    return max(sentences(doc), key=lambda u: len(topic & content_tokens(u)))


def in_context(sample: str, docs: list[str]) -> bool:
    return norm(sample) in norm("\n".join(docs))


def continuation(first_half: str, docs: list[str]) -> str | None:
    """The rest of the context document that begins with ``first_half``."""
    want = norm(first_half)
    for d in docs:
        nd = norm(d)
        i = nd.find(want)
        if i >= 0:
            return nd[i + len(want) :].strip()
    return None


def most_related_unit(query: str, docs: list[str]) -> str:
    want = content_tokens(query)
    best = max(units(docs) or [""], key=lambda u: (len(want & content_tokens(u)), -len(u)))
    return best


def fill_masks(masked: str, docs: list[str]) -> dict[int, str]:
    """The words under ``[Mask_i]`` read from the context: the document the masked text matches, else
    for each mask the word that follows its three left neighbours somewhere in the context."""
    parts = re.split(r"\[Mask_(\d+)\]", masked)
    pattern = ""
    for i, p in enumerate(parts):
        if i % 2:
            pattern += rf"(?P<m{p}>[^\s]+?)"
        else:
            pattern += r"\s+".join(re.escape(w) for w in p.split(" ")) if p else ""
    ctx = "\n".join(docs)
    m = re.search(pattern, ctx)
    if m:
        return {int(k[1:]): v for k, v in m.groupdict().items()}
    out = {}
    for i in range(1, len(parts), 2):
        left = parts[i - 1].split()[-3:]
        if not left:
            continue
        lm = re.search(r"\s+".join(map(re.escape, left)) + r"\s*([A-Za-z0-9@.'-]+?)(?=[\s,.;:!?]|$)", ctx)
        if lm:
            out[int(parts[i])] = lm.group(1)
    return out


def mba_answer(fills: dict[int, str], n: int) -> str:
    return "".join(f"[Mask_{i}]: {fills.get(i, 'unknown')}\n" for i in range(1, n + 1))


# ---------------------------------------------------------------------------------------------- target
def leaky_answer(docs: list[str], question: str, max_tokens: int, k: int) -> tuple[str, list]:
    kind, m = classify_query(question)
    key = question
    if kind in ("rag_mia", "dcmi"):
        yes = in_context(m.group("sample"), docs)
        return yes_no_answer(yes, 0.9 + 0.09 * h01(key), k)
    if kind == "s2mia":
        rest = continuation(m.group("first_half"), docs)
        copied = rest is not None
        if rest is None:  # "the most relevant and matching text in the prompt"
            rest = most_related_unit(m.group("first_half"), docs)
        return text_answer(truncate("{[Response]: '" + rest + "'}", max_tokens), copied, key, k)
    if kind == "mba":
        n = len(re.findall(r"\[Mask_\d+\]", m.group("masked_document")))
        return text_answer(mba_answer(fill_masks(m.group("masked_document"), docs), n), True, key, k)
    if kind and kind.startswith("extraction/"):
        body = "\n\n".join(docs)
        if kind == "extraction/ragthief":
            body = f"```\n{body}\n```"
        return text_answer(truncate(body, max_tokens), True, key, k)
    q = last_question(m.group("text") if kind == "ia" else question)
    if kind == "ia":  # a yes/no question: Yes when the context says so, else "I don't know"
        found = answering_document(q, docs) is not None
        return text_answer("Yes." if found else IDK, found, key, k)
    unit = answer_unit(q, docs)  # MEntA: the context sentence that answers it
    return text_answer(truncate(unit, max_tokens) if unit is not None else IDK, unit is not None, key, k)


BLIND_P_YES = (0.2, 0.8)


def blind_p_yes(question: str) -> float:
    """The blind model's P(Yes) for a yes/no question: uniform over [0.2, 0.8) by a hash of the query
    text alone (so DCMI's perturbed queries get their own)."""
    lo, hi = BLIND_P_YES
    return lo + (hi - lo) * h01("blind P(Yes)", question)


def blind_answer(question: str, max_tokens: int, k: int) -> tuple[str, list]:
    """An answer that depends on the query only (never on the retrieved context)."""
    kind, m = classify_query(question)
    key = question
    if kind in ("rag_mia", "dcmi"):
        return yes_no_p_answer(blind_p_yes(question), k)  # Yes or No by the query's hash
    if kind == "s2mia":
        return text_answer(truncate("{[Response]: '" + m.group("first_half") + "'}", max_tokens), False, key, k)
    if kind == "mba":
        parts = re.split(r"\[Mask_(\d+)\]", m.group("masked_document"))
        fills = {int(parts[i]): (parts[i - 1].split() or ["the"])[-1] for i in range(1, len(parts), 2)}
        return text_answer(mba_answer(fills, len(fills)), False, key, k)
    if kind and kind.startswith("extraction/"):
        said = m.group("anchor") if "anchor" in m.groupdict() else IDK  # the leakage prompts quote nothing
        return text_answer(truncate(said, max_tokens), False, key, k)
    if kind == "ia":  # IA reads the answer's text: Yes or No by the query's hash, as above
        return text_answer("Yes." if blind_p_yes(question) >= 0.5 else "No.", False, key, k)
    phrase = re.sub(r"^.*what is stated about\s+", "", last_question(question)).rstrip("?")
    return text_answer(truncate(phrase + ".", max_tokens), False, key, k)


# -------------------------------------------------------------------------------------------- attacker
def patient_turn(text: str) -> tuple[str, list[str]]:
    """(the opening sentence, the sentences of at least three words of the first line) of a document:
    the patient's turn of a dialogue document, whose opening says whose account it is."""
    first_line = (str(text).strip().splitlines() or [""])[0]
    sents = [s.rstrip(".") for s in sentences(first_line) if len(s.split()) >= 3]
    return (sents[0] if sents else norm(first_line)), sents


def whose(anchor: str) -> str:
    return f"In the account that begins \u201c{anchor}\u201d"


def menta_questions(text: str, n: int) -> list[str]:
    anchor, sents = patient_turn(text)
    phrases = [" ".join(s.split()[: max(3, round(len(s.split()) * 0.6))]) for s in sents]
    return [f"{whose(anchor)}, what is stated about {p}?" for p in phrases[:n]]


def ia_questions(text: str, n: int) -> list[str]:
    anchor, sents = patient_turn(text)
    return [f"{whose(anchor)}, is it stated that {s}?" for s in sents[:n]]


def summary_of(text: str) -> str:
    return f"Health concern of a patient: {patient_turn(text)[0]}."


def attacker_answer(messages: list[dict]) -> str | None:
    user = "".join(m["content"] for m in messages if m["role"] == "user")
    system = "".join(m["content"] for m in messages if m["role"] == "system")
    if system:
        m = MENTA_QUESTIONS.match(system + "\x00" + user)
        if m:
            qs = menta_questions(m.group("text"), int(m.group("n")))
            return "\n".join(f"QUERY_{i}: {q}" for i, q in enumerate(qs, 1))
        return None
    m = IA_QUESTIONS.match(user)
    if m:
        qs = ia_questions(m.group("text"), int(m.group("n")))
        return "\n".join(f"{i}. {q}" for i, q in enumerate(qs, 1))
    m = SUMMARY.match(user)
    if m:
        return summary_of(m.group("text"))
    m = IA_SHADOW.match(user)
    if m:
        return "Yes." if answering_document(m.group("question"), [m.group("context")]) is not None else IDK
    return None


# ------------------------------------------------------------------------------------------- endpoint
class KnownAnswerModel:
    """``reply`` for :class:`stand_in.StandIn`: the request's ``model`` picks leaky, blind or attacker;
    ``unrecognised`` collects prompts no rule understood (the test asserts there are none)."""

    def __init__(self):
        self.unrecognised: list[str] = []
        self.kinds: dict[tuple[str, str], int] = {}

    def _count(self, model: str, kind: str) -> None:
        self.kinds[(model, kind)] = self.kinds.get((model, kind), 0) + 1

    def answer(self, body: dict) -> tuple[str, list | None]:
        model, messages = body["model"], body["messages"]
        max_tokens, k = int(body.get("max_tokens") or 16), int(body.get("top_logprobs") or 0)
        rag = parse_rag(messages)
        if rag is not None and model in ("leaky", "blind"):
            template, docs, question = rag
            kind = classify_query(question)[0] or "question"
            self._count(model, f"{template}:{kind}")
            if model == "leaky":
                return leaky_answer(docs, question, max_tokens, k)
            return blind_answer(question, max_tokens, k)
        if model == "attacker":
            text = attacker_answer(messages)
            if text is not None:
                self._count(model, "attacker")
                return text_answer(text, False, str(messages), 0)
        self.unrecognised.append(f"{model}: {str(messages)[:300]}")
        return text_answer(IDK, False, "", k)

    def reply(self, n, path, body, headers):
        if not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}, None
        text, lps = self.answer(body)
        if not body.get("logprobs"):
            lps = None
        return 200, openai_body(text, lps, usage=(len(str(body["messages"])) // 4, len(lps or [text]))), None
