"""A LangChain runnable (an LCEL chain) as a python target.

``from_chain(chain)`` returns the per-query callable of ``targets.<t>.python``: it calls
``chain.invoke(query)`` and reads what the chain returns:

* a string (a chain ending in ``StrOutputParser``);
* a chat message (a chain ending in the chat model): its ``content``, the token log-probabilities
  of ``response_metadata["logprobs"]["content"]`` (``ChatOpenAI(logprobs=True, top_logprobs=K)``;
  the OpenAI format: ``{token, logprob, top_logprobs: [{token, logprob}]}`` per token) and the
  token counts of ``usage_metadata``;
* a mapping with the answer under ``answer_key`` (a string or a message) and the retrieved
  ``Document`` objects under ``context_key``: the "return sources" pattern of LangChain's RAG
  tutorial (``RunnablePassthrough.assign(answer=...)`` over ``{"context": retriever, "question":
  ...}``, https://python.langchain.com/docs/how_to/qa_sources/).  Each document's id is
  ``metadata[id_key]``, else its ``id``.

With ``max_tokens_field`` (the id of a ``ConfigurableField`` on the chat model's ``max_tokens``,
https://python.langchain.com/docs/how_to/configure/) each call passes the attack's ``max_tokens``
as ``config={"configurable": {max_tokens_field: n}}``; without it the chain answers with its own
settings, as it does in production.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def message_fields(msg) -> dict:
    """Answer text, log-probabilities and token counts of a LangChain chat message."""
    content = msg.content
    if isinstance(content, list):  # content blocks: the text ones
        content = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
    out: dict = {"answer": content}
    lp = ((getattr(msg, "response_metadata", None) or {}).get("logprobs") or {}).get("content") or []
    if lp:
        out["token_logprobs"] = [float(t["logprob"]) for t in lp]
        out["top_logprobs"] = [t.get("top_logprobs") or [] for t in lp]
    usage = getattr(msg, "usage_metadata", None) or {}
    if usage:
        out["prompt_tokens"] = int(usage.get("input_tokens", 0))
        out["completion_tokens"] = int(usage.get("output_tokens", 0))
    return out


def document_ids(docs, id_key: str) -> list[str]:
    """The ids of retrieved LangChain ``Document`` objects: ``metadata[id_key]``, else ``id``."""
    ids = []
    for d in docs:
        meta = getattr(d, "metadata", None) or {}
        value = meta.get(id_key, getattr(d, "id", None))
        if value is None:
            raise ValueError(f"a retrieved document has neither metadata[{id_key!r}] nor an id")
        ids.append(str(value))
    return ids


def chain_result(out, *, id_key: str = "id", answer_key: str = "answer", context_key: str = "context") -> dict:
    """What one ``chain.invoke`` returned, in the python target's contract."""
    if isinstance(out, str):
        return {"answer": out}
    if hasattr(out, "content") and not isinstance(out, Mapping):
        return message_fields(out)
    if isinstance(out, Mapping):
        if answer_key not in out:
            raise ValueError(f"the chain returned a mapping without {answer_key!r} (keys: {', '.join(map(str, out))})")
        answer = out[answer_key]
        fields = message_fields(answer) if hasattr(answer, "content") else {"answer": answer}
        if context_key in out:
            fields["retrieved_ids"] = document_ids(out[context_key], id_key)
        return fields
    raise ValueError(f"the chain returned a {type(out).__name__}: expected a str, a message or a mapping")


def from_chain(
    chain,
    *,
    id_key: str = "id",
    answer_key: str = "answer",
    context_key: str = "context",
    max_tokens_field: str | None = None,
) -> Callable:
    """The per-query callable of a LangChain runnable (see the module's docstring)."""

    def run(query: str, max_tokens: int | None = None) -> dict:
        config = {"configurable": {max_tokens_field: int(max_tokens)}} if max_tokens_field and max_tokens else None
        out = chain.invoke(query, config=config) if config else chain.invoke(query)
        return chain_result(out, id_key=id_key, answer_key=answer_key, context_key=context_key)

    return run
