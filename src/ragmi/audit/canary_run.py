"""One seed of the canary experiment against one target (docs/provenance.md#canaries): the 50-document
canary knowledge base indexed with the target's own retriever, the target's template, generator and
defenses, the Ps query pool, and exact-match recovery — before and after the output hooks.

A remote target with a store (docs/vector-stores.md) is the user's service: its knowledge base is the
user's collection, into which the membership game planted the canary documents of this seed
(:func:`store_canary_experiment`, rule store_insert); :func:`run_canary_remote` sends the same query pool
to the service and counts what its answers recover."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pandas as pd

from ..errors import DataError
from ..rag.factory import TargetSpec, rag_system
from ..rag.index import RetrieverSpec, build_index
from .canaries import N_DOCS, CanaryExperiment


def base_documents(corpus: pd.DataFrame) -> pd.DataFrame:
    """The canary knowledge base's base documents: the corpus's first documents by doc_id."""
    return corpus.sort_values("doc_id", kind="stable")[["doc_id", "text", "title"]].head(N_DOCS)


def store_base_documents(corpus: pd.DataFrame, exclude) -> pd.DataFrame:
    """The base documents of the canaries planted in a store: the canary dataset's first documents by
    doc_id that are not in ``exclude`` (the members and candidates of the store target's split when the
    canary dataset is its dataset: a canary copy of a non-member candidate in the collection would make
    it retrievable, one of a member would stand beside the member)."""
    ex = {str(d) for d in exclude}
    rest = corpus[~corpus["doc_id"].astype(str).isin(ex)]
    if len(rest) < N_DOCS:
        raise DataError(
            f"the canaries planted in a store need {N_DOCS} documents of the canary dataset that are neither "
            f"members nor candidates of the target's split; it has {len(rest)} (of {len(corpus)}): set "
            "audit.canary_dataset to another dataset, or a larger one"
        )
    return base_documents(rest)


def canary_exclude(smk) -> list[str]:
    """The doc ids a store target's canaries must not be built from: those of the job's input files
    ``canary_exclude`` (the split's members and candidates, given when the canary dataset is the
    target's; rules/stores.smk and rules/audit.smk name the same files)."""
    if "canary_exclude" not in smk.input.keys():
        return []
    files = smk.input.canary_exclude
    return [str(d) for f in ([files] if isinstance(files, str) else files) for d in pd.read_parquet(f)["doc_id"]]


def store_canary_experiment(corpus: pd.DataFrame, exclude, seed: int, max_tokens: int) -> CanaryExperiment:
    """The canary experiment of a store target (the same for the insert and for the queries)."""
    return CanaryExperiment.build(store_base_documents(corpus, exclude), seed, max_tokens)


def _result(name: str, seed: int, exp: CanaryExperiment, answers: list[dict]) -> dict:
    leaked = exp.leaked(a["response_text"] for a in answers)
    raw = exp.leaked(a["response_text_raw"] for a in answers)
    return {
        "target": name,
        "seed": int(seed),
        "n_canaries": len(exp.canaries),
        "n_queries": len(exp.queries),
        "n_leaked": len(leaked),
        "leaked": sorted(leaked),
        "n_leaked_raw": len(raw),
        "leaked_raw": sorted(raw),
        "n_refused": int(sum(bool(a["refused"]) for a in answers)),
    }


def _ask(rag, q: pd.DataFrame) -> list[dict]:
    return rag.answer(
        q["user_prompt"].tolist(), q["max_tokens"].tolist(), q["top_logprobs"].tolist(), q["query_id"].tolist()
    )


def run_canary_remote(spec: TargetSpec, exp: CanaryExperiment, log) -> dict:
    """The query pool of ``exp`` sent to a remote target whose store holds the canaries."""
    from ..rag.remote import remote_target

    # with remote.sources_path its sources are matched to the canary documents (read by no count here)
    with remote_target(spec, log, exp.kb[["doc_id", "text", "title"]]) as rag:
        answers = _ask(rag, exp.queries)
    return _result(spec.name, exp.seed, exp, answers)


def run_canary(spec: TargetSpec, corpus: pd.DataFrame, seed: int, max_tokens: int, workdir: str, log) -> dict:
    exp = CanaryExperiment.build(base_documents(corpus), seed, max_tokens)
    kb = exp.kb[["doc_id", "text", "title"]]
    Path(workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        index = Path(tmp) / "index"
        retriever = RetrieverSpec.from_validated(spec.retriever)
        build_index(kb, retriever, index, with_titles=bool(spec.target["with_titles"]), log=log)
        with rag_system(dataclasses.replace(spec, index_dir=str(index)), kb, log) as rag:
            answers = _ask(rag, exp.queries)
    return _result(spec.name, seed, exp, answers)
