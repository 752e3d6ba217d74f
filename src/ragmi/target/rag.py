"""The target RAG system: query -> retrieve top-k -> fill template -> generate.

No defense acts on these stages yet (README, feature table): the defense work adds its hooks here,
together with the audit that checks each one is active.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .generators import make_request
from .templates import Template

@dataclass
class RAGSystem:
    retriever: object  # ragmi.target.index.Retriever
    documents: dict  # doc_id -> text of the retrieval database (the members)
    template: Template
    generator: object  # has .generate(list[request]) -> list[response]
    k: int = 4
    temperature: float = 0.0
    seed: int = 0

    def retrieve(self, queries: list[str]):
        t0 = time.perf_counter()
        ids, scores = self.retriever.search(queries, self.k)
        per_query = (time.perf_counter() - t0) / max(1, len(queries))
        out = [(q, i, s, [self.documents[d] for d in i]) for q, i, s in zip(queries, ids, scores)]
        return out, per_query

    def answer(self, user_prompts: list[str], max_tokens: list[int], top_logprobs: list[int]) -> list[dict]:
        retrieved, retrieval_s = self.retrieve(user_prompts)
        requests = [make_request(self.template.messages(q, docs), mt, tl, self.temperature, self.seed)
                    for (q, _, _, docs), mt, tl in zip(retrieved, max_tokens, top_logprobs)]
        responses = self.generator.generate(requests)
        out = []
        for (_, ids, scores, _), resp in zip(retrieved, responses):
            resp = dict(resp)
            resp["retrieved_ids"] = list(ids)
            resp["retrieval_scores"] = [float(x) for x in scores]
            resp["retrieval_s"] = retrieval_s
            out.append(resp)
        return out
