"""DCMI (Gao et al., "DCMI: A Differential Calibration Membership Inference Attack Against
Retrieval-Augmented Generation", CCS 2025).

Query (§5.1, Appendix M.2): ``Is this: "{sample}" right? Answer with Yes or No.`` for the target
sample ``x`` (the document text cut to ``max_chars`` characters, as in ragmi's RAG-MIA) and, with the
same template, for perturbed copies ``x'_θ`` in which a fraction θ of the words (adjectives/adverbs)
is swapped for antonyms (``prepare``; see :mod:`ragmi.attacks.perturb`).

Scores (the equation numbers are the paper's):

* P(Yes | q) is the probability of the first generated token being "Yes", read from the first-token
  top-K log-probabilities with :func:`ragmi.attacks.rag_mia.yes_no_probabilities` (raw, not
  renormalised over {Yes, No}; a "Yes" missing from the top-K gets the smallest listed probability).
* Eq. 8: the calibrated score ``C_θ(x) = P(Yes | q) − P(Yes | q'_θ)``.
* ``dcmi/adv1`` (§5.1, Eq. 9): θ from ``thetas`` and the classification threshold γ from ``gammas``
  are chosen together by a grid search maximising accuracy of ``C_θ > γ`` on the reference
  documents (members and non-members: Adversary 1 holds a subset of the retrieval database); ties
  go to the first pair in grid order (θ as listed, then γ as listed).  score = ``C_θ*``,
  decision = ``C_θ* > γ*``.
* ``dcmi/adv2`` (§6.1, Eq. 10-11): θ = ``theta_adv2`` (0.06); τ = Q3 (75th percentile, numpy's
  linear interpolation) of ``C_θ`` over the reference *non-members* (the paper simulates Adversary
  2's same-distribution reference data "by selecting reference data from non-member samples",
  §6.2); decision = ``C_θ > τ``.
* ``dcmi/adv3`` (§7.1, Eq. 12-13): black box.  ``f(q)`` = 1 when the answer says Yes, else 0
  (word-boundary parse, first of Yes/No wins, :func:`ragmi.attacks.rag_mia.parse_yes_no`; an answer
  with neither counts as 0 and is flagged ``no_answer``; the public code's substring test, where
  "know" or "not" read as No, is *not* used).  score = ``f(q) − f(q'_θ)`` ∈ {−1, 0, 1} with
  θ = ``theta_adv2``; decision = score == 1 (decision reversal Yes→No).  No reference data.
* ``dcmi/calibration=none`` (Fig. 9a ablation, "DCMI without the differential calibration module"):
  score = P(Yes | q), no decision.
* ``dcmi/theta={θ:.2f}`` (Fig. 9b): score = ``C_θ``, γ chosen for that θ on the reference set by
  accuracy, decision = ``C_θ > γ_θ``.
* ``dcmi/gamma={γ:.1f}`` (Fig. 9c): θ = ``theta_adv2``, score = ``C_θ``, decision = ``C_θ > γ``.

Every grid choice and threshold is fitted on documents in ``reference_labels`` only; all documents
(reference and evaluation) are then scored with that choice.  Extra columns: ``theta`` and
``threshold`` (the θ / γ / τ used), ``no_answer`` (the original or the perturbed answer has neither
Yes nor No).  When no response carries first-token log-probabilities (a black-box target), only
``dcmi/adv3`` is emitted.

Paper vs. authors' code: the official repo (Xinyu140203/RAG_MIA) hard-codes θ = 0.03, reads P(Yes)
at the first generated Yes/No token (ragmi: the first token), and picks its threshold in-sample over
all labelled documents; ragmi follows the paper (θ grid 0.04–0.12, 0.06 for Adversaries 2/3,
thresholds from the reference set only).  The paper's perturbation uses an LLM (``perturber:
llm``); the default here is the offline WordNet perturber because the embedded default attacker
LLM is not capable of the rewrite.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from .base import Attack, merge_responses
from .perturb import LLMPerturber, WordNetPerturber
from .rag_mia import parse_yes_no, yes_no_probabilities

QUERY_TEMPLATE = 'Is this: "{sample}" right? Answer with Yes or No.'

DEFAULTS = {
    "thetas": [0.04, 0.06, 0.08, 0.10, 0.12],  # §5.1: θ swept from 0.04 to 0.12 (Adversary 1)
    "theta_adv2": 0.06,  # §6.1 / §7.1: fixed θ for Adversaries 2 and 3
    "gammas": [round(0.1 * k, 1) for k in range(1, 11)],  # §5.1: γ swept from 0.1 to 1.0
    "perturber": "wordnet",
    "max_chars": 1000,
    "max_tokens": 4,
    "top_logprobs": 20,
    "llm_max_tokens": 1024,
    "llm_temperature": 0.0,
    "wordnet_dir": None,
    "seed": 0,
}

LLM_COLUMNS = ["prompt", "llm_model", "llm_max_tokens", "llm_temperature", "llm_prompt_tokens",
               "llm_completion_tokens", "llm_raw_output", "llm_failure"]


def _key(theta: float) -> float:
    return round(float(theta), 6)


def _has_top(x) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) and len(x) > 0


def best_threshold(scores: np.ndarray, labels: np.ndarray, gammas) -> tuple[float, int]:
    """(γ, number correct) maximising the accuracy of ``scores > γ``; the first γ wins ties."""
    correct = [int(np.sum((scores > g).astype(int) == labels)) for g in gammas]
    i = int(np.argmax(correct))
    return float(gammas[i]), correct[i]


class DCMI(Attack):
    name = "dcmi"
    needs_prepare = True

    def __init__(self, params=None):
        super().__init__(params)
        p = {**DEFAULTS, **self.params}
        self.thetas = [_key(t) for t in p["thetas"]]
        self.theta_adv2 = _key(p["theta_adv2"])
        self.gammas = [float(g) for g in p["gammas"]]
        for t in self.thetas + [self.theta_adv2]:
            if not 0 < t < 1:
                raise ValueError(f"dcmi: perturbation magnitude θ must lie in (0, 1), got {t}")
        if len({f"{t:.2f}" for t in self.thetas}) != len(self.thetas):
            raise ValueError(f"dcmi: thetas must be distinct at two decimals, got {self.thetas}")
        if len({f"{g:.1f}" for g in self.gammas}) != len(self.gammas) or not self.gammas:
            raise ValueError(f"dcmi: gammas must be non-empty and distinct at one decimal, got {self.gammas}")
        if p["perturber"] not in ("wordnet", "llm"):
            raise ValueError(f"dcmi: perturber must be 'wordnet' or 'llm', got {p['perturber']!r}")
        self.p = p

    # ------------------------------------------------------------------------------ helpers

    def all_thetas(self) -> list[float]:
        """θ values that need a perturbed copy: ``thetas ∪ {theta_adv2}``, sorted."""
        return sorted(set(self.thetas) | {self.theta_adv2})

    def sample(self, text) -> str:
        return str(text)[: int(self.p["max_chars"])]

    # ----------------------------------------------------------------------------- prepare

    def prepare(self, targets: pd.DataFrame, tools) -> pd.DataFrame:
        """One perturbed sample per (document, θ) for every θ in ``thetas ∪ {theta_adv2}``."""
        p = self.p
        items = [(d, self.sample(t), th) for d, t in zip(targets["doc_id"], targets["text"])
                 for th in self.all_thetas()]
        if p["perturber"] == "wordnet":
            wp = WordNetPerturber(seed=int(p["seed"]), wordnet_dir=p["wordnet_dir"])
            results = [wp.perturb(text, th, d) for d, text, th in items]
        else:
            try:
                fallback = WordNetPerturber(seed=int(p["seed"]), wordnet_dir=p["wordnet_dir"])
            except FileNotFoundError:
                fallback = None  # only fatal if an LLM rewrite actually fails
            llm = LLMPerturber(tools, max_tokens=int(p["llm_max_tokens"]), temperature=float(p["llm_temperature"]),
                               fallback=fallback)
            results = llm.perturb_many(items)
            n_fail = sum(r.method != "llm" for r in results)
            if tools is not None and hasattr(tools, "log"):
                tools.log(f"dcmi: {n_fail} of {len(results)} LLM perturbations failed and fell back to WordNet")
        rows = []
        for (d, text, th), r in zip(items, results):
            row = {
                "doc_id": d, "theta": th, "perturbed_text": r.text, "perturb_method": r.method,
                "n_swapped": int(r.n_swapped), "n_requested": int(r.n_requested),
                "swaps": "|".join(f"{a}->{b}" for a, b in r.swaps),
            }
            if p["perturber"] == "llm":
                row.update({c: r.extra.get(c) for c in LLM_COLUMNS})
            rows.append(row)
        cols = ["doc_id", "theta", "perturbed_text", "perturb_method", "n_swapped", "n_requested", "swaps"]
        if p["perturber"] == "llm":
            cols += LLM_COLUMNS
        return pd.DataFrame(rows, columns=cols)

    # ------------------------------------------------------------------------ build_queries

    def build_queries(self, targets: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        if materials is None:
            raise ValueError("dcmi needs its materials (perturbed samples) from prepare()")
        pert = {(d, _key(t)): s
                for d, t, s in zip(materials["doc_id"], materials["theta"], materials["perturbed_text"])}
        qa = {"max_tokens": int(self.p["max_tokens"]), "top_logprobs": int(self.p["top_logprobs"])}
        rows = []
        for doc_id, text in zip(targets["doc_id"], targets["text"]):
            rows.append({"query_id": f"{doc_id}::orig", "doc_id": doc_id,
                         "user_prompt": QUERY_TEMPLATE.format(sample=self.sample(text)), **qa,
                         "kind": "orig", "theta": float("nan")})
            for th in self.all_thetas():
                if (doc_id, th) not in pert:
                    raise ValueError(f"dcmi materials lack a perturbed sample for {doc_id!r} at θ={th}")
                rows.append({"query_id": f"{doc_id}::p{th:g}", "doc_id": doc_id,
                             "user_prompt": QUERY_TEMPLATE.format(sample=pert[(doc_id, th)]), **qa,
                             "kind": "pert", "theta": th})
        return pd.DataFrame(rows)

    # -------------------------------------------------------------------------------- score

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        df = merge_responses(queries, responses)
        orig = df[df["kind"] == "orig"].drop_duplicates("doc_id").set_index("doc_id")
        docs = orig.index.tolist()
        pq = df[df["kind"] == "pert"]
        pert = {(d, _key(th)): (text, tp) for d, th, text, tp in
                zip(pq["doc_id"], pq["theta"], pq["response_text"], pq["first_token_logprobs"])}
        thetas = self.all_thetas()
        for th in thetas:
            lacking = [d for d in docs if (d, th) not in pert]
            if lacking:
                raise ValueError(f"dcmi: no perturbed query at θ={th} for {lacking[:3]}")

        # black-box answers, f(·) of Eq. 12: Yes -> 1, No or neither -> 0
        ans_o = [parse_yes_no(t) for t in orig["response_text"]]
        ans_p = {th: [parse_yes_no(pert[(d, th)][0]) for d in docs] for th in thetas}
        f_o = np.array([a == 1 for a in ans_o], float)
        f_p = {th: np.array([a == 1 for a in v], float) for th, v in ans_p.items()}
        na_o = np.array([a is None for a in ans_o])
        na = {th: na_o | np.array([a is None for a in v]) for th, v in ans_p.items()}

        t2 = self.theta_adv2
        out = []

        def emit(variant, score, decision, theta, threshold, no_answer):
            out.append(pd.DataFrame({
                "doc_id": docs, "variant": variant, "score": np.asarray(score, float),
                "decision": decision if decision is not None else pd.NA,
                "theta": theta, "threshold": threshold, "no_answer": no_answer,
            }))

        # Adversary 3, Eq. 12-13
        s3 = f_o - f_p[t2]
        emit("dcmi/adv3", s3, (s3 == 1).astype(int), t2, float("nan"), na[t2])

        tops_o = list(orig["first_token_logprobs"])
        tops_p = {th: [pert[(d, th)][1] for d in docs] for th in thetas}
        have = [_has_top(x) for x in tops_o] + [_has_top(x) for v in tops_p.values() for x in v]
        if not any(have):
            if tools is not None and hasattr(tools, "log"):
                tools.log("dcmi: no first-token log-probabilities; gray-box variants skipped (black box)")
            return pd.concat(out, ignore_index=True)
        if not all(have):
            raise ValueError("gray-box DCMI needs first-token log-probabilities in every response")

        p_o = np.array([yes_no_probabilities(x)[0] for x in tops_o])
        cal = {th: p_o - np.array([yes_no_probabilities(x)[0] for x in tops_p[th]]) for th in thetas}  # Eq. 8

        is_ref = np.array([d in reference_labels for d in docs])
        y_ref = np.array([int(reference_labels[d]) for d in np.array(docs, dtype=object)[is_ref]], dtype=int)
        if not (y_ref == 0).any():
            raise ValueError("DCMI needs reference non-members (Adversary 2's threshold, Eq. 10)")
        if not (y_ref == 1).any():
            raise ValueError("DCMI needs reference members (Adversary 1's grid search, §5.1)")

        # Adversary 1, Eq. 9: (θ, γ) maximising reference accuracy; ties -> first in grid order
        best = None
        per_theta = {}
        for th in self.thetas:
            g, n_ok = best_threshold(cal[th][is_ref], y_ref, self.gammas)
            per_theta[th] = g
            if best is None or n_ok > best[2]:
                best = (th, g, n_ok)
        th1, g1, _ = best
        emit("dcmi/adv1", cal[th1], (cal[th1] > g1).astype(int), th1, g1, na[th1])

        # Adversary 2, Eq. 10-11: τ = Q3 of the reference non-members' calibrated scores
        tau = float(np.percentile(cal[t2][is_ref][y_ref == 0], 75))
        emit("dcmi/adv2", cal[t2], (cal[t2] > tau).astype(int), t2, tau, na[t2])

        # Fig. 9a ablation: no calibration
        emit("dcmi/calibration=none", p_o, None, float("nan"), float("nan"), na_o)

        # Fig. 9b: each θ, γ chosen on the reference set
        for th in self.thetas:
            g = per_theta[th]
            emit(f"dcmi/theta={th:.2f}", cal[th], (cal[th] > g).astype(int), th, g, na[th])

        # Fig. 9c: each γ at theta_adv2
        for g in self.gammas:
            emit(f"dcmi/gamma={g:.1f}", cal[t2], (cal[t2] > g).astype(int), t2, g, na[t2])

        res = pd.concat(out, ignore_index=True)
        if not np.isfinite(res["score"]).all():
            raise ValueError("dcmi produced non-finite scores")
        return res

