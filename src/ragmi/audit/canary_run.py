"""One seed of the canary experiment against one target (docs/provenance.md#canaries): the 50-document
canary knowledge base indexed with the target's own retriever, the target's template, generator and
defenses, the Ps query pool, and exact-match recovery — before and after the output hooks."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from ..rag.factory import TargetSpec, rag_system
from ..rag.index import RetrieverSpec, build_index
from .canaries import N_DOCS, CanaryExperiment


def base_documents(corpus: pd.DataFrame) -> pd.DataFrame:
    """The canary knowledge base's base documents: the corpus's first documents by doc_id."""
    return corpus.sort_values("doc_id", kind="stable")[["doc_id", "text", "title"]].head(N_DOCS)


def run_canary(spec: TargetSpec, corpus: pd.DataFrame, seed: int, max_tokens: int, workdir: str, log) -> dict:
    exp = CanaryExperiment.build(base_documents(corpus), seed, max_tokens)
    kb = exp.kb[["doc_id", "text", "title"]]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        index = Path(tmp) / "index"
        retriever = RetrieverSpec.from_config(spec.retriever_name, spec.retriever)
        build_index(kb, retriever, index, with_titles=bool(spec.target["with_titles"]), log=log)
        with rag_system(dataclasses.replace(spec, index_dir=str(index)), kb, log) as rag:
            q = exp.queries
            answers = rag.answer(
                q["user_prompt"].tolist(), q["max_tokens"].tolist(), q["top_logprobs"].tolist(), q["query_id"].tolist()
            )
    leaked = exp.leaked(a["response_text"] for a in answers)
    raw = exp.leaked(a["response_text_raw"] for a in answers)
    return {
        "target": spec.name,
        "seed": int(seed),
        "n_canaries": len(exp.canaries),
        "n_queries": len(q),
        "n_leaked": len(leaked),
        "leaked": sorted(leaked),
        "n_leaked_raw": len(raw),
        "leaked_raw": sorted(raw),
        "n_refused": int(sum(bool(a["refused"]) for a in answers)),
    }
