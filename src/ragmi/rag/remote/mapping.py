"""Where a remote service's JSON holds what ragmi reads and sends: dotted paths into a response
(:func:`json_path`, :func:`sources_at`), the sources a service names matched to the candidate
documents (:class:`SourceMatcher`), the request body filled with the query (:func:`fill_body`) and the
query read out of a chat request (:func:`query_text`)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

_MISSING = object()


def json_path(doc, path: str):
    """The value at a dotted ``path`` (``data.answer``, ``choices.0.text``), or ``_MISSING``."""
    cur = doc
    for part in path.split(".") if path else []:
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def sources_at(doc, path: str) -> list[str]:
    """The source values at ``path``: ``a.b.*.c`` = field ``c`` of every item of the list at ``a.b``;
    without ``*`` the path names a list of strings.  Missing or null: no sources (``[]``)."""
    head, star, tail = path.partition("*")
    items = json_path(doc, head.rstrip("."))
    if items is _MISSING or items is None:
        return []
    if not isinstance(items, list):
        items = [items]
    out = []
    for item in items:
        v = json_path(item, tail.lstrip(".")) if star else item
        if v is not _MISSING and v is not None and str(v).strip():
            out.append(str(v))
    return out


def _fold(text: str) -> str:
    return " ".join(str(text).split()).casefold()


class SourceMatcher:
    """Which candidate document a source value names (``remote.sources_match``):

    * ``id``: the value is the document's ``doc_id``;
    * ``title``: the document's title, compared with case and runs of white space folded;
    * ``text_sha256``: the SHA-256 hex digest of the document's text (UTF-8);
    * ``text``: the value is a passage of at least :attr:`MIN_PASSAGE` characters contained in the
      document's text (case and white space folded) — the chunk a service retrieved out of it.

    A value naming several documents (a shared title, a passage two of them contain) names each; a
    value naming none is kept as ``remote:<value>``, so it can never be mistaken for a candidate id.
    ``aliases`` maps other values to a document's ``doc_id`` whatever ``how`` is: the ids the membership
    game wrote its members under in the target's store (``<id_prefix><run key>-<doc_id>``, from the
    game's manifest; docs/vector-stores.md), which a service reports as the ids of its sources.
    """

    MIN_PASSAGE = 32
    UNMATCHED = "remote:"

    def __init__(self, documents, how: str, aliases: Mapping[str, str] | None = None):
        self.how = how
        self.aliases = {str(k): str(v) for k, v in (aliases or {}).items()}
        self.ids = [str(d) for d in documents["doc_id"]]
        if how == "title":
            keys = [_fold(t) for t in documents["title"]]
        elif how == "text_sha256":
            keys = [hashlib.sha256(str(t).encode("utf-8")).hexdigest() for t in documents["text"]]
        elif how == "text":
            keys = [_fold(t) for t in documents["text"]]
        else:
            keys = list(self.ids)
        self.keys = keys
        self.index: dict[str, list[str]] = {}
        if how != "text":
            for k, d in zip(keys, self.ids):
                if k:
                    self.index.setdefault(k, []).append(d)

    def match(self, value: str) -> list[str]:
        if value in self.aliases:
            return [self.aliases[value]]
        if self.how == "text":
            v = _fold(value)
            hits = [d for k, d in zip(self.keys, self.ids) if len(v) >= self.MIN_PASSAGE and v in k]
        else:
            key = value.strip().lower() if self.how == "text_sha256" else value
            key = _fold(key) if self.how == "title" else key
            hits = self.index.get(key, [])
        return hits or [self.UNMATCHED + value]

    def retrieved_ids(self, sources: list[str]) -> list[str]:
        out: list[str] = []
        for v in sources:
            for d in self.match(v):
                if d not in out:
                    out.append(d)
        return out


def fill_body(template, query: str, request: Mapping, session_id: str | None = None):
    """The request body of ``api: json``: ``{query}`` replaced in every string (and ``{session_id}``
    by the session's id, when there is one), and the strings ``"{max_tokens}"``,
    ``"{top_logprobs}"``, ``"{temperature}"`` replaced by those numbers."""
    numbers = {
        "{max_tokens}": request["max_tokens"],
        "{top_logprobs}": request["top_logprobs"],
        "{temperature}": request["temperature"],
    }

    def fill(x):
        if isinstance(x, str):
            if x in numbers:
                return numbers[x]
            if session_id is not None:  # first: a query that quotes "{session_id}" stays as it is
                x = x.replace("{session_id}", session_id)
            return x.replace("{query}", query)
        if isinstance(x, list):
            return [fill(v) for v in x]
        if isinstance(x, Mapping):
            return {k: fill(v) for k, v in x.items()}
        return x

    return fill(copy.deepcopy(template))


def _top_list(entry, k: int) -> list[dict]:
    """One position's top-K alternatives as ``[{"token", "logprob"}]`` from a list of such objects
    or a ``{token: logprob}`` mapping (sorted by log-probability)."""
    if isinstance(entry, Mapping):
        items = sorted(entry.items(), key=lambda kv: -float(kv[1]))
        out = [{"token": str(t), "logprob": float(lp)} for t, lp in items]
    else:
        out = [{"token": str(a["token"]), "logprob": float(a["logprob"])} for a in entry or []]
    return out[:k] if k > 0 else out


def query_text(messages) -> str:
    """The text of the last user message (a string, or the text parts of a content list)."""
    for m in reversed(list(messages or [])):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return "".join(p.get("text", "") for p in c if isinstance(p, Mapping))
            return "" if c is None else str(c)
    return ""


def game_aliases(manifest_path: str | Path) -> dict[str, str]:
    """{store id: doc_id} of the store game's members (not its canaries), read from the manifest
    ``ragmi.stores.base.insert_members`` wrote: a service that reports the ids of the sources it
    retrieved names the members by these (:class:`SourceMatcher`'s ``aliases``)."""
    m = json.loads(Path(manifest_path).read_text())
    return dict(zip(m["planned"][: len(m["doc_ids"])], m["doc_ids"], strict=True))
