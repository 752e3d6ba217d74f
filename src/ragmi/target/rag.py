"""The target RAG system: query -> retrieve top-k -> fill template -> generate.

The pipeline is written as named stages so that defenses can act on one of them (the *hooks*): the
query, the retrieval scores, the retrieved content, the template and the generation output.  A
defense is an object with a ``name`` and one or more of the methods ``on_query``,
``on_retrieval_scores``, ``on_retrieved_content``, ``on_template`` and ``on_generation_output``; the
target calls each configured defense's method at that stage.  (No defense is configured by the
pipeline yet; see README, feature table.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .generators import make_request
from .templates import Template

HOOKS = ("on_query", "on_retrieval_scores", "on_retrieved_content", "on_template", "on_generation_output")


@dataclass
class RAGSystem:
    retriever: object  # ragmi.target.index.Retriever
    documents: dict  # doc_id -> text of the retrieval database (the members)
    template: Template
    generator: object  # has .generate(list[request]) -> list[response]
    k: int = 4
    defenses: list = field(default_factory=list)
    temperature: float = 0.0
    seed: int = 0

    def _apply(self, hook: str, value, **context):
        for d in self.defenses:
            fn = getattr(d, hook, None)
            if fn is not None:
                value = fn(value, **context)
        return value

    def retrieve(self, queries: list[str]):
        queries = [self._apply("on_query", q) for q in queries]
        t0 = time.perf_counter()
        ids, scores = self.retriever.search(queries, self.k)
        per_query = (time.perf_counter() - t0) / max(1, len(queries))
        out = []
        for q, i, s in zip(queries, ids, scores):
            i, s = self._apply("on_retrieval_scores", (i, s), query=q)
            docs = [self.documents[d] for d in i]
            docs = self._apply("on_retrieved_content", docs, query=q, doc_ids=i)
            out.append((q, i, s, docs))
        return out, per_query

    def answer(self, user_prompts: list[str], max_tokens: list[int], top_logprobs: list[int]) -> list[dict]:
        retrieved, retrieval_s = self.retrieve(user_prompts)
        requests = []
        for (q, _, _, docs), mt, tl in zip(retrieved, max_tokens, top_logprobs):
            messages = self._apply("on_template", self.template.messages(q, docs), query=q)
            requests.append(make_request(messages, mt, tl, self.temperature, self.seed))
        responses = self.generator.generate(requests)
        out = []
        for (q, ids, scores, _), resp in zip(retrieved, responses):
            resp = self._apply("on_generation_output", dict(resp), query=q)
            resp["retrieved_ids"] = list(ids)
            resp["retrieval_scores"] = [float(x) for x in scores]
            resp["retrieval_s"] = retrieval_s
            out.append(resp)
        return out
