"""Summary and question generation with the attacker LLM, shared by MEntA and IA.

Both attacks write, once per candidate document and before any query reaches the target, a topic
summary (:func:`summary_rows`, IA's summary prompt) and a list of questions.  The parsers are tolerant
and *report* how well they did instead of failing (the default attacker LLM is a 135M model that often
ignores output formats): :func:`parse_questions` returns the questions it could recover and the rule
that found them; callers record ``n_questions_parsed`` and ``parse_failed`` per document.

Materials rows
--------------
Every row written from an attacker-LLM answer keeps the request and the answer (base.py contract):
``prompt`` (the chat messages as a JSON string), ``llm_model``, ``llm_max_tokens``, ``llm_temperature``,
``llm_prompt_tokens``, ``llm_completion_tokens`` and ``output`` (the raw text).  The attack-specific
fields are ``kind`` ("summary" | "questions" | "shadow"), ``item`` (question index, -1 for per-document
rows), ``parsed`` (cleaned summary / parsed label), ``questions`` (list of str, only on "questions"
rows, else empty), ``n_questions_parsed`` (only on "questions" rows) and ``parse_failed``.

Provenance of the prompts and parsing rules: docs/provenance.md#ia and docs/provenance.md#menta.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

import pandas as pd

# --------------------------------------------------------------------------------------------------
# Prompts
# --------------------------------------------------------------------------------------------------

# IA Fig. 16 (retrieval summary), verbatim.
SUMMARY_PROMPT = """Task Description:
You are tasked with generating a concise and accurate topic-focused description of a document based on its content and title (if provided). The description should:
1. Be a single, short sentence.
2. Focus only on the main topic or subject of the document, avoiding verbs and conclusions.
3. Include important keywords from the document.
4. Avoid referencing the document itself with phrases like "The document discusses," "The report highlights," or "This paper investigates."
5. Output only a short, noun-phrase-like description or topic sentence.

Examples:
- Instead of: "The report from the D\u00fcsseldorf conference highlights advancements in green energy technologies."
- Generate: "Advancements in green energy technologies and discussions at the D\u00fcsseldorf conference."
- Instead of: "The document investigates the cyclooxygenase pathway in inflammatory responses."
- Generate: "The cyclooxygenase pathway and its role in inflammatory responses."

Ensure the description is concise, focused on the main topic, and includes relevant keywords. Avoid any extra text, explanations, or labels.

Input:
Title: {title}
Text: {text}

Output:
Provide only the one-sentence topic-focused description as the output."""


def summary_messages(title: str, text: str) -> list[dict]:
    """The summary prompt as one user message."""
    return [{"role": "user", "content": SUMMARY_PROMPT.format(title=title or "", text=text)}]


# --------------------------------------------------------------------------------------------------
# LLM calls and materials rows
# --------------------------------------------------------------------------------------------------

MATERIAL_COLUMNS = [
    "doc_id",
    "kind",
    "item",
    "output",
    "parsed",
    "questions",
    "n_questions_parsed",
    "parse_failed",
    "prompt",
    "llm_model",
    "llm_max_tokens",
    "llm_temperature",
    "llm_prompt_tokens",
    "llm_completion_tokens",
]


def ask(tools, prompts: list[list[dict]], max_tokens: int, temperature: float) -> list[dict]:
    """One batched call to the attacker LLM; checks that one answer came back per prompt."""
    if not prompts:
        return []
    results = list(tools.chat(prompts, max_tokens=int(max_tokens), temperature=float(temperature)))
    if len(results) != len(prompts):
        raise ValueError(f"attacker LLM returned {len(results)} answers for {len(prompts)} prompts")
    return results


def llm_row(
    doc_id, kind: str, item: int, messages: list[dict], result: dict, max_tokens: int, temperature: float, **fields
) -> dict:
    """A materials row that keeps the prompt, the model, its settings and its token counts."""
    row = {
        "doc_id": doc_id,
        "kind": kind,
        "item": int(item),
        "output": str(result.get("text") or ""),
        "parsed": None,
        "questions": [],
        "n_questions_parsed": pd.NA,
        "parse_failed": False,
        "prompt": json.dumps(messages, ensure_ascii=False),
        "llm_model": str(result.get("model", "")),
        "llm_max_tokens": int(max_tokens),
        "llm_temperature": float(temperature),
        "llm_prompt_tokens": int(result.get("prompt_tokens") or 0),
        "llm_completion_tokens": int(result.get("completion_tokens") or 0),
    }
    row.update(fields)
    return row


def question_row(doc_id, messages: list[dict], result: dict, params, questions: list, rule, n: int, **fields) -> dict:
    """The materials row of one document's question-writing call (IA, MEntA): what was asked, what
    was parsed, and whether fewer than ``n`` questions came back."""
    return llm_row(
        doc_id,
        "questions",
        -1,
        messages,
        result,
        params["question_max_tokens"],
        params["question_temperature"],
        parsed=rule,
        questions=questions,
        n_questions_parsed=len(questions),
        parse_failed=len(questions) < n,
        **fields,
    )


def candidate_docs(candidates: pd.DataFrame) -> list[tuple]:
    """``(doc_id, title, text)`` per candidate document; a missing title is ``""``."""
    titles = candidates["title"].fillna("") if "title" in candidates else [""] * len(candidates)
    return list(zip(candidates["doc_id"], titles, candidates["text"]))


def summary_rows(tools, docs: list[tuple], max_tokens: int, temperature: float) -> tuple[list[dict], int]:
    """One topic summary per ``(doc_id, title, text)`` in one batched call: ``kind = "summary"`` rows
    whose ``parsed`` is the cleaned summary, or (``parse_failed``) :func:`fallback_summary` when the
    answer was unusable; returns (rows, number of fallbacks)."""
    msgs = [summary_messages(t, x) for _, t, x in docs]
    res = ask(tools, msgs, max_tokens, temperature)
    rows, n_fallback = [], 0
    for (doc_id, title, text), m, r in zip(docs, msgs, res):
        s = parse_summary(r.get("text", ""), document=f"{title} {text}")
        n_fallback += s is None
        rows.append(
            llm_row(
                doc_id,
                "summary",
                -1,
                m,
                r,
                max_tokens,
                temperature,
                parsed=s if s is not None else fallback_summary(title, text),
                parse_failed=s is None,
            )
        )
    return rows, n_fallback


def materials_frame(rows: list[dict], extra: Sequence[str] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=MATERIAL_COLUMNS + [c for c in extra if c not in MATERIAL_COLUMNS])
    df["item"] = df["item"].astype("int64")
    df["n_questions_parsed"] = df["n_questions_parsed"].astype("Int64")
    df["parse_failed"] = df["parse_failed"].astype(bool)
    df["questions"] = [list(q) if q is not None else [] for q in df["questions"]]
    return df


def doc_rows(materials: pd.DataFrame, kind: str) -> dict:
    """doc_id -> row (as a dict) for the per-document rows of one kind."""
    sub = materials[materials["kind"] == kind]
    if sub["doc_id"].duplicated().any():
        raise ValueError(f"materials hold several '{kind}' rows for one document")
    return {r["doc_id"]: r for r in sub.to_dict("records")}


def budget_scores(
    per_query: pd.DataFrame, question_rows: dict, name: str, n: int, budgets, lowest: float, counts: dict
) -> pd.DataFrame:
    """Per-document scores of a question-based attack for the full run (``name``) and each query
    budget (``name/n=m``: the first m questions asked, column ``ask_order``).

    ``per_query`` has doc_id, ask_order and ``contribution`` (the query's term of the paper's mean);
    a document without any query gets ``lowest``.  ``counts`` maps output columns to boolean
    per-query columns to sum (e.g. ``{"n_idk": "idk"}``).
    """
    variants = [(name, n)] + [(f"{name}/n={int(m)}", int(m)) for m in budgets if 1 <= int(m) <= n]
    groups = {d: g for d, g in per_query.groupby("doc_id", sort=False)}
    rows = []
    for doc_id, r in question_rows.items():
        g = groups.get(doc_id)
        for variant, m in variants:
            sub = g[g["ask_order"] < m] if g is not None else None
            k = 0 if sub is None else len(sub)
            rows.append(
                {
                    "doc_id": doc_id,
                    "variant": variant,
                    "score": float(sub["contribution"].mean()) if k else lowest,
                    "decision": pd.NA,
                    "n_queries": k,
                    **{out: int(sub[col].sum()) if k else 0 for out, col in counts.items()},
                    "n_questions_parsed": int(r["n_questions_parsed"]),
                    "parse_failed": bool(r["parse_failed"]),
                    "no_queries": k == 0,
                }
            )
    return pd.DataFrame(rows)


def as_list(value) -> list:
    """A list column read back from parquet is a numpy array (or None)."""
    if value is None:
        return []
    try:
        if pd.isna(value):
            return []
    except (TypeError, ValueError):
        pass
    return [str(v) for v in list(value)]


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------

_QUERY_BLOCK = re.compile(r"QUERY[_ ]?\d+\s*[:.)]\s*(.+?)(?=QUERY[_ ]?\d+\s*[:.)]|$)", re.IGNORECASE | re.DOTALL)
_NUMBERED = re.compile(
    r"^\s*(?:\*\*)?(?:Q(?:uestion)?\s*)?\d+\s*(?:\*\*)?\s*[.):\-]\s*(?:\*\*)?\s*(.+)$", re.IGNORECASE | re.MULTILINE
)
_BULLET = re.compile(r"^\s*[-*\u2022]\s+(.+)$", re.MULTILINE)
_LEAD_MARKER = re.compile(r"^(?:[-*\u2022]|\(?\d+[.):\-]|[A-Za-z][.)])\s+")
_LEAD_LABEL = re.compile(r"^(?:question|query|q)\s*\d*\s*[:.\-]\s*", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"(question here|your question|\[question\]|\.\.\.$|^\.\.\.)", re.IGNORECASE)


def _clean_question(raw: str, cut_after_qmark: bool) -> str:
    q = " ".join(str(raw).split())
    q = _LEAD_MARKER.sub("", q)
    q = _LEAD_LABEL.sub("", q)
    q = q.strip(" *_`\"'\u201c\u201d")
    if q.startswith("[") and q.endswith("]"):
        q = q[1:-1].strip()
    if cut_after_qmark and "?" in q:
        # "Is X true? Yes" / "Is X true? (Answer: No)": keep the question only
        q = q.split("?", 1)[0].strip().strip("\"'\u201c\u201d") + "?"
    return q.strip()


def parse_questions(
    text: str,
    n: int | None = None,
    *,
    require_question_mark: bool = False,
    exclude: Iterable[str] = (),
    min_words: int = 3,
) -> tuple[list[str], str]:
    """Recover a list of questions from free LLM text; returns ``(questions, rule)``.

    Rules (``rule`` names the one used):

    1. ``QUERY_i: ...`` blocks (MEntA's requested format, also ``QUERY 1.``); used whenever it
       yields a question;
    2. numbered lines ``1. ...``, ``2) ...``, ``Q3: ...``, ``Question 4 - ...``,
    3. bullet lines ``- ...``, ``* ...``, ``\u2022 ...``,
    4. sentences ending in ``?`` anywhere in the text.

    Among rules 2-4, a rule whose items include questions ending in ``?`` keeps only those (small
    models mix headings such as "1. Questions about X:" with "- Question: ...?" lines), and the rule
    with the most ``?``-questions, then the most items, then the lower number wins.

    Each item is whitespace-collapsed, stripped of labels/quotes/brackets and cut after its first
    ``?``.  Dropped: items with fewer than ``min_words`` words, echoes of the prompt's placeholders
    ("[first question here]"), items equal to a string in ``exclude`` (the prompt's own examples),
    duplicates (case-insensitive) and, with ``require_question_mark``, items without ``?``.
    At most ``n`` questions are returned (the first ones).
    """
    text = text or ""
    excluded = {" ".join(e.split()).casefold() for e in exclude}

    def keep(items: Iterable[str]) -> list[str]:
        out, seen = [], set()
        for raw in items:
            q = _clean_question(raw, cut_after_qmark=True)
            key = q.casefold()
            if len(q.split()) < min_words or _PLACEHOLDER.search(q) or key in excluded or key in seen:
                continue
            if require_question_mark and not q.endswith("?"):
                continue
            seen.add(key)
            out.append(q)
        return out

    labelled = keep(m.group(1) for m in _QUERY_BLOCK.finditer(text))
    if labelled:
        return (labelled[:n] if n else labelled), "query_label"
    best, best_key = ([], "none"), (0, 0)
    for rule, items in [
        ("numbered", [m.group(1) for m in _NUMBERED.finditer(text)]),
        ("bullets", [m.group(1) for m in _BULLET.finditer(text)]),
        ("question_marks", re.findall(r"[^.!?\n]*\?", text)),
    ]:
        qs = keep(items)
        asked = [q for q in qs if q.endswith("?")]
        qs = asked or qs  # a list mixing headings and questions keeps its questions
        key = (len(asked), len(qs))
        if qs and key > best_key:  # most real questions, then most items, then the earlier rule
            best, best_key = (qs, rule), key
    qs, rule = best
    return (qs[:n] if n else qs), rule


_SUMMARY_LABEL = re.compile(r"^(?:output|description|summary|topic(?: sentence)?|answer)\s*:\s*", re.IGNORECASE)


# Distinctive phrases of the summary prompt's examples: a summary that contains one of them while the
# document does not was copied from the prompt (SmolLM2-135M does this).
_EXAMPLE_PHRASES = (
    "green energy",
    "d\u00fcsseldorf",
    "cyclooxygenase",
    "the report highlights",
    "the document discusses",
    "this paper investigates",
)


def parse_summary(text: str, document: str = "", min_words: int = 2) -> str | None:
    """The first non-empty line, without a leading label ("Output:", "Description:") or quotes;
    ``None`` when nothing usable is left, or when the model copied from the prompt's examples (a
    distinctive example phrase that ``document`` does not contain)."""
    doc = (document or "").casefold()
    for line in (text or "").splitlines():
        s = " ".join(line.split())
        s = _SUMMARY_LABEL.sub("", s.strip(" *_`#-")).strip(" *_`\"'\u201c\u201d")
        if not s:
            continue
        if any(ph in s.casefold() and ph not in doc for ph in _EXAMPLE_PHRASES):
            return None
        if len(s.split()) < min_words or s.casefold().startswith(("input:", "title:", "text:", "task description")):
            return None
        return s
    return None


def fallback_summary(title: str, text: str, max_chars: int = 200) -> str:
    """Used when the attacker LLM gave no usable summary: the title, else the text's first sentence."""
    if title and str(title).strip():
        return " ".join(str(title).split())
    first = re.split(r"(?<=[.!?])\s+", " ".join(str(text).split()), maxsplit=1)[0]
    return first[:max_chars]


def split_text(text: str, min_length: int) -> list[str]:
    """MEntA's heuristic sentence splitter (the authors' ``split_text``), behaviour for behaviour:

    split on whitespace after ``.``/``!``/``?``; a segment that still holds newlines is split per
    line, and each line loses a leading list marker (``1.``/``2)``, ``-``/``\u2022``/``*``, ``a.``/``B)``);
    whitespace is collapsed; segments shorter than ``min_length`` characters are dropped.
    """
    if not text or not text.strip():
        return []
    out: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        sentence = sentence.strip()
        if not sentence:
            continue
        if "\n" in sentence:
            for line in sentence.split("\n"):
                line = line.strip()
                if not line:
                    continue
                line = re.sub(r"^\d+[.)]\s+", "", line)
                line = re.sub(r"^[-\u2022*]\s+", "", line)
                line = re.sub(r"^[A-Za-z][.)]\s+", "", line)
                line = re.sub(r"\s+", " ", line).strip()
                if len(line) >= min_length:
                    out.append(line)
        else:
            sentence = re.sub(r"\s+", " ", sentence).strip()
            if len(sentence) >= min_length:
                out.append(sentence)
    return out
