"""Fit every prompt to the generator's context (``targets.<t>.context_fit``).

A prompt whose tokens plus the answer's ``max_tokens`` exceed the generator's context
(``generators.<g>.max_model_len``, the ``--max-model-len`` its vLLM server is started with) is refused
by the server (HTTP 400, "maximum context length is … tokens"), and one long document retrieved into
one context would stop the whole run.  Before generation, :class:`PromptFitter` therefore counts the
prompt's tokens with the generator's own tokenizer and chat template, and when it does not fit,
applies the target's rule:

* ``equal_share`` (the default): the retrieved documents are cut from their end, each keeping its
  start, so that they share the room left (context − ``max_tokens`` − every other token of the
  prompt) equally; a document shorter than its share keeps its whole text and leaves the rest to
  the others (so one long document among short ones is the only one cut).  Cuts fall on token
  boundaries (the tokenizer's character offsets).  The instructions, the question and the chat
  template are never cut: a prompt that does not fit without any document is sent as it is.
* ``none``: nothing is cut; an oversized prompt stops the job with the server's one-line error.

Each query's response records ``n_docs_truncated`` (documents cut) and ``chars_truncated``
(characters removed); the tables count the share of queries that were cut (``ragmi.costs``).
A prompt that fits is sent unchanged, byte for byte: a prompt whose UTF-8 size plus a chat-template
allowance (:data:`TEMPLATE_ALLOWANCE`) fits is passed without loading the tokenizer at all (every
token of a byte-level BPE or SentencePiece tokenizer covers at least one byte).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError

RULES = ("equal_share", "none")
# The corpus job's estimate of a document's tokens, without a tokenizer: about 4 characters per token
# of English text (OpenAI, "What are tokens and how to count them?",
# https://help.openai.com/en/articles/4936856-what-are-tokens-and-how-to-count-them).
CHARS_PER_TOKEN = 4
# Tokens a chat template adds around the messages (role markers, a default system prompt such as
# Qwen2.5's or SmolLM2's), allowed for by the byte bound before any tokenizer is loaded.
TEMPLATE_ALLOWANCE = 256
PER_MESSAGE_ALLOWANCE = 16


def share(lengths: list[int], room: int) -> list[int]:
    """The tokens each document keeps: equal shares of ``room``, a document shorter than its share
    keeping its length and leaving the rest to the longer ones (water-filling)."""
    keep = [0] * len(lengths)
    left, todo = max(0, room), sorted(range(len(lengths)), key=lengths.__getitem__)
    for j, i in enumerate(todo):
        each = left // (len(todo) - j)
        keep[i] = min(lengths[i], each)
        left -= keep[i]
    return keep


def long_documents(corpus, contexts: list[tuple[str, int]]) -> list[str]:
    """The corpus job's warning lines: how many documents (title and text, as the context holds them)
    are longer than the smallest context of the generators that retrieve from the corpus
    (``contexts``: ``(generator, max_model_len)``), at :data:`CHARS_PER_TOKEN`, and the longest.
    Nothing fails: their prompts are fitted (``targets.<t>.context_fit``)."""
    if not contexts or corpus.empty:
        return []
    generator, context = min(contexts, key=lambda c: c[1])
    sizes = corpus["text"].str.len() + corpus["title"].str.len()
    over = sizes > context * CHARS_PER_TOKEN
    if not over.any():
        return []
    i = int(sizes.to_numpy().argmax())
    return [
        f"WARNING: {int(over.sum())} of {len(corpus)} documents are longer than the context of generator "
        f"{generator} ({context} tokens, about {context * CHARS_PER_TOKEN} characters at {CHARS_PER_TOKEN} per "
        f"token); the longest, {corpus['doc_id'].iloc[i]}, has {int(sizes.iloc[i]):,} characters. A prompt they "
        "do not fit in is cut to fit (targets.<t>.context_fit; counted per query in the responses' "
        "n_docs_truncated and the tables' 'queries cut to fit')"
    ]


class PromptFitter:
    """Counts a prompt's tokens as the generator will and cuts its retrieved documents to fit.

    ``tokenizer`` is loaded on first need from ``tokenizer_path`` (the generator's model folder or
    Hub id) unless given."""

    def __init__(
        self,
        context: int,
        rule: str,
        tokenizer_path: str | None = None,
        tokenizer=None,
        where: str = "context_fit",
        log: Callable = print,
    ):
        if rule not in RULES:
            raise ConfigError(f"config key {where}: unknown rule {rule!r}; known: {', '.join(RULES)}")
        self.context = int(context)
        self.rule = rule
        self.tokenizer_path = tokenizer_path
        self._tok = tokenizer
        self.where = where
        self.log = log
        self.stats = {"prompts": 0, "counted": 0, "cut": 0, "docs_cut": 0, "chars_cut": 0, "unfit": 0}

    @property
    def tok(self):
        if self._tok is None:
            from ..models import load_error

            try:
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(self.tokenizer_path)
            except Exception as e:  # noqa: BLE001 - a missing or broken tokenizer: one sentence
                raise load_error("generator tokenizer (targets.<t>.context_fit)", self.tokenizer_path, e) from None
        return self._tok

    def bound(self, messages: list[dict]) -> int:
        """An upper bound of the prompt's tokens, without a tokenizer."""
        size = sum(len(str(m["content"]).encode("utf-8")) for m in messages)
        return size + TEMPLATE_ALLOWANCE + PER_MESSAGE_ALLOWANCE * len(messages)

    def count(self, messages: list[dict]) -> int:
        """The prompt's tokens as an OpenAI-compatible server counts them: the chat template rendered
        with the generation prompt, then tokenized without further special tokens."""
        tok = self.tok
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            text = "\n\n".join(str(m["content"]) for m in messages)
        self.stats["counted"] += 1
        return len(tok(text, add_special_tokens=False)["input_ids"])

    def _cut(self, doc: str, keep: int) -> str:
        """``doc``'s first ``keep`` tokens (its text up to the end of token ``keep``)."""
        if keep <= 0:
            return ""
        offsets = self.tok(doc, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if keep >= len(offsets):
            return doc
        return doc[: offsets[keep - 1][1]]

    def fit(self, messages: list[dict], docs: list[str], max_tokens: int):
        """``(messages, docs, n_docs_truncated, chars_truncated)``: the prompt and its documents as
        they are when they fit (or the rule is ``none``), else with the documents cut."""
        self.stats["prompts"] += 1
        limit = self.context - int(max_tokens)
        if self.rule == "none" or not docs or self.bound(messages) <= limit:
            return messages, docs, 0, 0
        total = self.count(messages)
        if total <= limit:
            return messages, docs, 0, 0
        lengths = [len(self.tok(d, add_special_tokens=False)["input_ids"]) for d in docs]
        # only a document that appears in the prompt as it is can be cut there
        where = [next((j for j, m in enumerate(messages) if d and d in str(m["content"])), None) for d in docs]
        cuttable = [i for i, w in enumerate(where) if w is not None]
        fixed = sum(lengths[i] for i in cuttable)
        room = limit - (total - fixed)
        new_messages, new_docs = messages, list(docs)
        for _ in range(4):  # token boundaries shift a little where a cut text meets its neighbours
            keep = share([lengths[i] for i in cuttable], room)
            new_docs = list(docs)
            for i, k in zip(cuttable, keep):
                if k < lengths[i]:
                    new_docs[i] = self._cut(docs[i], k)
            new_messages = [dict(m) for m in messages]
            for i in cuttable:
                if new_docs[i] != docs[i]:
                    m = new_messages[where[i]]
                    m["content"] = str(m["content"]).replace(docs[i], new_docs[i], 1)
            now = self.count(new_messages)
            if now <= limit:
                break
            room -= now - limit
        else:
            self.stats["unfit"] += 1
            self.log(
                f"WARNING: a prompt of {total} tokens could not be cut to {limit} tokens ({self.where}): "
                "it is sent as it is"
            )
        n = sum(1 for a, b in zip(docs, new_docs) if a != b)
        chars = sum(len(a) - len(b) for a, b in zip(docs, new_docs))
        if n:
            self.stats["cut"] += 1
            self.stats["docs_cut"] += n
            self.stats["chars_cut"] += chars
        return new_messages, new_docs, n, chars

    def summary(self) -> str:
        s = self.stats
        return (
            f"context fit ({self.rule}, {self.context} tokens): {s['prompts']} prompts, {s['cut']} cut "
            f"({s['docs_cut']} documents, {s['chars_cut']} characters removed), {s['counted']} token counts"
            + (f", {s['unfit']} could not be fitted" if s["unfit"] else "")
        )
