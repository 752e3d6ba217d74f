"""IA, the Interrogation Attack ("Riddle Me This!", Naseh et al., CCS 2025, arXiv 2502.00306).

The paper PDF is not stored; sources are the authors' repository ``ali7naseh/RAG_MIA`` (read in the
index) and third-party extractions of the paper, summarised in
``shared/reference/attacks-rag-mia-s2mia-mba-ia-flashrag.md`` §4 (cited "notes §4").

``variant: "paper"`` (default), the algorithm of the paper (§5.1-5.3 as extracted):

1. a retrieval summary s* per document with the summary prompt (Fig. 16),
2. ``n_questions`` (paper: 30) yes/no probe questions p_i from one few-shot prompt (Fig. 14).  The
   paper's exact wording is not stored; :data:`QUESTION_PROMPT` is the notes' reconstruction, whose
   full text (with the worked dioxin/AhR example) is taken from the MEntA artifact's
   ``IA-MIA/generate_queries.py`` with its "along with their answer" clauses removed, since in the
   paper the answers come from the shadow model,
3. ``q_i = s* + " " + p_i``; the paper's Table 4 example reads "I want to ask about <summary>.
   <question> Please answer with 'Yes,' 'No,' or 'I don't know'" (notes §4 item 3), so the query is
   ``summary_prefix + summary(.) + " " + question + " " + answer_instruction`` with those two strings
   as defaults (set both to "" for the bare ``s* + " " + p_i``),
4. a shadow LLM (here: the attacker LLM) answers every p_i given the *full* document with the
   ground-truth prompt (Fig. 18) -> g_i,
5. ``score(d) = (1/n) * sum_i [1(r_i = g_i) - lambda * 1(r_i = IDK)]`` with r_i, g_i parsed into
   Yes / No / IDK (:func:`ragmi.attacks.questions.parse_yes_no_idk`; word boundaries) and
   lambda = ``lambda_idk`` = 5: notes §2 ("IA score (3P from the paper) ... with lambda=5 and n=30")
   and a 3rd-party extraction ("lambda must be > 1; AUC rises from 0.938 at lambda=0 to 0.954 at
   lambda=7") -- third-hand, not read in the PDF.  An answer that is none of Yes/No/IDK ("other")
   never counts as correct, not even against an "other" ground truth.  The formula is applied
   literally: an IDK answer to a question whose ground truth is IDK scores 1 - lambda.
   The threshold (on non-member reference scores) is the generic metrics' job.

``variant: "repo"``, what the authors' code does (``mia_utils/mia.py``): 15 questions, bare questions
as queries (no summary, no instruction), ground truth from the repo's RAG prompt (``MULTIPLE_PROMPT``)
over the document text (temperature 0.1, 50 tokens), both answers mapped with ``\\b(Yes|No)\\b``
(first match) else "Unknown", and the score is plain accuracy, where Unknown == Unknown counts as
correct.

Options: ``skip_idk_shadow: true`` drops questions whose ground truth is not a definite Yes/No before
querying (the MEntA reproduction's IA scorer, notes §5: "skips questions whose ground truth is IDK");
the default keeps them, as the paper's formula does.  ``all_or_nothing: true`` gives documents with
fewer than n parsed questions no queries; by default they keep the questions they have (the 135M
attacker LLM often writes fewer).  Documents without queries get the lowest possible score
(paper: -lambda, repo: 0) and ``no_queries = True``.

Variants: ``ia/{variant}`` (all questions asked) and ``ia/{variant}/n={m}`` for m in ``budgets``
(default [1, 3, 5, 10, 30]) with m <= n_questions, on the first m questions asked (the paper's
n-ablation, Fig. 5).  Answers are capped at ``max_tokens`` = 5 (the repository's RAG output cap).
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from ..errors import ConfigError
from .base import Attack
from .questions import (
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
    parse_yes_no_idk,
    summary_messages,
)
from .rag_mia import parse_yes_no

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

# Fig. 14 as reconstructed in notes §4, full text after the MEntA artifact's IA-MIA prompt (see above).
QUESTION_PROMPT = (
    "Main Text:\n"
    "Based on the following text corpus, generate a list of {n} specific, diverse yes/no questions as queries "
    "that could be used to retrieve information from this corpus. Note: If the text uses any abbreviations or "
    "acronyms, such as 'AhR' or 'IC(50)', use the same forms in your questions. Do not use the expanded version "
    "unless it is explicitly mentioned in the text. Here are a few examples of the type of questions we are "
    "looking for:\n\n"
    "Example Text:\n" + IA_EXAMPLE_TEXT + "\n\n"
    "Example Questions:\n"
    + "".join(f"{i}. {q}\n" for i, q in enumerate(IA_EXAMPLE_QUESTIONS, 1)) + "\n"
    "Now, based on the main corpus provided below, create questions that are specific, contain keywords from "
    "the text, and are diverse enough to cover different aspects or concepts discussed. Avoid mentioning "
    "'the study' or any references to the passage itself, and ensure that questions do not contain general "
    "phrases that could apply to any text.\n\n"
    "Here is the Corpus:\n{text}\n\n"
    "Generate {n} yes/no questions based on this text."
)

# Fig. 18, the ground-truth (shadow) prompt, verbatim from notes §4 (one user message).
SHADOW_PROMPT_PAPER = (
    "You are a helpful assistant. Based solely on the provided contexts, generate a concise and accurate "
    "response to the question from the user. \n\nContexts: [context] \n\nQuestion: [question]? Answer only with "
    "\"Yes,\" \"No,\" or \"I don't know\". \n\nAnswer:"
)
# ali7naseh/RAG_MIA src/prompts.py MULTIPLE_PROMPT (= Fig. 17), used by the repo for ground truth too.
SHADOW_PROMPT_REPO = (
    "You are a helpful assistant, below is a query from a user and some relevant contexts. Answer the question "
    "given the information in those contexts. Your answer should be short and concise. If you cannot find the "
    "answer to the question, just say \"I don't know\". \n\nContexts: [context] \n\nQuery: [question] \n\nAnswer:"
)

DEFAULTS = {
    "variant": "paper",
    "n_questions": None,  # paper: 30, repo: 15
    "lambda_idk": 5.0,
    "budgets": [1, 3, 5, 10, 30],
    "max_tokens": 5,
    "question_temperature": 0.2,  # MEntA artifact IA-MIA/generate_queries.py
    "question_max_tokens": 1000,  # idem
    "summary_temperature": 0.3,
    "summary_max_tokens": 64,
    "shadow_temperature": 0.1,  # ali7naseh/RAG_MIA: gpt-4o-mini, temperature 0.1, max_tokens 50
    "shadow_max_tokens": 50,
    "summary_prefix": "I want to ask about ",
    "answer_instruction": "Please answer with 'Yes,' 'No,' or 'I don't know'",
    "skip_idk_shadow": False,
    "all_or_nothing": False,
}


def question_messages(n: int, text: str) -> list[dict]:
    return [{"role": "user", "content": QUESTION_PROMPT.format(n=n, text=text)}]


def shadow_messages(variant: str, question: str, title: str, text: str) -> list[dict]:
    if variant == "repo":
        # the repo passes the document text and the bare question (wrap_prompt(question, [text], 4))
        prompt = SHADOW_PROMPT_REPO.replace("[question]", question).replace("[context]", str(text))
    else:
        # Fig. 18 appends "?" itself; the question's own "?" is removed to avoid "??"
        context = f"{title} {text}".strip() if title else str(text)
        prompt = SHADOW_PROMPT_PAPER.replace("[question]", question.rstrip().rstrip("?")).replace("[context]", context)
    return [{"role": "user", "content": prompt}]


def repo_label(text: str) -> str:
    """The repository's ``extract_yes_no``: first ``\\b(Yes|No)\\b``, else "Unknown"."""
    v = parse_yes_no(text)
    return "unknown" if v is None else ("yes" if v == 1 else "no")


def answer_label(variant: str, text: str) -> str:
    return repo_label(text) if variant == "repo" else parse_yes_no_idk(text)


class IA(Attack):
    name = "ia"
    needs_prepare = True

    def _p(self) -> dict:
        p = {**DEFAULTS, **self.params}
        if p["variant"] not in ("paper", "repo"):
            raise ConfigError(f"attacks.ia.variant must be 'paper' or 'repo', got {p['variant']!r}")
        if p["n_questions"] is None:
            p["n_questions"] = 30 if p["variant"] == "paper" else 15
        if int(p["n_questions"]) < 1:
            raise ConfigError("attacks.ia.n_questions must be at least 1")
        return p

    # -- 1. offline generation ---------------------------------------------------------------------
    def prepare(self, targets: pd.DataFrame, tools) -> pd.DataFrame:
        p = self._p()
        n, variant = int(p["n_questions"]), p["variant"]
        titles = targets["title"].fillna("") if "title" in targets else pd.Series([""] * len(targets))
        docs = list(zip(targets["doc_id"], titles, targets["text"]))
        rows = []
        msgs = [question_messages(n, x) for _, _, x in docs]
        res = ask(tools, msgs, p["question_max_tokens"], p["question_temperature"])
        parsed = {}
        for (doc_id, _, _), m, r in zip(docs, msgs, res):
            qs, rule = parse_questions(r.get("text", ""), n, require_question_mark=True, exclude=IA_EXAMPLE_QUESTIONS)
            parsed[doc_id] = qs
            rows.append(llm_row(doc_id, "questions", -1, m, r, p["question_max_tokens"], p["question_temperature"],
                                parsed=rule, questions=qs, n_questions_parsed=len(qs), parse_failed=len(qs) < n))
        n_fallback = 0
        if variant == "paper":
            msgs = [summary_messages(t, x) for _, t, x in docs]
            res = ask(tools, msgs, p["summary_max_tokens"], p["summary_temperature"])
            for (doc_id, title, text), m, r in zip(docs, msgs, res):
                s = parse_summary(r.get("text", ""), document=f"{title} {text}")
                n_fallback += s is None
                rows.append(llm_row(doc_id, "summary", -1, m, r, p["summary_max_tokens"], p["summary_temperature"],
                                    parsed=s if s is not None else fallback_summary(title, text),
                                    parse_failed=s is None))
        # ground truth: one shadow call per question, as the repository does
        jobs = [(doc_id, i, q, shadow_messages(variant, q, t, x))
                for doc_id, t, x in docs for i, q in enumerate(parsed[doc_id])]
        res = ask(tools, [j[3] for j in jobs], p["shadow_max_tokens"], p["shadow_temperature"])
        n_other = 0
        for (doc_id, i, q, m), r in zip(jobs, res):
            label = answer_label(variant, r.get("text", ""))
            bad = label in ("other", "unknown")
            n_other += bad
            rows.append(llm_row(doc_id, "shadow", i, m, r, p["shadow_max_tokens"], p["shadow_temperature"],
                                parsed=label, parse_failed=bad, question=q))
        if hasattr(tools, "log"):
            n_short = sum(len(v) < n for v in parsed.values())
            tools.log(f"ia/{variant}: {n_short}/{len(docs)} documents with fewer than {n} parsed questions; "
                      f"{n_fallback} summaries replaced by the title/first sentence; "
                      f"{n_other}/{len(jobs)} shadow answers without a Yes/No/IDK")
        return materials_frame(rows, extra=["question"])

    # -- 2. queries --------------------------------------------------------------------------------
    def build_queries(self, targets: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        p = self._p()
        if materials is None:
            raise ValueError("ia builds its queries from the materials written by prepare()")
        n, variant = int(p["n_questions"]), p["variant"]
        qrows = doc_rows(materials, "questions")
        srows = doc_rows(materials, "summary") if variant == "paper" else {}
        shadow = materials[materials["kind"] == "shadow"]
        truth = {(d, int(i)): lab for d, i, lab in zip(shadow["doc_id"], shadow["item"], shadow["parsed"])}
        missing = [d for d in targets["doc_id"] if d not in qrows or (variant == "paper" and d not in srows)]
        if missing:
            raise ValueError(f"ia materials lack documents {missing[:3]} (re-run prepare)")
        rows = []
        for doc_id in targets["doc_id"]:
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
                rows.append({
                    "query_id": f"{doc_id}::q{i}",
                    "doc_id": doc_id,
                    "user_prompt": text,
                    "max_tokens": int(p["max_tokens"]),
                    "top_logprobs": 0,
                    "ask_order": order,
                    "question": q,
                    "shadow": g,
                })
                order += 1
        return pd.DataFrame(rows, columns=["query_id", "doc_id", "user_prompt", "max_tokens", "top_logprobs",
                                           "ask_order", "question", "shadow"])

    # -- 3. scores ---------------------------------------------------------------------------------
    def query_outcomes(self, queries: pd.DataFrame, responses: pd.DataFrame) -> pd.DataFrame:
        p = self._p()
        lam, variant = float(p["lambda_idk"]), p["variant"]
        df = merge_responses(queries, responses)
        df["answer"] = [answer_label(variant, str(t)) for t in df["response_text"]]
        if variant == "repo":
            df["correct"] = df["answer"] == df["shadow"]  # Unknown == Unknown counts (mia.py calculate_score)
            df["idk"] = False
            df["contribution"] = df["correct"].astype(float)
        else:
            df["correct"] = (df["answer"] == df["shadow"]) & (df["shadow"] != "other")
            df["idk"] = df["answer"] == "idk"
            df["contribution"] = df["correct"].astype(float) - lam * df["idk"].astype(float)
        return df

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        p = self._p()
        if materials is None:
            raise ValueError("ia scores need the materials written by prepare() (parse counts)")
        n, variant = int(p["n_questions"]), p["variant"]
        lowest = 0.0 if variant == "repo" else -max(float(p["lambda_idk"]), 0.0)
        per_q = self.query_outcomes(queries, responses)
        return budget_scores(per_q, doc_rows(materials, "questions"), f"ia/{variant}", n, p["budgets"], lowest,
                             {"n_correct": "correct", "n_idk": "idk"})
