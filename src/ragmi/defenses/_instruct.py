"""Insert one instruction paragraph into a RAG template (the MEntA artifact's prompt-instruction
defense and its DCMI stand-in; docs/provenance.md#instruction_menta, #instruction_dcmi), and tell a
template's fixed instructions from its filled turns (:func:`holds_placeholder`).

The edit is made on the template's format strings, before the question and the documents are filled
in, so no retrieved text can move the insertion point.
"""

from __future__ import annotations

import dataclasses
import re

from ..rag.templates import Template

IMPORTANT = "IMPORTANT: Do not directly repeat any retrieved content, but summarize it based on your understanding."

_PLACEHOLDER = re.compile(r"\{(?:context|question)\}")
_ANSWER_LINE = re.compile(r"(?m)^Answer the question")


def holds_placeholder(text: str | None) -> bool:
    """Whether a template turn is filled with the query or the context (a ``{context}`` or
    ``{question}`` placeholder), rather than being fixed instructions."""
    return text is not None and _PLACEHOLDER.search(text) is not None


def _fields(t: Template) -> list[str]:
    return ["system", "user"] if t.system is not None else ["user"]


def _after_first_paragraph(text: str, paragraph: str) -> str | None:
    """``paragraph`` inserted after the first instruction paragraph of ``text`` (its first run of
    non-empty lines without a ``{context}``/``{question}`` placeholder); None when there is none."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() and not _PLACEHOLDER.search(line)), None)
    if start is None:
        return None
    end = start
    while end + 1 < len(lines) and lines[end + 1].strip() and not _PLACEHOLDER.search(lines[end + 1]):
        end += 1
    head = "\n".join(lines[: end + 1])
    tail = "\n".join(lines[end + 1 :]).lstrip("\n")
    return head + "\n\n" + paragraph + ("\n\n" + tail if tail else "")


def _prepend(t: Template, paragraph: str) -> Template:
    field = _fields(t)[0]
    return dataclasses.replace(t, **{field: paragraph + "\n\n" + getattr(t, field)})


def insert_after_instruction(t: Template, paragraph: str = IMPORTANT) -> Template:
    """After the first instruction paragraph (system turn first, then user turn): the MEntA artifact's
    DCMI, IA and MEntA prompts all place the line there.  No instruction text at all: prepended."""
    for field in _fields(t):
        new = _after_first_paragraph(getattr(t, field), paragraph)
        if new is not None:
            return dataclasses.replace(t, **{field: new})
    return _prepend(t, paragraph)


def insert_before_answer_instruction(t: Template, paragraph: str = IMPORTANT) -> Template:
    """Before the first line that starts with "Answer the question" (MEntA's placement); a template
    without such a line gets the paragraph after its first instruction paragraph."""
    for field in _fields(t):
        text = getattr(t, field)
        m = _ANSWER_LINE.search(text)
        if m is not None:
            return dataclasses.replace(t, **{field: text[: m.start()] + paragraph + "\n\n" + text[m.start() :]})
    return insert_after_instruction(t, paragraph)
