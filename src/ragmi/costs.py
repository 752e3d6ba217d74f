"""What an attack spends per candidate document, and the cost columns the tables show.

A *candidate* is a document whose membership the attacker tests; the *target* is the RAG system that
answers the queries.  Every cost is averaged over all candidates of the split (reference and
evaluation, members and non-members): a candidate for which no query was sent (e.g. the attacker LLM
wrote no usable question) counts with zero cost.

This module is the one place where the cost columns are named: :func:`costs_by_variant` writes
them into the metrics CSVs and :data:`COST_LABELS` gives their table headers, in table order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

QUERIES = "queries_per_candidate"
PROMPT_TOKENS = "prompt_tokens_per_candidate"
OUTPUT_TOKENS = "output_tokens_per_candidate"
ATTACKER_LLM_TOKENS = "attacker_llm_tokens_per_candidate"
CANDIDATE_RETRIEVED = "candidate_retrieved_rate"
NO_ANSWER = "no_answer_rate"
NO_YES_NO = "no_yes_no_rate"
PREPARE_FAILURE = "prepare_failure_rate"
TRUNCATED = "truncated_query_rate"

# The cost columns a table shows (when the metrics have them), in this order, with their headers.
# prepare_failure_rate is not shown as a column: it feeds the comparison table's note.
COST_LABELS = {
    QUERIES: "queries/candidate",
    PROMPT_TOKENS: "prompt tokens/candidate",
    OUTPUT_TOKENS: "output tokens/candidate",
    ATTACKER_LLM_TOKENS: "attacker-LLM tokens/candidate",
    CANDIDATE_RETRIEVED: "candidate retrieved",
    NO_ANSWER: "no answer",
    NO_YES_NO: "no Yes/No in top-K",
    TRUNCATED: "queries cut to fit",
}
COST_COLUMNS = tuple(COST_LABELS)

# Variant names (set by the attack modules): "<base>/n=<m>" reads the first m questions asked per
# candidate (query budget), "<base>/t<k>" the queries of template k; other variants read every query.
BUDGET_VARIANT = re.compile(r"^(?P<base>.+)/n=(?P<n>\d+)$")
TEMPLATE_VARIANT = re.compile(r"/t(?P<t>\d+)$")


def variant_queries(queries: pd.DataFrame, variant: str) -> pd.DataFrame:
    """The queries a variant reads: for a budget variant ``…/n=m`` the first m questions asked per
    document (column ``ask_order``), for a per-template variant ``…/t<k>`` that template's queries,
    and for queries that name their variant (column ``variant``) that variant's rows."""
    if "variant" in queries.columns and (queries["variant"] == variant).any():
        return queries[queries["variant"] == variant]
    m = BUDGET_VARIANT.match(variant)
    if m is not None and "ask_order" in queries.columns:
        return queries[queries["ask_order"] < int(m.group("n"))]
    t = TEMPLATE_VARIANT.search(variant)
    if t is not None and "template" in queries.columns:
        return queries[queries["template"] == int(t.group("t"))]
    return queries


def query_costs(queries: pd.DataFrame, responses: pd.DataFrame, labels: Mapping[str, int]) -> dict:
    """Mean queries and tokens sent to the target per candidate, and how often a member candidate's
    own document was retrieved for its queries (RAG-MIA Appendix B).

    ``queries`` has ``query_id`` and ``doc_id`` (the candidate a query tests); ``responses`` has
    ``query_id``, ``prompt_tokens``, ``completion_tokens`` and ``retrieved_ids``; responses to other
    queries are ignored.  ``labels`` maps every candidate's ``doc_id`` to 1 (member) or 0.

    Where any response of ``responses`` had retrieved documents cut to fit the generator's context
    (``n_docs_truncated`` > 0, ``ragmi.rag.fit``), the share of the queries that were cut is added
    (``truncated_query_rate``); where none was, the column is left out, so tables of runs whose
    prompts all fit keep their columns.
    """
    df = queries[["query_id", "doc_id"]].merge(responses, on="query_id", how="inner", validate="one_to_one")
    per_doc = df.groupby("doc_id").agg(
        q=("query_id", "size"), pt=("prompt_tokens", "sum"), ot=("completion_tokens", "sum")
    )
    n_candidates = len(labels)
    member_rows = df[df["doc_id"].map(labels) == 1]
    # a remote target's retrieved ids are unknown (None): no retrieval rate
    hit = [
        d in set(r) for d, r in zip(member_rows["doc_id"], member_rows["retrieved_ids"], strict=True) if r is not None
    ]
    return {
        QUERIES: float(per_doc["q"].sum() / n_candidates),
        PROMPT_TOKENS: float(per_doc["pt"].sum() / n_candidates),
        OUTPUT_TOKENS: float(per_doc["ot"].sum() / n_candidates),
        CANDIDATE_RETRIEVED: float(np.mean(hit)) if hit else float("nan"),
        **truncated_rate(df, responses),
    }


def truncated_rate(rows: pd.DataFrame, responses: pd.DataFrame) -> dict:
    """``{truncated_query_rate: share of rows cut}`` when some response was cut, else ``{}``."""
    if "n_docs_truncated" not in responses:
        return {}
    if not (pd.to_numeric(responses["n_docs_truncated"], errors="coerce") > 0).any():
        return {}
    cut = pd.to_numeric(rows["n_docs_truncated"], errors="coerce")
    return {TRUNCATED: float((cut > 0).mean()) if len(cut) else 0.0}


def offline_costs(materials: pd.DataFrame | None, n_candidates: int) -> dict:
    """Attacker-LLM tokens spent per candidate in offline query generation, and the share of
    candidates for which that generation failed (``parse_failed``, else ``llm_failure``)."""
    if materials is None or materials.empty:
        return {}
    out = {}
    tok = [c for c in ("llm_prompt_tokens", "llm_completion_tokens") if c in materials]
    if tok:
        out[ATTACKER_LLM_TOKENS] = float(materials[tok].fillna(0).to_numpy().sum() / n_candidates)
    for col in ("parse_failed", "llm_failure"):
        if col in materials:
            failed = materials.groupby("doc_id")[col].apply(lambda s: bool(s.fillna(False).astype(bool).any()))
            out[PREPARE_FAILURE] = float(failed.sum() / n_candidates)
            break
    return out


def no_answer_rate(variant_scores: pd.DataFrame) -> dict:
    """Share of evaluation answers of one variant with neither Yes nor No (column ``no_answer``)."""
    if "no_answer" not in variant_scores:
        return {}
    ev = variant_scores.loc[variant_scores["role"] == "eval", "no_answer"]
    return {NO_ANSWER: float(ev.astype(float).mean())}


def _as_float(values: pd.Series) -> np.ndarray:
    """Booleans with missing values (None, NA, NaN) as 1.0 / 0.0 / NaN."""
    return np.array([np.nan if v is None or v is pd.NA or v != v else float(v) for v in values], dtype=float)


def no_yes_no_rate(variant_scores: pd.DataFrame) -> dict:
    """Share of evaluation answers of one variant that have no Yes or No among the top-K tokens of any
    generated position (column ``no_yes_no``): there the gray-box attacks read P(Yes) and P(No) at
    the floor of token 0.  Empty for a variant that reads no log-probabilities (all missing)."""
    if "no_yes_no" not in variant_scores:
        return {}
    ev = _as_float(variant_scores.loc[variant_scores["role"] == "eval", "no_yes_no"])
    if np.isnan(ev).all():
        return {}
    return {NO_YES_NO: float(np.nanmean(ev))}


def costs_by_variant(
    scores: pd.DataFrame,
    queries: pd.DataFrame,
    responses: pd.DataFrame,
    materials: pd.DataFrame | None,
    labels: Mapping[str, int],
) -> dict[str, dict[str, float]]:
    """The cost columns of every variant in ``scores`` (which carries ``variant`` and ``role``).

    A variant's query costs count only the queries it reads (:func:`variant_queries`: the first n
    questions of a budget variant, one template's queries); offline costs are shared by all
    variants of the attack.  Keys are in the order the metrics CSV lists them.
    """
    offline = offline_costs(materials, len(labels))
    return {
        v: {
            **query_costs(variant_queries(queries, v), responses, labels),
            **no_answer_rate(g),
            **no_yes_no_rate(g),
            **offline,
        }
        for v, g in scores.groupby("variant")
    }


def query_retrieval(queries: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
    """Per answered query whether its candidate's own document was retrieved: ``query_id``, ``doc_id``,
    ``candidate_retrieved`` (True / False; NA where the response's ``retrieved_ids`` are unknown: a
    remote target without ``sources_path``, a python target that returns no ids)."""
    df = queries[["query_id", "doc_id"]].merge(
        responses[["query_id", "retrieved_ids"]], on="query_id", how="inner", validate="one_to_one"
    )
    flags = [
        pd.NA if r is None or (isinstance(r, float) and r != r) else str(d) in {str(x) for x in r}
        for d, r in zip(df["doc_id"], df["retrieved_ids"], strict=True)
    ]
    return pd.DataFrame(
        {
            "query_id": df["query_id"].astype(str),
            "doc_id": df["doc_id"].astype(str),
            "candidate_retrieved": pd.array(flags, dtype="boolean"),
        }
    )


def retrieved_by_variant(scores: pd.DataFrame, queries: pd.DataFrame, flags: pd.DataFrame) -> dict:
    """``{variant: {doc_id: retrieved}}``: a candidate is retrieved for a variant when its own
    document was retrieved for at least one of the queries the variant reads (:func:`variant_queries`);
    ``None`` for a variant none of whose queries' retrieved ids are known."""
    out: dict = {}
    for v in sorted(scores["variant"].astype(str).unique()):
        ids = set(variant_queries(queries, v)["query_id"].astype(str))
        f = flags[flags["query_id"].isin(ids)]
        known = f[f["candidate_retrieved"].notna()]
        if known.empty:
            out[v] = None
            continue
        out[v] = {str(d): bool(g.any()) for d, g in known.groupby("doc_id")["candidate_retrieved"]}
    return out
