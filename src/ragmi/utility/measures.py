"""Answer-quality measures of a RAG target on benign questions (docs/provenance.md#utility).

Reference-based, as FlashRAG defines them (``flashrag/evaluator/metrics.py``: ``ExactMatch`` "em",
``Sub_ExactMatch`` "acc", ``F1_Score`` "f1"), over texts normalised as in the SQuAD v1.1 evaluation
script that FlashRAG's ``normalize_answer`` copies (lower case, punctuation removed, the articles
a/an/the removed, whitespace collapsed); each is the maximum over the question's reference answers:

* :func:`exact_match`: 1 when the normalised answer equals a normalised reference;
* :func:`substring_match` (FlashRAG's "acc", sub-EM): 1 when a normalised reference is a substring
  (character-wise, as FlashRAG tests it) of the normalised answer;
* :func:`token_f1`: token-level F1 of the normalised answer against a normalised reference; as in
  FlashRAG, a yes/no/noanswer answer (or reference) scores 0 unless both are the same word.

Faithfulness, LLM-free (:func:`faithfulness`): the share of the answer's content tokens (normalised
tokens that are not :data:`STOPWORDS`) that occur among the tokens of the retrieved documents, the
answer's tokens counted with repetition.  It stands in for RAGAS's faithfulness (supported claims /
claims of the answer, where an LLM splits the answer into claims and an LLM judges each against the
retrieved context): a token takes the place of a claim and "occurs in the context" the place of "can be
inferred from it".  So a correct paraphrase scores low, a false statement recombined from context
words scores high, and a negation goes unnoticed.  An answer with no content token (empty, or only
an abstention such as "unanswerable", :func:`abstained`) makes no claim and has no faithfulness (NaN;
RAGAS gives no score to an answer without statements either), so it is left out of the mean and
its n.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

METRICS = ("em", "sub_em", "f1", "faithfulness")
METRIC_LABELS = {
    "em": "exact match",
    "sub_em": "substring match",
    "f1": "token F1",
    "faithfulness": "faithfulness (lexical)",
}
REFERENCE_METRICS = ("em", "sub_em", "f1")

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_YES_NO = ("yes", "no", "noanswer")

# Function words that carry no claim (the answer's remaining tokens are its "content"): English
# pronouns, auxiliaries, prepositions, conjunctions and determiners; a/an/the are already gone.
STOPWORDS = frozenset(
    """
    i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves this that these those who whom
    whose which what when where why how am is are was were be been being have has had having do does
    did doing will would shall should can could may might must of at by for with about against between
    into through during before after above below to from up down in out on off over under again further
    then once here there all any both each few more most other some such no nor not only own same so
    than too very just also as and but if or because until while s t d ll m re ve y yes ok okay please
    """.split()
)

# An answer that declines (the rag_mia template asks for "unanswerable"; MEntA's and IA's for "I don't know").
_ABSTAIN = re.compile(
    r"\b(unanswerable|i (?:do not|don'?t|don\u2019t|dont) know|cannot answer|can ?not be answered"
    r"|not (?:enough|sufficient) information|no information|not mentioned|not provided in the context)\b",
    re.IGNORECASE,
)


def normalize_answer(text: str) -> str:
    """SQuAD/FlashRAG normalisation: lower case, punctuation removed, articles removed, whitespace collapsed."""
    s = str(text or "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _refs(references) -> list[str]:
    if isinstance(references, str):
        return [references]
    return [str(r) for r in references]


def exact_match(answer: str, references) -> float:
    pred = normalize_answer(answer)
    return float(any(normalize_answer(r) == pred for r in _refs(references)))


def substring_match(answer: str, references) -> float:
    pred = normalize_answer(answer)
    return float(any(normalize_answer(r) in pred for r in _refs(references) if normalize_answer(r)))


def token_f1(answer: str, references) -> float:
    pred = normalize_answer(answer)
    best = 0.0
    for ref in _refs(references):
        gold = normalize_answer(ref)
        if (pred in _YES_NO or gold in _YES_NO) and pred != gold:
            continue
        p, g = pred.split(), gold.split()
        same = sum((Counter(p) & Counter(g)).values())
        if same == 0:
            continue
        precision, recall = same / len(p), same / len(g)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def content_tokens(text: str) -> list[str]:
    """The normalised tokens of ``text`` that are not :data:`STOPWORDS`, in order, with repetition."""
    return [t for t in normalize_answer(text).split() if t not in STOPWORDS]


def abstained(answer: str) -> bool:
    """Whether the answer declines to answer ("unanswerable", "I don't know", ...)."""
    return bool(_ABSTAIN.search(str(answer or "")))


def support(text: str, documents: Iterable[str]) -> float:
    """Share of ``text``'s content tokens that occur among the tokens of ``documents`` (NaN when
    ``text`` has no content token)."""
    tokens = content_tokens(text)
    if not tokens:
        return float("nan")
    vocab = set()
    for d in documents:
        vocab.update(normalize_answer(d).split())
    return sum(t in vocab for t in tokens) / len(tokens)


def faithfulness(answer: str, documents: Sequence[str]) -> float:
    """Lexical faithfulness of ``answer`` to the retrieved ``documents`` (module docstring): NaN for an
    abstention or an answer without content tokens."""
    if abstained(answer):
        return float("nan")
    return support(answer, documents)


def score_answer(answer: str, references, documents: Sequence[str] | None) -> dict:
    """Every measure of one answer: em, sub_em, f1 against ``references``; faithfulness against the
    retrieved ``documents`` (NaN when they are unknown, ``None``: a remote target)."""
    return {
        "em": exact_match(answer, references),
        "sub_em": substring_match(answer, references),
        "f1": token_f1(answer, references),
        "faithfulness": float("nan") if documents is None else faithfulness(answer, documents),
    }
