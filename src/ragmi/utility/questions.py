"""The benign question set of a dataset: questions whose answers are in the retrieval database.

Every question is about one *member* document (so its answer is in the database every target
retrieves from), drawn in a seeded order from the members that are not attack candidates (the
member candidates only after them), so that the benign traffic does not re-ask the attacks'
documents.  Two sources (docs/provenance.md#utility):

* the dataset's own question-answer pairs where it has them (PubMedQA: ``question`` and
  ``long_answer``, :data:`ragmi.datasets.QA_SOURCES`), used as they are;
* otherwise the attacker LLM writes one question and a short reference answer per document
  (:data:`QUESTION_PROMPT`), once, before any target answers: the frame is frozen as parquet
  (``results/utility/<dataset>/questions.parquet``) and the LLM's answers are cached like every other
  attacker-LLM call.  A document whose reply gives a question but no answer is asked once more for the
  answer alone (:data:`ANSWER_PROMPT`; small models often stop after "Answer:").  A pair is kept only
  if the answer is grounded in its document (at least ``min_answer_support`` of its content tokens
  occur in it, :func:`ragmi.utility.measures.support`), has at most ``max_answer_words`` words, and is
  not given away by the question.  Each round asks :data:`OVERSAMPLE` times as many documents as pairs
  are missing (the first grounded pairs in pool order are kept, a surplus one is marked so), until
  ``n_questions`` pairs are kept, the pool is spent or :data:`MAX_ASKED_PER_QUESTION` documents per
  wanted question were asked.  Every attempt stays in the frame (``valid``, ``reject_reason``).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from .measures import normalize_answer, support

QUESTION_PROMPT = """Read the document below. Write one question that the document answers, and the answer to it. The answer must be a short phrase copied word for word from the document.
Reply in exactly this format:
Question: <the question>
Answer: <the short answer>

Document:
{document}"""

ANSWER_PROMPT = """Document:
{document}

Question: {question}
Answer the question with a short phrase copied word for word from the document. Reply with the phrase only."""

COLUMNS = [
    "question_id",
    "doc_id",
    "question",
    "answer",
    "source",
    "valid",
    "reject_reason",
    "answer_support",
    "round",
    "prompt",
    "output",
    "answer_output",
    "llm_model",
    "llm_max_tokens",
    "llm_temperature",
    "llm_prompt_tokens",
    "llm_completion_tokens",
]

# At most this many documents are asked per question wanted (a model that rarely gives a grounded
# pair costs a bounded number of calls; the frame says how many were kept).
MAX_ASKED_PER_QUESTION = 3
OVERSAMPLE = 1.5
SURPLUS = "surplus: n_questions already kept"

_Q = re.compile(r"^\s*[*#_\s]*question\s*\d*\s*[:.\-]\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_A = re.compile(r"^\s*[*#_\s]*answer\s*\d*\s*[:.\-]\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_STRIP = " *_`\"'\u201c\u201d<>[]"


def question_pool(members: pd.DataFrame, candidates: pd.DataFrame, seed: int) -> list[str]:
    """Member doc_ids in the order questions are drawn: the members that are not candidates in a
    seeded random order, then the member candidates in a seeded random order."""
    cand = set(candidates["doc_id"].astype(str))
    ids = sorted(members["doc_id"].astype(str))
    rest = [d for d in ids if d not in cand]
    inside = [d for d in ids if d in cand]
    rng = np.random.default_rng([int(seed), 0x7574])  # "ut": apart from the split's own draws
    return [rest[i] for i in rng.permutation(len(rest))] + [inside[i] for i in rng.permutation(len(inside))]


def document_text(title: str, text: str) -> str:
    title = " ".join(str(title or "").split())
    body = " ".join(str(text or "").split())
    return f"{title}\n{body}" if title else body


def _first(pattern: re.Pattern, text: str) -> str:
    for m in pattern.finditer(text or ""):
        value = m.group(1).strip().strip(_STRIP).strip()
        if value:
            return value
    return ""


def parse_question_answer(text: str) -> tuple[str, str]:
    """``(question, answer)`` from a reply in the ``Question: …`` / ``Answer: …`` format ("" for a part
    it lacks); a question runs to its first "?"."""
    q = _first(_Q, text)
    if "?" in q:
        q = q.split("?", 1)[0].strip() + "?"
    a = _first(_A, text)
    return q, a


def parse_answer(text: str) -> str:
    """The answer of a reply to :data:`ANSWER_PROMPT`: its first non-empty line, without an "Answer:" label."""
    labelled = _first(_A, text)
    if labelled:
        return labelled
    for line in (text or "").splitlines():
        line = line.strip().strip(_STRIP).strip()
        if line:
            return line
    return ""


def check_pair(
    question: str, answer: str, document: str, max_answer_words: int, min_support: float
) -> tuple[str, float]:
    """``(reject reason or "", support of the answer in the document)``."""
    if len(question.split()) < 3:
        return "no question parsed", float("nan")
    if not normalize_answer(answer):
        return "no answer parsed", float("nan")
    s = support(answer, [document])
    if len(answer.split()) > max_answer_words:
        return f"answer longer than {max_answer_words} words", s
    if not s == s or s < min_support:  # NaN: only stopwords
        return "answer not grounded in the document", s
    if normalize_answer(answer) in normalize_answer(question):
        return "answer given in the question", s
    return "", s


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["valid"] = df["valid"].astype(bool)
    for c in ("round", "llm_max_tokens", "llm_prompt_tokens", "llm_completion_tokens"):
        df[c] = pd.to_numeric(df[c]).fillna(0).astype("int64")
    df["answer_support"] = pd.to_numeric(df["answer_support"]).astype(float)
    df["llm_temperature"] = pd.to_numeric(df["llm_temperature"]).astype(float)
    for c in ("question_id", "doc_id", "question", "answer", "source", "reject_reason", "prompt", "output"):
        df[c] = df[c].fillna("").astype(str)
    df["answer_output"] = df["answer_output"].fillna("").astype(str)
    df["llm_model"] = df["llm_model"].fillna("").astype(str)
    return df


def _row(i: int, doc_id: str, question: str, answer: str, source: str, reason: str, s: float, **llm) -> dict:
    return {
        "question_id": f"u{i:05d}",
        "doc_id": doc_id,
        "question": question,
        "answer": answer,
        "source": source,
        "valid": not reason,
        "reject_reason": reason,
        "answer_support": s,
        "round": llm.pop("round", 0),
        "prompt": llm.pop("prompt", ""),
        "output": llm.pop("output", ""),
        "answer_output": llm.pop("answer_output", ""),
        "llm_model": llm.pop("llm_model", ""),
        "llm_max_tokens": llm.pop("llm_max_tokens", 0),
        "llm_temperature": llm.pop("llm_temperature", 0.0),
        "llm_prompt_tokens": llm.pop("llm_prompt_tokens", 0),
        "llm_completion_tokens": llm.pop("llm_completion_tokens", 0),
    }


def dataset_questions(qa: pd.DataFrame, pool: list[str], n: int) -> pd.DataFrame:
    """The first ``n`` of the dataset's own pairs (``qa``: doc_id, question, answer) in ``pool`` order;
    a pair with an empty question or answer is skipped."""
    by_doc = {str(r["doc_id"]): r for r in qa.to_dict("records")}
    rows = []
    for doc_id in pool:
        r = by_doc.get(doc_id)
        if r is None:
            continue
        q, a = " ".join(str(r["question"] or "").split()), " ".join(str(r["answer"] or "").split())
        if not q or not a:
            continue
        rows.append(_row(len(rows), doc_id, q, a, "dataset", "", float("nan")))
        if len(rows) == n:
            break
    return frame(rows)


def llm_questions(
    tools,
    documents: dict,
    pool: list[str],
    n: int,
    params: dict,
    temperature: float,
    log=print,
) -> pd.DataFrame:
    """Questions and reference answers written by the attacker LLM (``tools.chat``) for the documents
    of ``pool`` (``documents``: doc_id -> (title, text)), in rounds, until ``n`` pairs are kept or the
    pool is spent (module docstring)."""
    from ..attacks.questions import ask

    max_tokens = int(params["question_max_tokens"])
    rows: list[dict] = []
    kept, start, rnd = 0, 0, 0
    limit = min(len(pool), MAX_ASKED_PER_QUESTION * n)
    while kept < n and start < limit:
        # ask half as many again as are missing: a model that fails on some documents is not asked
        # round after round (each round is one more batched call), and the surplus is marked below
        batch = pool[start : min(limit, start + math.ceil(OVERSAMPLE * (n - kept)))]
        start += len(batch)
        texts = {d: document_text(*documents[d]) for d in batch}
        msgs = [[{"role": "user", "content": QUESTION_PROMPT.format(document=texts[d])}] for d in batch]
        replies = ask(tools, msgs, max_tokens, temperature)
        parsed = {d: parse_question_answer(r.get("text", "")) for d, r in zip(batch, replies)}
        again = [d for d in batch if parsed[d][0] and not parsed[d][1]]
        follow = {}
        if again:
            amsgs = [
                [{"role": "user", "content": ANSWER_PROMPT.format(document=texts[d], question=parsed[d][0])}]
                for d in again
            ]
            follow = dict(zip(again, ask(tools, amsgs, max_tokens, temperature)))
        for d, m, r in zip(batch, msgs, replies):
            q, a = parsed[d]
            f = follow.get(d)
            if f is not None:
                a = parse_answer(f.get("text", ""))
            reason, s = check_pair(q, a, texts[d], int(params["max_answer_words"]), float(params["min_answer_support"]))
            if not reason and kept == n:
                reason = SURPLUS  # a grounded pair beyond the n wanted (pool order decides which are kept)
            kept += not reason
            rows.append(
                _row(
                    len(rows),
                    d,
                    q,
                    a,
                    "attacker_llm",
                    reason,
                    s,
                    round=rnd,
                    prompt=json.dumps(m, ensure_ascii=False),
                    output=str(r.get("text") or ""),
                    answer_output=str(f.get("text") or "") if f is not None else "",
                    llm_model=str(r.get("model", "")),
                    llm_max_tokens=max_tokens,
                    llm_temperature=float(temperature),
                    llm_prompt_tokens=int(r.get("prompt_tokens") or 0) + int((f or {}).get("prompt_tokens") or 0),
                    llm_completion_tokens=int(r.get("completion_tokens") or 0)
                    + int((f or {}).get("completion_tokens") or 0),
                )
            )
        log(f"round {rnd}: {len(batch)} documents asked ({len(again)} asked again for the answer), {kept} pairs kept")
        rnd += 1
    return frame(rows)


def utility_queries(questions: pd.DataFrame, max_tokens: int) -> pd.DataFrame:
    """The queries the targets answer: the valid questions, as a query file of the generate rule."""
    v = questions[questions["valid"]]
    return pd.DataFrame(
        {
            "query_id": v["question_id"].astype(str).to_numpy(),
            "doc_id": v["doc_id"].astype(str).to_numpy(),
            "user_prompt": v["question"].astype(str).to_numpy(),
            "max_tokens": np.full(len(v), int(max_tokens), dtype="int64"),
            "top_logprobs": np.zeros(len(v), dtype="int64"),
        }
    )
