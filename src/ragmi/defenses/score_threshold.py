"""Similarity threshold on the retrieved documents: the "Threshold" defense of the knowledge-extraction
benchmark (Qi et al., "Benchmarking Knowledge-Extraction Attacks and Defenses on Retrieval-Augmented
Generation", KDD 2026, arXiv 2602.09319; code charlieqi02/RAG-Knowledge-Extraction-Attack-and-Defense-
Benchmark, ``rags/txt_rag.py`` ``TextRAG.retrieve``, default ``--df_threshold 0.5`` in
``args/defense_args.py``).

The benchmark retrieves the top k, then keeps only the documents whose cosine similarity to the query
is at least ``threshold`` (``cos >= threshold``), in retrieval order; nothing is backfilled, and when
no document passes the context is empty and the generator answers from the template alone.

The cosine is the retriever's own score: a dense retriever on L2-normalised vectors (``index:
flat_ip`` or ``hnsw``) scores by inner product, which is the cosine.  A BM25 retriever's score and a
``flat_l2`` index's negated squared distance are no cosine, and ragmi does not stand one in for it:
the defense declares ``needs_cosine_scores``, and the config's validation refuses such a target with
one ``ConfigError`` before any job runs (``ragmi.rag.index.cosine_scores``).  Each retrieved
document's score is read from the target's candidate pool (the retriever's scores, which no defense
changes), so a threshold placed after a defense that noises the released scores (DP-R) still
compares the true cosine; each kept document keeps the score it had.

Departure from the benchmark: it re-embeds the query and each retrieved text, unprefixed, and takes
the cosine of those vectors; ragmi takes the cosine of the vectors its index searched with, which
for an E5 embedder carry E5's ``query: `` / ``passage: `` prefixes (``ragmi.rag.index``).  The same
model, input length and no prefix give the same cosine up to float rounding.
docs/provenance.md#score_threshold
"""

from __future__ import annotations

from ._common import RETRIEVAL_DOWNSTREAM, CountingDefense


class ScoreThreshold(CountingDefense):
    kind = "score_threshold"
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    needs_cosine_scores = True  # the config refuses a target whose retriever's scores are no cosine
    source = (
        "Qi et al. 2026 (arXiv 2602.09319) Threshold defense; code rags/txt_rag.py TextRAG.retrieve "
        "(cosine >= --df_threshold, default 0.5, on the top k)"
    )
    chosen = {
        "cosine": "the retriever's score on L2-normalised dense vectors (flat_ip, hnsw); other retrievers refused",
        "score read": "each retrieved document's score in the target's candidate pool (the retriever's own)",
        "released scores": "each kept document keeps its score, in ragmi's order",
        "nothing passes": "empty context, as in the benchmark (counted in stats.empty_contexts)",
    }

    def on_retrieval(self, states, ctx):
        threshold = float(self.params["threshold"])
        for s in states:
            if s.pool_ids:
                if len(s.pool_ids) != len(s.pool_scores):
                    raise ValueError(
                        f"query {s.query_id}: {len(s.pool_ids)} candidate ids but {len(s.pool_scores)} scores"
                    )
                cosine = {d: float(x) for d, x in zip(s.pool_ids, s.pool_scores)}
            else:  # no pool filled (a state built by hand): the retrieved set's own scores
                cosine = {d: float(x) for d, x in zip(s.retrieved_ids, s.retrieval_scores)}
            missing = [d for d in s.retrieved_ids if d not in cosine]
            if missing:
                raise RuntimeError(
                    f"defense {self.name}: query {s.query_id} retrieved {missing[:3]} outside the retriever's "
                    "candidates, whose cosine is unknown"
                )
            if len(s.retrieval_scores) != len(s.retrieved_ids):
                raise ValueError(
                    f"query {s.query_id}: {len(s.retrieved_ids)} retrieved ids but {len(s.retrieval_scores)} scores"
                )
            keep = [i for i, d in enumerate(s.retrieved_ids) if cosine[d] >= threshold]
            dropped = len(s.retrieved_ids) - len(keep)
            s.retrieved_ids = [s.retrieved_ids[i] for i in keep]
            s.retrieval_scores = [float(s.retrieval_scores[i]) for i in keep]
            self.stats["queries"] += 1
            self.stats["documents_dropped"] += dropped
            if not keep:
                self.stats["empty_contexts"] += 1
