"""DCMI (Gao et al., "DCMI: A Differential Calibration Membership Inference Attack Against
Retrieval-Augmented Generation").

Queries: :data:`QUERY_TEMPLATE` around the candidate sample ``x`` (``title + " " + text`` as the
authors' code quotes it, the text alone without a title, cut to ``max_chars`` characters) and around perturbed copies ``x'_θ`` in which a fraction θ of the words (adjectives /
adverbs) is swapped for antonyms (``prepare``, :mod:`ragmi.attacks.perturb`), one per θ in
``thetas ∪ {theta_adv2}``.

Scores (``P(Yes | q)``: the probability of "Yes" at the first generated token that is a Yes or No
token, :func:`ragmi.attacks.answers.yes_no_at_first_generated`, read from the responses'
``token_top_logprobs`` -- token 0 for a model that answers "Yes" at once, a later one after "Sure," or
"**"; this is the authors' code's reading, and an opener's low-ranked alternatives do not decide it;
the earlier reading, the first position whose top-K holds a Yes/No, is ``first-topk`` in
``ragmi.attacks.answers.PYES_READINGS``);
``C_θ(x) = P(Yes | q) − P(Yes | q'_θ)``, the calibrated score):

* black box (:meth:`DCMI.black_box_scores`), no reference data:
  ``dcmi/adv3``: score = ``f(q) − f(q'_θ)`` with ``f`` = 1 for a Yes answer, else 0, θ =
  ``theta_adv2``; decision = score == 1.
* gray box (:meth:`DCMI.gray_box_scores`), only when the responses carry top-K log-probabilities:
  ``dcmi/adv1``: (θ, γ) from ``thetas`` × ``gammas`` maximising the reference accuracy of
  ``C_θ > γ`` (ties: first in grid order); ``dcmi/adv2``: θ = ``theta_adv2``, τ = 75th percentile of
  ``C_θ`` over the reference non-members, decision ``C_θ > τ``; ``dcmi/calibration=none``: score =
  ``P(Yes | q)``; ``dcmi/theta={θ:.2f}``: γ chosen per θ on the reference set;
  ``dcmi/gamma={γ:.1f}``: θ = ``theta_adv2``, decision ``C_θ > γ``.

Thresholds are fitted on reference documents only, in-fold (``cv_folds``, :mod:`ragmi.attacks.folds`):
adv1's (θ, γ), adv2's τ and each ``theta=`` variant's γ that decide a document of fold k are chosen on
the reference documents of the other folds, so no reference document is decided by a choice made on
itself, and an evaluation document (hashed to a fold by its doc_id) is decided by one fold's choice,
as a reference document is (columns ``fold`` and ``selection`` = "in-fold"; ``theta`` and
``threshold`` are that fold's).  The paper chooses once on the whole reference set; the choice here is
made on (K - 1) / K of it.  ``gamma=``, ``calibration=none`` and ``adv3`` choose nothing.  Extra columns: ``theta``,
``threshold``, ``no_answer`` (the original or the perturbed answer has neither Yes nor No) and, for
the gray-box variants, ``yes_no_position`` (where P(Yes | q) of the original query was read) and
``no_yes_no`` (no Yes/No among the top tokens of any position of the original or the perturbed
answer: P(Yes) there is the floor of token 0; the cost column ``no_yes_no_rate``).
Provenance: docs/provenance.md#dcmi.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .answers import parse_yes_no, yes_no_at_first_generated
from .base import Attack, merge_responses
from .folds import SELECTION_IN_FOLD, assign_folds
from .perturb import LLMPerturber, WordNetPerturber
from .work import DOC_CHARS_PER_TOKEN, AttackWork

QUERY_TEMPLATE = 'Is this: "{sample}" right? Answer with Yes or No.'  # DCMI §5.1, Appendix M.2

LLM_COLUMNS = [
    "prompt",
    "llm_model",
    "llm_max_tokens",
    "llm_temperature",
    "llm_prompt_tokens",
    "llm_completion_tokens",
    "llm_raw_output",
    "llm_failure",
]


def _key(theta: float) -> float:
    return round(float(theta), 6)


def _has_top(x) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) and len(x) > 0


def best_threshold(scores: np.ndarray, labels: np.ndarray, gammas) -> tuple[float, int]:
    """(γ, number correct) maximising the accuracy of ``scores > γ``; the first γ wins ties."""
    correct = [int(np.sum((scores > g).astype(int) == labels)) for g in gammas]
    i = int(np.argmax(correct))
    return float(gammas[i]), correct[i]


def _variant_frame(docs, variant, score, decision, theta, threshold, no_answer, read=None, fold=None) -> pd.DataFrame:
    """One variant's rows; ``read`` = (yes_no_position, no_yes_no) of a gray-box variant; ``fold``:
    each row's fold when the variant's θ or threshold is chosen in-fold (``selection`` "in-fold")."""
    position, missing = read if read is not None else (pd.NA, pd.NA)
    return pd.DataFrame(
        {
            "doc_id": docs,
            "variant": variant,
            "score": np.asarray(score, float),
            "decision": decision if decision is not None else pd.NA,
            "theta": theta,
            "threshold": threshold,
            "no_answer": no_answer,
            "yes_no_position": position,
            "no_yes_no": missing,
            "fold": pd.NA if fold is None else fold,
            "selection": pd.NA if fold is None else SELECTION_IN_FOLD,
        }
    )


@dataclass
class _GrayReads:
    """What DCMI's gray-box variants read from the top-K log-probabilities: P(Yes) of the original queries'
    answers (``p_o``), the calibrated scores (θ -> ``cal``) and where each answer's Yes/No was read."""

    p_o: np.ndarray
    cal: dict
    pos_o: np.ndarray  # the original answers' Yes/No positions (< 0: none)
    missing_o: np.ndarray
    read_p: dict  # θ -> the perturbed answers' (P(Yes), P(No), position)

    @classmethod
    def of(cls, tops_o: list, tops_p: dict) -> _GrayReads:
        """The reads of the original answers' top-K lists ``tops_o`` and the perturbed ones' (θ -> lists)."""
        read_o = [yes_no_at_first_generated(x) for x in tops_o]
        read_p = {th: [yes_no_at_first_generated(x) for x in tops_p[th]] for th in tops_p}
        p_o = np.array([r[0] for r in read_o])
        cal = {th: p_o - np.array([r[0] for r in read_p[th]]) for th in tops_p}
        pos_o = np.array([r[2] for r in read_o], dtype=int)
        return cls(p_o, cal, pos_o, pos_o < 0, read_p)

    def read(self, th=None) -> tuple[np.ndarray, np.ndarray]:
        """(yes_no_position, no_yes_no) of a variant reading the original query (and θ's)."""
        if th is None:
            return self.pos_o, self.missing_o
        return self.pos_o, self.missing_o | (np.array([r[2] for r in self.read_p[th]], dtype=int) < 0)


class DCMI(Attack):
    name = "dcmi"
    needs_prepare = True
    audit_mi_rank = 2
    out_of_fold = True  # the gray-box variants' θ and thresholds are chosen in-fold (cv_folds)
    # DCMI Fig. 9: with and without calibration, the θ sweep, the γ sweep (the dcmi_ablation table)
    ablation_sweeps = ("calibration", "theta", "gamma")

    @staticmethod
    def _work_thetas(p: Mapping) -> list[float]:
        return sorted({round(float(t), 6) for t in p["thetas"]} | {round(float(p["theta_adv2"]), 6)})

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What this attack sends per candidate (:mod:`ragmi.attacks.work`; ``tools/eta.py``)."""
        n_pert = len(cls._work_thetas(p))
        prepare = (
            (n_pert, 300 + doc_chars, min(p["llm_max_tokens"], doc_chars / DOC_CHARS_PER_TOKEN))
            if p["perturber"] == "llm"
            else None
        )
        # unique 0.78: WordNet leaves a short document unchanged at a small θ now and then, and the same
        # request is sent once (the default: 186 distinct of 240)
        return AttackWork(
            1 + n_pert, 42 + min(p["max_chars"], doc_chars), min(p["max_tokens"], 3), p["max_tokens"], 0.78, prepare
        )

    @classmethod
    def ablation_sweep(cls, variant: str) -> str | None:
        if variant in ("dcmi/adv1", "dcmi/adv2", "dcmi/calibration=none"):
            return "calibration"
        if variant.startswith("dcmi/theta="):
            return "theta"
        if variant.startswith("dcmi/gamma="):
            return "gamma"
        return None

    @classmethod
    def variant_channels(cls, variant: str) -> tuple[str, ...]:
        # adversary 3 reverses the Yes/No of the text; every other variant reads P(Yes) from the top-K
        # log-probabilities of the generated positions (the channel first_token_logprobs)
        return ("text",) if variant == "dcmi/adv3" else ("first_token_logprobs",)

    def __init__(self, params=None, **kwargs):
        super().__init__(params, **kwargs)
        p = self.params
        self.thetas = [_key(t) for t in p["thetas"]]
        self.theta_adv2 = _key(p["theta_adv2"])
        self.gammas = [float(g) for g in p["gammas"]]
        if len({f"{t:.2f}" for t in self.thetas}) != len(self.thetas):
            raise ConfigError(
                f"config key attacks.dcmi.thetas: values must be distinct at two decimals "
                f"(variant names dcmi/theta=θ:.2f), got {self.thetas}"
            )
        if len({f"{g:.1f}" for g in self.gammas}) != len(self.gammas):
            raise ConfigError(
                f"config key attacks.dcmi.gammas: values must be distinct at one decimal "
                f"(variant names dcmi/gamma=γ:.1f), got {self.gammas}"
            )

    # ------------------------------------------------------------------------------ helpers

    def all_thetas(self) -> list[float]:
        """θ values that need a perturbed copy: ``thetas ∪ {theta_adv2}``, sorted."""
        return sorted(set(self.thetas) | {self.theta_adv2})

    def sample(self, text) -> str:
        return str(text)[: int(self.params["max_chars"])]

    @staticmethod
    def candidate_texts(candidates: pd.DataFrame) -> list[str]:
        """What DCMI's query quotes of each candidate: ``title + " " + text`` as the authors' code
        builds it (docs/provenance.md#retrievers), the text alone for a candidate without a title."""
        titles = candidates["title"] if "title" in candidates.columns else [None] * len(candidates)
        out = []
        for title, text in zip(titles, candidates["text"]):
            t = "" if title is None or (isinstance(title, float) and np.isnan(title)) else str(title).strip()
            out.append(f"{t} {text}" if t else str(text))
        return out

    # ----------------------------------------------------------------------------- prepare

    def prepare(self, candidates: pd.DataFrame, tools) -> pd.DataFrame:
        """One perturbed sample per (candidate document, θ) for every θ in ``thetas ∪ {theta_adv2}``."""
        p = self.params
        items = [
            (d, self.sample(t), th)
            for d, t in zip(candidates["doc_id"], self.candidate_texts(candidates))
            for th in self.all_thetas()
        ]
        if p["perturber"] == "wordnet":
            wp = WordNetPerturber(seed=self.seed, wordnet_dir=p["wordnet_dir"])
            results = [wp.perturb(text, th, d) for d, text, th in items]
        else:
            try:
                fallback = WordNetPerturber(seed=self.seed, wordnet_dir=p["wordnet_dir"])
            except FileNotFoundError:
                fallback = None  # only fatal if an LLM rewrite actually fails
            llm = LLMPerturber(
                tools, max_tokens=int(p["llm_max_tokens"]), temperature=float(p["llm_temperature"]), fallback=fallback
            )
            results = llm.perturb_many(items)
            n_fail = sum(r.method != "llm" for r in results)
            if tools is not None and hasattr(tools, "log"):
                tools.log(f"dcmi: {n_fail} of {len(results)} LLM perturbations failed and fell back to WordNet")
        rows = []
        for (d, _, th), r in zip(items, results):
            row = {
                "doc_id": d,
                "theta": th,
                "perturbed_text": r.text,
                "perturb_method": r.method,
                "n_swapped": int(r.n_swapped),
                "n_requested": int(r.n_requested),
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

    def build_queries(self, candidates: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        if materials is None:
            raise ValueError("dcmi needs its materials (perturbed samples) from prepare()")
        pert = {
            (d, _key(t)): s for d, t, s in zip(materials["doc_id"], materials["theta"], materials["perturbed_text"])
        }
        qa = {"max_tokens": int(self.params["max_tokens"]), "top_logprobs": int(self.params["top_logprobs"])}
        rows = []
        for doc_id, text in zip(candidates["doc_id"], self.candidate_texts(candidates)):
            rows.append(
                {
                    "query_id": f"{doc_id}::orig",
                    "doc_id": doc_id,
                    "user_prompt": QUERY_TEMPLATE.format(sample=self.sample(text)),
                    **qa,
                    "kind": "orig",
                    "theta": float("nan"),
                }
            )
            for th in self.all_thetas():
                if (doc_id, th) not in pert:
                    raise ValueError(f"dcmi materials lack a perturbed sample for {doc_id!r} at θ={th}")
                rows.append(
                    {
                        "query_id": f"{doc_id}::p{th:g}",
                        "doc_id": doc_id,
                        "user_prompt": QUERY_TEMPLATE.format(sample=pert[(doc_id, th)]),
                        **qa,
                        "kind": "pert",
                        "theta": th,
                    }
                )
        return pd.DataFrame(rows)

    # -------------------------------------------------------------------------------- score

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        df = merge_responses(queries, responses)
        orig = df[df["kind"] == "orig"].drop_duplicates("doc_id").set_index("doc_id")
        docs = orig.index.tolist()
        pq = df[df["kind"] == "pert"]
        if "token_top_logprobs" not in df.columns:
            raise ValueError("dcmi needs the responses' token_top_logprobs column (empty lists for a black box)")
        pert = {
            (d, _key(th)): (text, tp)
            for d, th, text, tp in zip(pq["doc_id"], pq["theta"], pq["response_text"], pq["token_top_logprobs"])
        }
        thetas = self.all_thetas()
        for th in thetas:
            lacking = [d for d in docs if (d, th) not in pert]
            if lacking:
                raise ValueError(f"dcmi: no perturbed query at θ={th} for {lacking[:3]}")
        texts_p = {th: [pert[(d, th)][0] for d in docs] for th in thetas}
        tops_p = {th: [pert[(d, th)][1] for d in docs] for th in thetas}

        ans_o = [parse_yes_no(t) for t in orig["response_text"]]
        ans_p = {th: [parse_yes_no(t) for t in v] for th, v in texts_p.items()}
        na_o = np.array([a is None for a in ans_o])
        no_answer = {th: na_o | np.array([a is None for a in v]) for th, v in ans_p.items()}

        black = self.black_box_scores(docs, ans_o, ans_p, no_answer)
        if not self.logprobs:  # a target without log-probabilities: adversary 3 only
            self.skipped_variants += (
                ["dcmi/adv1", "dcmi/adv2", "dcmi/calibration=none"]
                + [f"dcmi/theta={th:.2f}" for th in self.thetas]
                + [f"dcmi/gamma={g:.1f}" for g in self.gammas]
            )
            return black
        gray = self.gray_box_scores(
            docs, list(orig["token_top_logprobs"]), tops_p, reference_labels, na_o, no_answer, tools
        )
        res = pd.concat([black] if gray is None else [black, gray], ignore_index=True)
        if not np.isfinite(res["score"]).all():
            raise ValueError("dcmi produced non-finite scores")
        return res

    def black_box_scores(self, docs: list, ans_o: list, ans_p: dict, no_answer: dict) -> pd.DataFrame:
        """``dcmi/adv3`` from the parsed answers (1 Yes, 0 No, None neither) to the original query
        (``ans_o``) and to the perturbed ones (``ans_p``: θ -> answers); needs no reference data."""
        t2 = self.theta_adv2
        f_o = np.array([a == 1 for a in ans_o], float)  # f(q): Yes -> 1, No or neither -> 0
        f_p = np.array([a == 1 for a in ans_p[t2]], float)
        s3 = f_o - f_p
        return _variant_frame(docs, "dcmi/adv3", s3, (s3 == 1).astype(int), t2, float("nan"), no_answer[t2])

    def gray_box_scores(
        self,
        docs: list,
        tops_o: list,
        tops_p: dict,
        reference_labels: Mapping[str, int],
        na_o: np.ndarray,
        no_answer: dict,
        tools=None,
    ) -> pd.DataFrame | None:
        """The variants read from top-K log-probabilities (``tops_o``: the per-position top-K lists of
        each original query's answer, ``tops_p``: θ -> those of the perturbed queries), thresholds
        fitted on the reference documents; None when no response has log-probabilities (a black-box
        target)."""
        have = [_has_top(x) for x in tops_o] + [_has_top(x) for v in tops_p.values() for x in v]
        if not any(have):
            if tools is not None and hasattr(tools, "log"):
                tools.log("dcmi: no top-K log-probabilities; gray-box variants skipped (black box)")
            return None
        if not all(have):
            raise ValueError("gray-box DCMI needs top-K log-probabilities in every response")
        reads = _GrayReads.of(tops_o, tops_p)
        fit = self.fitted_choices(docs, reads.cal, reference_labels)
        return pd.concat(self._gray_box_frames(docs, reads, fit, na_o, no_answer), ignore_index=True)

    def _gray_box_frames(
        self, docs: list, reads: _GrayReads, fit: dict, na_o: np.ndarray, no_answer: dict
    ) -> list[pd.DataFrame]:
        """The gray-box variants' rows: the two adversaries, no calibration, each θ and each γ."""
        cal, p_o, read = reads.cal, reads.p_o, reads.read
        fold = fit["fold"]
        t2 = self.theta_adv2
        out = []
        # Adversary 1: (θ, γ) maximising the accuracy on the reference rows of the other folds
        th1, g1 = fit["adv1_theta"], fit["adv1_gamma"]
        pick = ([self.thetas.index(th) for th in th1], np.arange(len(docs)))  # each row its fold's θ
        s1 = np.stack([cal[th] for th in self.thetas])[pick]
        na1 = np.stack([no_answer[th] for th in self.thetas])[pick]
        miss1 = np.stack([read(th)[1] for th in self.thetas])[pick]
        out.append(
            _variant_frame(docs, "dcmi/adv1", s1, (s1 > g1).astype(int), th1, g1, na1, (reads.pos_o, miss1), fold)
        )

        # Adversary 2: τ = Q3 of the calibrated scores of the other folds' reference non-members
        tau = fit["adv2_tau"]
        out.append(
            _variant_frame(
                docs, "dcmi/adv2", cal[t2], (cal[t2] > tau).astype(int), t2, tau, no_answer[t2], read(t2), fold
            )
        )

        # ablation: no calibration
        out.append(_variant_frame(docs, "dcmi/calibration=none", p_o, None, float("nan"), float("nan"), na_o, read()))

        # each θ, γ chosen on the reference rows of the other folds
        for th in self.thetas:
            g = fit["theta_gamma"][th]
            out.append(
                _variant_frame(
                    docs,
                    f"dcmi/theta={th:.2f}",
                    cal[th],
                    (cal[th] > g).astype(int),
                    th,
                    g,
                    no_answer[th],
                    read(th),
                    fold,
                )
            )

        # each γ at theta_adv2
        for g in self.gammas:
            out.append(
                _variant_frame(
                    docs, f"dcmi/gamma={g:.1f}", cal[t2], (cal[t2] > g).astype(int), t2, g, no_answer[t2], read(t2)
                )
            )
        return out

    def fitted_choices(self, docs: list, cal: dict, reference_labels: Mapping[str, int]) -> dict:
        """The gray-box variants' choices, cross-fitted (ragmi.attacks.folds): the rows of fold k (its
        reference rows and the evaluation rows assigned to it) get the choices made on the reference
        rows of the other folds.  ``cal``: θ -> calibrated scores of the rows ``docs``.  Per row:
        ``fold``, ``adv1_theta`` / ``adv1_gamma`` (Adversary 1's grid search, ties: first in grid
        order), ``adv2_tau`` (Adversary 2's τ, Q3 of the non-members' C_θ at ``theta_adv2``, Eq. 10),
        ``theta_gamma`` (θ -> the γ chosen for that θ)."""
        k_folds = int(self.params["cv_folds"])
        fold, is_ref, y_ref = assign_folds(docs, reference_labels, k_folds, self.seed, "dcmi", "gray-box DCMI")
        y = np.zeros(len(docs), dtype=int)
        y[is_ref] = y_ref
        n = len(docs)
        res = {
            "fold": fold,
            "adv1_theta": np.zeros(n),
            "adv1_gamma": np.zeros(n),
            "adv2_tau": np.zeros(n),
            "theta_gamma": {th: np.zeros(n) for th in self.thetas},
        }
        for k in range(k_folds):
            train, test = is_ref & (fold != k), fold == k
            if not test.any():
                continue
            best = None
            for th in self.thetas:
                g, n_ok = best_threshold(cal[th][train], y[train], self.gammas)
                res["theta_gamma"][th][test] = g
                if best is None or n_ok > best[2]:
                    best = (th, g, n_ok)
            res["adv1_theta"][test], res["adv1_gamma"][test] = best[0], best[1]
            res["adv2_tau"][test] = float(np.percentile(cal[self.theta_adv2][train & (y == 0)], 75))
        return res
