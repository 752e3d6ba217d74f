"""MEntA ("Five Queries Are Enough": entailment-based membership inference).

1. ``prepare``: per candidate document ``n_questions`` highly specific questions
   (:data:`QUESTION_SYSTEM`, :data:`QUESTION_USER`) and, with ``prepend_summary``, a topic summary
   (:func:`ragmi.attacks.questions.summary_rows`).
2. ``build_queries``: ``summary + " " + question`` (or the bare question).
3. ``score``: every answer is split into sentences (claims, :func:`ragmi.attacks.questions.split_text`
   with ``min_claim_length``); each claim is checked against the sentence units of the candidate
   document (:func:`document_units`).  The NLI premise is therefore one *sentence unit* of the
   document, as in the authors' code (``compute_entailment.py``), not the whole document D of the
   paper (§5.5: "premise D", a long-context NLI model "comparing atomic claims against full target
   documents"); the best-supporting unit counts.  Per query: IDK if any claim is an abstention, else hit = 1 if
   at least one claim is supported; a query without claims contributes 0.
   ``score = (1/n) * sum_q [hit_q - lambda_idk * idk_q]`` over the n queries asked.

Scorers (``scorer``):

* ``nli``: a claim is supported when, for the unit with the highest entailment probability
  (premise = unit, hypothesis = claim), entailment is the most probable class; a claim is IDK when it
  entails one of :data:`IDK_HYPOTHESES` with probability > ``nli_idk_threshold``.  Class columns come
  from the model's ``config.id2label`` (:class:`ragmi.attacks.models.NLIModel`).
* ``similarity`` (default; no NLI model is installed offline): cosine of sentence embeddings >=
  ``sim_threshold``, claim vs. each unit (``sim_unit: sentence``) or whole answer vs. whole document
  (``sim_unit: document``).  IDK: cosine to an IDK hypothesis >= ``sim_threshold``, or
  :data:`ragmi.attacks.answers.IDK_RE`.

``all_or_nothing: true`` gives documents with fewer than n parsed questions no queries (by default they
keep the questions they have); documents without queries get ``-lambda_idk`` and ``no_queries``.
Variants: ``menta/{scorer}`` and ``menta/{scorer}/n={m}`` (the first m questions asked) for m in
``budgets`` with m <= n_questions.

Provenance: docs/provenance.md#menta.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .answers import IDK_RE
from .base import QUERY_COLUMNS, Attack, merge_responses
from .models import EmbeddingCache, NLIModel, load_embedder, load_nli
from .questions import (
    as_list,
    ask,
    budget_scores,
    candidate_docs,
    doc_rows,
    materials_frame,
    parse_questions,
    question_row,
    split_text,
    summary_rows,
)
from .work import AttackWork

# MEntA authors' query-generation prompts ("specific" mode), verbatim.
QUESTION_SYSTEM = (
    "You are a helpful assistant that generates highly specific questions. Always output exactly {n} "
    "questions in the format: QUERY_1: [question], QUERY_2: [question], etc."
)
QUESTION_USER = """Given the document below, generate {n} highly specific questions that can be answered by this document.

DOCUMENT:
{candidate_document}

Requirements:
- Generate EXACTLY {n} different questions
- **CRITICAL: The set of questions must cover ALL different aspects/sections of the document.**
- **DISTRIBUTION: Do not focus all questions on a single fact. If the text has a beginning, middle, and end, or multiple distinct points, ensure the {n} questions are distributed across these different parts.**
- Each question should require specific information from the document
- Focus on unique details, specific facts, or specific combinations of information
- Make each query DIFFERENT by using different phrasing, focusing on different aspects, varying question structure
- DO NOT mention "the document", "the text", "this passage", or similar references
- DO NOT add meta-preambles like "Here is a question:", "Question:", or "Query:"
- If the text uses any abbreviations or acronyms, use the same forms in your questions
- Avoid mentioning 'the study' or any references to the passage itself

Output format (IMPORTANT - follow this EXACTLY):
QUERY_1: [first question here]
QUERY_2: [second question here]
QUERY_3: [third question here]
...

Generate {n} queries now:"""

# MEntA authors' IDK hypotheses, verbatim.
IDK_HYPOTHESES = (
    "I don't have enough information to answer this question",
    "The provided text does not contain the answer to this question",
    "I cannot determine the answer from the given information",
    "This information is not mentioned in the provided text",
    "I am unable to answer based on the available information",
    "There is no information provided about this",
    "The text does not specify this information",
)


def question_messages(n: int, title: str, text: str) -> list[dict]:
    doc = f"Title: {title or ''} Content: {text}"
    return [
        {"role": "system", "content": QUESTION_SYSTEM.format(n=n)},
        {"role": "user", "content": QUESTION_USER.format(n=n, candidate_document=doc)},
    ]


def document_text(title: str, text: str) -> str:
    """The premise text: ``"; ".join(f"{k}: {v}")`` over the non-empty fields (title, text)."""
    fields = [("title", title), ("text", text)]
    return "; ".join(f"{k}: {v}" for k, v in fields if not _missing(v) and str(v).strip()).strip()


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def document_units(title: str, text: str, min_length: int) -> list[str]:
    """Sentence units of a candidate document; the whole document when the splitter keeps nothing."""
    full = document_text(title, text)
    return split_text(full, min_length=min_length) or ([full] if full else [])


# --------------------------------------------------------------------------------------------------
# Claim checks
# --------------------------------------------------------------------------------------------------


def nli_claim_flags(nli: NLIModel, claims: list[str], units: list[list[str]], idk_threshold: float):
    """(entailed, idk) per claim; ``units[i]`` are the document units for ``claims[i]``."""
    entailed = np.zeros(len(claims), dtype=bool)
    idk = np.zeros(len(claims), dtype=bool)
    if not claims:
        return entailed, idk
    prem, hyp, owner = [], [], []
    for i, (c, us) in enumerate(zip(claims, units)):
        for u in us:
            prem.append(u)
            hyp.append(c)
            owner.append(i)
    pr = nli.probs(prem, hyp)
    owner = np.array(owner)
    for i in range(len(claims)):
        rows = pr[owner == i]
        if len(rows):
            best = rows[int(np.argmax(rows[:, nli.ent]))]  # the unit with the highest p(ent)
            entailed[i] = bool(nli.is_entailed(best[None, :])[0])
    k = len(IDK_HYPOTHESES)
    ipr = nli.probs([c for c in claims for _ in IDK_HYPOTHESES], [h for _ in claims for h in IDK_HYPOTHESES])
    idk = (ipr[:, nli.ent].reshape(len(claims), k) > idk_threshold).any(axis=1)
    return entailed, idk


def similarity_claim_flags(emb: EmbeddingCache, claims: list[str], units: list[list[str]], threshold: float):
    """(similar, idk) per claim: max cosine to a document unit >= threshold; IDK by cosine to an IDK
    hypothesis >= threshold or by :data:`IDK_RE`."""
    similar = np.zeros(len(claims), dtype=bool)
    if not claims:
        return similar, np.zeros(0, dtype=bool)
    c = emb.encode(claims)
    for i, us in enumerate(units):
        if us:
            similar[i] = bool((emb.encode(us) @ c[i]).max() >= threshold)
    h = emb.encode(list(IDK_HYPOTHESES))
    idk = (c @ h.T).max(axis=1) >= threshold
    idk |= np.array([IDK_RE.search(x) is not None for x in claims])
    return similar, idk


# --------------------------------------------------------------------------------------------------
# Attack
# --------------------------------------------------------------------------------------------------

# The claim scorers attacks.menta.scorer may name (the schema's enum must match; tests/test_registries.py).
SCORERS = ("similarity", "nli")


class MEntA(Attack):
    name = "menta"
    needs_prepare = True
    audit_mi_rank = 3

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What this attack sends per candidate (:mod:`ragmi.attacks.work`; ``tools/eta.py``)."""
        n = int(p["n_questions"])
        chars = 80 + (250 if p["prepend_summary"] else 0)
        answer = (min(p["question_max_tokens"], 20 * n) + 0.8 * p["summary_max_tokens"]) / 2
        return AttackWork(
            n, chars, 0.6 * p["max_tokens"], p["max_tokens"], prepare=(2, 300 + doc_chars, answer), rough=True
        )

    @classmethod
    def model_references(cls, params):
        return [("nli_model", "model")] if params["scorer"] == "nli" else [("embedder", "embedder")]

    # -- 1. offline generation ---------------------------------------------------------------------
    def prepare(self, candidates: pd.DataFrame, tools) -> pd.DataFrame:
        p = self.params
        n = int(p["n_questions"])
        docs = candidate_docs(candidates)
        rows = []
        msgs = [question_messages(n, t, x) for _, t, x in docs]
        res = ask(tools, msgs, p["question_max_tokens"], p["question_temperature"])
        n_short = 0
        for (doc_id, title, text), m, r in zip(docs, msgs, res):
            qs, rule = parse_questions(r.get("text", ""), n)
            n_short += len(qs) < n
            rows.append(question_row(doc_id, m, r, p, qs, rule, n, doc_title=str(title), doc_text=str(text)))
        n_fallback = 0
        if p["prepend_summary"]:
            summaries, n_fallback = summary_rows(tools, docs, p["summary_max_tokens"], p["summary_temperature"])
            rows += summaries
        if hasattr(tools, "log"):
            tools.log(
                f"menta: {n_short}/{len(docs)} documents with fewer than {n} parsed questions; "
                f"{n_fallback} summaries replaced by the title/first sentence"
            )
        return materials_frame(rows, extra=["doc_title", "doc_text"])

    # -- 2. queries --------------------------------------------------------------------------------
    def build_queries(self, candidates: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        p = self.params
        if materials is None:
            raise ValueError("menta builds its queries from the materials written by prepare()")
        n = int(p["n_questions"])
        qrows = doc_rows(materials, "questions")
        srows = doc_rows(materials, "summary") if p["prepend_summary"] else {}
        missing = [d for d in candidates["doc_id"] if d not in qrows or (p["prepend_summary"] and d not in srows)]
        if missing:
            raise ValueError(f"menta materials lack documents {missing[:3]} (re-run prepare)")
        rows = []
        for doc_id in candidates["doc_id"]:
            qs = as_list(qrows[doc_id]["questions"])[:n]
            if p["all_or_nothing"] and len(qs) < n:
                qs = []  # the authors' rule: a document keeps its questions only if all n were parsed
            summary = str(srows[doc_id]["parsed"]).strip() if p["prepend_summary"] else ""
            for i, q in enumerate(qs):
                rows.append(
                    {
                        "query_id": f"{doc_id}::q{i}",
                        "doc_id": doc_id,
                        "user_prompt": f"{summary} {q}" if summary else q,  # MEntA §5.3: concat(S_D, q_i)
                        "max_tokens": int(p["max_tokens"]),
                        "top_logprobs": 0,
                        "ask_order": i,
                        "question": q,
                        "summary_prepended": bool(summary),
                    }
                )
        return pd.DataFrame(
            rows,
            columns=[
                *QUERY_COLUMNS,
                "ask_order",
                "question",
                "summary_prepended",
            ],
        )

    # -- 3. scores ---------------------------------------------------------------------------------
    def query_outcomes(
        self, queries: pd.DataFrame, responses: pd.DataFrame, materials: pd.DataFrame, tools=None
    ) -> pd.DataFrame:
        """Per query: ``n_claims``, ``hit`` (a supported claim), ``idk`` and ``contribution``."""
        p = self.params
        lam = float(p["lambda_idk"])
        df = merge_responses(queries, responses, ["response_text"])
        qrows = doc_rows(materials, "questions")
        unit_cache = {
            d: document_units(r.get("doc_title", ""), r.get("doc_text", ""), int(p["min_claim_length"]))
            for d, r in qrows.items()
        }
        claims_per_q = [split_text(str(a), min_length=int(p["min_claim_length"])) for a in df["response_text"]]
        flat = [c for cs in claims_per_q for c in cs]
        flat_units = [unit_cache[d] for d, cs in zip(df["doc_id"], claims_per_q) for _ in cs]
        if p["scorer"] == "nli":
            name = str(p["nli_model"])
            path = tools.local_model_path(name) if tools is not None and hasattr(tools, "local_model_path") else name
            nli = load_nli(path, int(p["nli_batch_size"]), int(p["nli_max_length"]), name=name)
            support, idk = nli_claim_flags(nli, flat, flat_units, float(p["nli_idk_threshold"]))
        else:
            emb = load_embedder(str(p["embedder"]))
            support, idk = similarity_claim_flags(emb, flat, flat_units, float(p["sim_threshold"]))
        out, k = [], 0
        for j, cs in enumerate(claims_per_q):
            s, d = support[k : k + len(cs)], idk[k : k + len(cs)]
            k += len(cs)
            q_idk = bool(d.any())
            if p["scorer"] == "similarity" and p["sim_unit"] == "document":
                doc_id = df["doc_id"].iat[j]
                r = qrows[doc_id]
                answer = " ".join(str(df["response_text"].iat[j]).split())
                full = document_text(r.get("doc_title", ""), r.get("doc_text", ""))
                hit = bool(cs) and float(emb.encode([answer])[0] @ emb.encode([full])[0]) >= float(p["sim_threshold"])
            else:
                hit = bool(s.any())
            hit = hit and not q_idk  # an IDK query contributes -lambda, its hit is forced to 0
            out.append({"n_claims": len(cs), "hit": hit, "idk": q_idk, "contribution": -lam if q_idk else float(hit)})
        return pd.concat([df.reset_index(drop=True), pd.DataFrame(out, index=range(len(df)))], axis=1)

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        p = self.params
        if materials is None:
            raise ValueError("menta scores need the materials written by prepare() (document text, parse counts)")
        n = int(p["n_questions"])
        lam = float(p["lambda_idk"])
        per_q = self.query_outcomes(queries, responses, materials, tools)
        # no query asked -> the lowest score MEntA can give (every query IDK)
        return budget_scores(
            per_q,
            doc_rows(materials, "questions"),
            f"menta/{p['scorer']}",
            n,
            p["budgets"],
            -lam,
            {"n_hits": "hit", "n_idk": "idk"},
        )
