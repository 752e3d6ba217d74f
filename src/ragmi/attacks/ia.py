"""IA, the Interrogation Attack (Naseh et al., "Riddle Me This!").

``variant: "paper"`` (default):

1. ``prepare``: per candidate document a topic summary s* (:func:`ragmi.attacks.questions.summary_rows`),
   ``n_questions`` (default 30) yes/no probe questions p_i (:data:`QUESTION_PROMPT`), and the
   ground truth g_i of every question: the attacker LLM's answer given the full document
   (:data:`SHADOW_PROMPT_PAPER`).
2. ``build_queries``: ``summary_prefix + s* + " " + p_i + " " + answer_instruction``.
3. ``score``: ``(1/n) * sum_i [1(r_i = g_i) - lambda_idk * 1(r_i = IDK)]`` with answers parsed into
   yes / no / idk / other (:func:`ragmi.attacks.answers.parse_yes_no_idk`); "other" never counts as
   correct, and an IDK answer to an IDK ground truth scores 1 - lambda_idk.

``variant: "repo"`` (the authors' code): 15 questions by default, bare questions as queries, ground
truth from :data:`SHADOW_PROMPT_REPO` over the document text, both answers mapped to yes / no /
unknown (:func:`repo_label`), score = plain accuracy (unknown == unknown counts as correct).

``skip_idk_shadow`` drops questions whose ground truth is not a definite yes/no before querying;
``all_or_nothing`` gives documents with fewer than n parsed questions no queries (by default they
keep the questions they have).  Documents without queries get the lowest possible score
(paper: -lambda_idk, repo: 0) and ``no_queries = True``.  Variants: ``ia/{variant}`` and
``ia/{variant}/n={m}`` (the first m questions asked) for m in ``budgets`` with m <= n_questions.

Provenance: docs/provenance.md#ia.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .answers import parse_yes_no, parse_yes_no_idk
from .base import QUERY_COLUMNS, Attack, merge_responses
from .questions import (
    as_list,
    ask,
    budget_scores,
    candidate_docs,
    doc_rows,
    llm_row,
    materials_frame,
    parse_questions,
    question_row,
    summary_rows,
)
from .work import AttackWork

IA_EXAMPLE_TEXT = (
    "Dioxins invade the body mainly through the diet, and produce toxicity through the transformation of aryl "
    "hydrocarbon receptor (AhR). An inhibitor of the transformation should therefore protect against the toxicity "
    "and ideally be part of the diet. We examined flavonoids ubiquitously expressed in plant foods as one of the best "
    "candidates, and found that the subclasses flavones and flavonols suppressed antagonistically the transformation "
    "of AhR induced by 1 nM of 2,3,7,8-tetrachlorodibenzo-p-dioxin, without exhibiting agonistic effects that "
    "transform AhR. The antagonistic IC(50) values ranged from 0.14 to 10 microM, close to the physiological levels "
    "in human."
)
IA_EXAMPLE_QUESTIONS = (
    "Are flavones and flavonols shown to antagonistically suppress the transformation of AhR induced by dioxins?",
    "Do flavones and flavonols exhibit agonistic effects that transform the aryl hydrocarbon receptor?",
    "Are the antagonistic IC(50) values for flavones and flavonols between 0.14 and 10 microM?",
)

# IA Fig. 14 as reconstructed from the MEntA authors' IA prompt (docs/provenance.md#ia).
QUESTION_PROMPT = (
    "Main Text:\n"
    "Based on the following text corpus, generate a list of {n} specific, diverse yes/no questions as queries "
    "that could be used to retrieve information from this corpus. Note: If the text uses any abbreviations or "
    "acronyms, such as 'AhR' or 'IC(50)', use the same forms in your questions. Do not use the expanded version "
    "unless it is explicitly mentioned in the text. Here are a few examples of the type of questions we are "
    "looking for:\n\n"
    "Example Text:\n" + IA_EXAMPLE_TEXT + "\n\n"
    "Example Questions:\n" + "".join(f"{i}. {q}\n" for i, q in enumerate(IA_EXAMPLE_QUESTIONS, 1)) + "\n"
    "Now, based on the main corpus provided below, create questions that are specific, contain keywords from "
    "the text, and are diverse enough to cover different aspects or concepts discussed. Avoid mentioning "
    "'the study' or any references to the passage itself, and ensure that questions do not contain general "
    "phrases that could apply to any text.\n\n"
    "Here is the Corpus:\n{text}\n\n"
    "Generate {n} yes/no questions based on this text."
)

# IA Fig. 18, the ground-truth (shadow) prompt (one user message).
SHADOW_PROMPT_PAPER = (
    "You are a helpful assistant. Based solely on the provided contexts, generate a concise and accurate "
    "response to the question from the user. \n\nContexts: [context] \n\nQuestion: [question]? Answer only with "
    '"Yes," "No," or "I don\'t know". \n\nAnswer:'
)
# The authors' RAG prompt (IA Fig. 17), which their code also uses for the ground truth.
SHADOW_PROMPT_REPO = (
    "You are a helpful assistant, below is a query from a user and some relevant contexts. Answer the question "
    "given the information in those contexts. Your answer should be short and concise. If you cannot find the "
    'answer to the question, just say "I don\'t know". \n\nContexts: [context] \n\nQuery: [question] \n\nAnswer:'
)


def question_messages(n: int, text: str) -> list[dict]:
    return [{"role": "user", "content": QUESTION_PROMPT.format(n=n, text=text)}]


def shadow_messages(variant: str, question: str, title: str, text: str) -> list[dict]:
    if variant == "repo":
        # the authors' code passes the document text and the bare question
        prompt = SHADOW_PROMPT_REPO.replace("[question]", question).replace("[context]", str(text))
    else:
        # Fig. 18 appends "?" itself; the question's own "?" is removed to avoid "??"
        context = f"{title} {text}".strip() if title else str(text)
        prompt = SHADOW_PROMPT_PAPER.replace("[question]", question.rstrip().rstrip("?")).replace("[context]", context)
    return [{"role": "user", "content": prompt}]


def repo_label(text: str) -> str:
    """The authors' ``extract_yes_no``: first Yes/No word, else "unknown"."""
    v = parse_yes_no(text)
    return "unknown" if v is None else ("yes" if v == 1 else "no")


def answer_label(variant: str, text: str) -> str:
    return repo_label(text) if variant == "repo" else parse_yes_no_idk(text)


class IA(Attack):
    name = "ia"
    needs_prepare = True
    audit_mi_rank = 4

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What this attack sends per candidate (:mod:`ragmi.attacks.work`; ``tools/eta.py``)."""
        n = p["n_questions"] if p["n_questions"] is not None else (30 if p["variant"] == "paper" else 15)
        chars = 80 + (len(p["summary_prefix"]) + 250 + len(p["answer_instruction"]) if p["variant"] == "paper" else 0)
        # questions (one call writes all n), a summary, then the shadow model's answer to each question
        calls = 2 + n
        answer = (min(p["question_max_tokens"], 20 * n) + 0.8 * p["summary_max_tokens"] + n * 3) / calls
        return AttackWork(
            n, chars, min(p["max_tokens"], 4), p["max_tokens"], prepare=(calls, 300 + doc_chars, answer), rough=True
        )

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        if self.params["n_questions"] is None:
            self.params["n_questions"] = 30 if self.params["variant"] == "paper" else 15

    # -- 1. offline generation ---------------------------------------------------------------------
    def prepare(self, candidates: pd.DataFrame, tools) -> pd.DataFrame:
        p = self.params
        n, variant = int(p["n_questions"]), p["variant"]
        docs = candidate_docs(candidates)
        rows = []
        msgs = [question_messages(n, x) for _, _, x in docs]
        res = ask(tools, msgs, p["question_max_tokens"], p["question_temperature"])
        parsed = {}
        for (doc_id, _, _), m, r in zip(docs, msgs, res):
            qs, rule = parse_questions(r.get("text", ""), n, require_question_mark=True, exclude=IA_EXAMPLE_QUESTIONS)
            parsed[doc_id] = qs
            rows.append(question_row(doc_id, m, r, p, qs, rule, n))
        n_fallback = 0
        if variant == "paper":
            summaries, n_fallback = summary_rows(tools, docs, p["summary_max_tokens"], p["summary_temperature"])
            rows += summaries
        # ground truth: one shadow call per question, as the authors' code does
        jobs = [
            (doc_id, i, q, shadow_messages(variant, q, t, x))
            for doc_id, t, x in docs
            for i, q in enumerate(parsed[doc_id])
        ]
        res = ask(tools, [j[3] for j in jobs], p["shadow_max_tokens"], p["shadow_temperature"])
        n_other = 0
        for (doc_id, i, q, m), r in zip(jobs, res):
            label = answer_label(variant, r.get("text", ""))
            bad = label in ("other", "unknown")
            n_other += bad
            rows.append(
                llm_row(
                    doc_id,
                    "shadow",
                    i,
                    m,
                    r,
                    p["shadow_max_tokens"],
                    p["shadow_temperature"],
                    parsed=label,
                    parse_failed=bad,
                    question=q,
                )
            )
        if hasattr(tools, "log"):
            n_short = sum(len(v) < n for v in parsed.values())
            tools.log(
                f"ia/{variant}: {n_short}/{len(docs)} documents with fewer than {n} parsed questions; "
                f"{n_fallback} summaries replaced by the title/first sentence; "
                f"{n_other}/{len(jobs)} shadow answers without a Yes/No/IDK"
            )
        return materials_frame(rows, extra=["question"])

    # -- 2. queries --------------------------------------------------------------------------------
    def build_queries(self, candidates: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        p = self.params
        if materials is None:
            raise ValueError("ia builds its queries from the materials written by prepare()")
        n, variant = int(p["n_questions"]), p["variant"]
        qrows = doc_rows(materials, "questions")
        srows = doc_rows(materials, "summary") if variant == "paper" else {}
        shadow = materials[materials["kind"] == "shadow"]
        truth = {(d, int(i)): lab for d, i, lab in zip(shadow["doc_id"], shadow["item"], shadow["parsed"])}
        missing = [d for d in candidates["doc_id"] if d not in qrows or (variant == "paper" and d not in srows)]
        if missing:
            raise ValueError(f"ia materials lack documents {missing[:3]} (re-run prepare)")
        rows = []
        for doc_id in candidates["doc_id"]:
            qs = as_list(qrows[doc_id]["questions"])[:n]
            if p["all_or_nothing"] and len(qs) < n:
                qs = []
            prefix = ""
            if variant == "paper":
                s = str(srows[doc_id]["parsed"]).strip()
                s = s if s.endswith((".", "!", "?")) else s + "."
                prefix = f"{p['summary_prefix']}{s} "
            order = 0
            for i, q in enumerate(qs):
                if (doc_id, i) not in truth:
                    raise ValueError(f"ia materials lack the ground truth of question {i} of {doc_id}")
                g = truth[(doc_id, i)]
                if p["skip_idk_shadow"] and g not in ("yes", "no"):
                    continue
                text = prefix + q
                if variant == "paper" and p["answer_instruction"]:
                    text = f"{text} {p['answer_instruction']}"
                rows.append(
                    {
                        "query_id": f"{doc_id}::q{i}",
                        "doc_id": doc_id,
                        "user_prompt": text,
                        "max_tokens": int(p["max_tokens"]),
                        "top_logprobs": 0,
                        "ask_order": order,
                        "question": q,
                        "shadow": g,
                    }
                )
                order += 1
        return pd.DataFrame(
            rows,
            columns=[
                *QUERY_COLUMNS,
                "ask_order",
                "question",
                "shadow",
            ],
        )

    # -- 3. scores ---------------------------------------------------------------------------------
    def query_outcomes(self, queries: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
        p = self.params
        lam, variant = float(p["lambda_idk"]), p["variant"]
        df = merge_responses(queries, responses, ["response_text"])
        df["answer"] = [answer_label(variant, str(t)) for t in df["response_text"]]
        if variant == "repo":
            df["correct"] = df["answer"] == df["shadow"]  # unknown == unknown counts, as in the authors' code
            df["idk"] = False
            df["contribution"] = df["correct"].astype(float)
        else:
            df["correct"] = (df["answer"] == df["shadow"]) & (df["shadow"] != "other")
            df["idk"] = df["answer"] == "idk"
            df["contribution"] = df["correct"].astype(float) - lam * df["idk"].astype(float)
        return df

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        p = self.params
        if materials is None:
            raise ValueError("ia scores need the materials written by prepare() (parse counts)")
        n, variant = int(p["n_questions"]), p["variant"]
        lowest = 0.0 if variant == "repo" else -max(float(p["lambda_idk"]), 0.0)
        per_q = self.query_outcomes(queries, responses)
        return budget_scores(
            per_q,
            doc_rows(materials, "questions"),
            f"ia/{variant}",
            n,
            p["budgets"],
            lowest,
            {"n_correct": "correct", "n_idk": "idk"},
        )
