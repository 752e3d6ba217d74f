"""S2MIA (Li et al., "Generating Is Believing: Membership Inference Attacks against
Retrieval-Augmented Generation").

The attacker queries the RAG system with the first half of the candidate document; a member is
retrieved, and the generator tends to continue it with the remaining half, verbatim and fluently.

Query: :data:`QUERY_TEMPLATE` around ``x^q``, the text before the whitespace run nearest to the
character midpoint (:func:`split_halves`; ``x^k`` is the text after it; without whitespace the cut is
at ``len // 2``).  ``max_tokens`` = ``min(max_tokens_cap, ceil(1.3 * words(x^k)) + 32)`` unless
``max_tokens`` is set.

Signals:

* **S**: sentence BLEU in [0, 1] (:func:`bleu`) of the response, stripped of the answer wrapper
  (:func:`extract_response`), against ``x^k`` (``bleu_reference: second_half``) or the whole text
  (``full_text``).
* **PPL**: ``exp(-mean(token_logprobs))`` of the response (the target must return ``token_logprobs``).
  An empty response gets the largest perplexity of the answered reference documents (never one read
  from an evaluation or a control's answer) and ``no_answer = True``.

Variants:

* ``s2mia/s``: score = S.
* ``s2mia/T``: member iff ``S >= theta_sem AND PPL <= theta_ppl``, the pair maximising accuracy on
  reference documents (:func:`threshold_search`); the score is the standardised min-margin
  (:func:`min_margin`), >= 0 exactly when the decision is 1.  The pair is chosen in-fold
  (``cv_folds``, :mod:`ragmi.attacks.folds`): a document of fold k is decided and scored by the pair
  searched on the reference documents of the other folds (and the spread of theirs), so no
  reference document is decided by a pair chosen on itself.  Columns ``theta_sem``, ``theta_ppl``
  (its fold's), ``fold``, ``selection`` = "in-fold".
* ``s2mia/M``: member probability of a classifier on (S, PPL) trained on reference documents
  (``classifier``: xgboost when importable (auto) or scikit-learn gradient boosting), cross-fitted
  (``cv_folds``; as in Chernozhukov et al. 2018; :mod:`ragmi.attacks.folds`): every document, reference
  or evaluation, has one fold (evaluation documents by a hash of the seed, the variant and the
  doc_id) and is scored by the one classifier trained on the reference documents of the other folds,
  so that both sets are scored by the same procedure and a threshold placed on reference scores
  keeps its false-positive rate (not the mean of the fold classifiers, whose narrower spread
  realised less; tests/test_crossfit.py).  Constant features give constant scores (the mean of the
  K fold values).  Decision: the classifier's predicted class (member probability > 0.5, as
  ``predict`` decides).

Provenance: docs/provenance.md#s2mia.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .base import Attack, merge_responses
from .folds import SELECTION_IN_FOLD, assign_folds, constant_where_features_are, fold_rows
from .work import AttackWork

# S2MIA paper template, verbatim.
QUERY_TEMPLATE = (
    'Given the [Query]: "{first_half}".\n'
    "Do not include any introductory or explanatory text, use the following format for output: "
    "{{[Response]: 'Provide a concise response directly addressing the [Query] by using the most "
    "relevant and matching text in the prompt.'}}"
)

_WS = re.compile(r"\s+")
_WRAPPER = re.compile(r"^\s*(\{)?\s*\[?\s*response\s*\]?\s*:\s*", re.IGNORECASE)


def split_halves(text: str) -> tuple[str, str]:
    """(x^q, x^k): cut at the whitespace run nearest the character midpoint (see module doc)."""
    t = str(text).strip()
    mid = len(t) / 2
    best, best_d = None, math.inf
    for m in _WS.finditer(t):
        a, b = m.start(), m.end()
        d = 0.0 if a <= mid <= b else min(abs(a - mid), abs(b - mid))
        if d < best_d:
            best, best_d = (a, b), d
    if best is None:
        cut = len(t) // 2
        return t[:cut], t[cut:]
    return t[: best[0]], t[best[1] :]


def default_max_tokens(second_half: str, cap: int) -> int:
    """``min(cap, ceil(1.3 * words) + 32)``: the second half's length in tokens, estimated, plus slack."""
    return int(min(int(cap), math.ceil(1.3 * len(second_half.split())) + 32))


def extract_response(text: str) -> str:
    """The response without the ``{[Response]: '...'}`` wrapper the prompt asks for."""
    s = str(text or "").strip()
    m = _WRAPPER.match(s)
    if m:
        s = s[m.end() :].strip()
        if m.group(1) and s.endswith("}"):
            s = s[:-1].rstrip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
            s = s[1:-1].strip()
    return s


def bleu(hypothesis: str, reference: str) -> float:
    """Smoothed sentence BLEU in [0, 1] (sacrebleu, 13a tokens, smooth_method='exp')."""
    import sacrebleu

    if not hypothesis.strip() or not reference.strip():
        return 0.0
    s = sacrebleu.sentence_bleu(hypothesis, [reference], smooth_method="exp").score / 100.0
    return float(min(max(s, 0.0), 1.0))


def perplexity(token_logprobs) -> float:
    """``exp(-mean(token_logprobs))``; NaN when there is no token."""
    lp = np.asarray([] if token_logprobs is None else list(token_logprobs), dtype=float)
    if lp.size == 0:
        return float("nan")
    if not np.isfinite(lp).all():
        raise ValueError("token_logprobs contain non-finite values")
    return float(np.exp(-lp.mean()))


def threshold_search(s, ppl, y) -> tuple[float, float, float]:
    """(theta_sem, theta_ppl, accuracy) maximising the accuracy of ``S >= ts AND PPL <= tp`` on
    labelled data, over every candidate pair; ties: smallest ts, then largest tp."""
    s, ppl, y = np.asarray(s, float), np.asarray(ppl, float), np.asarray(y, int)
    if s.size == 0:
        raise ValueError("threshold search needs reference documents")
    cs = np.append(np.unique(s), np.nextafter(s.max(), np.inf))
    cp = np.append(np.unique(ppl), np.nextafter(ppl.min(), -np.inf))
    cp = np.sort(cp)[::-1]  # descending: argmax picks the largest tp among ties
    n_non = int(np.sum(y == 0))
    best = (None, None, -1)
    for ts in cs:  # ascending: a later ts replaces an earlier one only when strictly better
        sel = s >= ts
        mp = np.sort(ppl[sel & (y == 1)])
        npp = np.sort(ppl[sel & (y == 0)])
        tp = np.searchsorted(mp, cp, side="right")
        fp = np.searchsorted(npp, cp, side="right")
        correct = tp + (n_non - fp)
        k = int(np.argmax(correct))
        if correct[k] > best[2]:
            best = (float(ts), float(cp[k]), int(correct[k]))
    return best[0], best[1], best[2] / y.size


def _scale(x: np.ndarray) -> float:
    q75, q25 = np.percentile(x, [75, 25])
    sc = float(q75 - q25)
    if not sc > 0:
        sc = float(np.std(x))
    return sc if sc > 0 else 1.0


def min_margin(s, ppl, theta_sem, theta_ppl, ref_s, ref_ppl) -> np.ndarray:
    """Standardised min-margin of the rule ``S >= theta_sem AND PPL <= theta_ppl`` (>= 0 iff member)."""
    s, ppl = np.asarray(s, float), np.asarray(ppl, float)
    ms = (s - theta_sem) / _scale(np.asarray(ref_s, float))
    mp = (math.log(theta_ppl) - np.log(ppl)) / _scale(np.log(np.asarray(ref_ppl, float)))
    return np.minimum(ms, mp)


class S2MIA(Attack):
    name = "s2mia"
    needs_prepare = False
    out_of_fold = True  # the classifier's reference scores (cv_folds)
    audit_mi_rank = 1

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What this attack sends per candidate (:mod:`ragmi.attacks.work`; ``tools/eta.py``)."""
        mt = p["max_tokens"]
        if mt is None:  # S2MIA.default_max_tokens: 1.3 x words of the second half + 32, capped
            words = doc_chars / 2 / 6.8  # characters per word of the synthetic conversations' second halves
            mt = min(int(p["max_tokens_cap"]), math.ceil(1.3 * words) + 32)
        return AttackWork(1, 247 + doc_chars * 0.49, 0.76 * mt, int(mt))

    @classmethod
    def variant_channels(cls, variant: str) -> tuple[str, ...]:
        # s: BLEU of the answer text; T and M add the response perplexity from the token log-probabilities
        return ("text",) if variant == "s2mia/s" else ("text", "token_logprobs")

    def build_queries(self, candidates: pd.DataFrame, materials=None) -> pd.DataFrame:
        p = self.params
        rows = []
        for doc_id, text in zip(candidates["doc_id"], candidates["text"]):
            first, second = split_halves(text)
            mt = p["max_tokens"]
            if mt is None:
                mt = default_max_tokens(second, int(p["max_tokens_cap"]))
            rows.append(
                {
                    "query_id": f"{doc_id}::s2",
                    "doc_id": doc_id,
                    "user_prompt": QUERY_TEMPLATE.format(first_half=first),
                    "max_tokens": int(mt),
                    "top_logprobs": int(p["top_logprobs"]),
                    "first_half": first,
                    "second_half": second,
                    "text": str(text),
                }
            )
        return pd.DataFrame(rows)

    # ----------------------------------------------------------------------------------------
    def features(self, df: pd.DataFrame, reference_ids=()) -> pd.DataFrame:
        """S, PPL and no_answer per row of queries merged with responses; an empty response's PPL is
        the largest PPL of the answered reference rows (``reference_ids``: the reference documents),
        never read from evaluation or control rows."""
        ref_col = "second_half" if self.params["bleu_reference"] == "second_half" else "text"
        resp = [extract_response(r) for r in df["response_text"]]
        sim = np.array([bleu(h, str(r)) for h, r in zip(resp, df[ref_col])], dtype=float)
        empty = np.array([not r.strip() for r in resp])
        if not self.logprobs:  # a target without log-probabilities: BLEU only (s2mia/s)
            nan = np.full(len(df), np.nan)
            return pd.DataFrame({"doc_id": df["doc_id"].to_numpy(), "bleu": sim, "ppl": nan, "no_answer": empty})
        ppl = np.array([perplexity(lp) for lp in df["token_logprobs"]], dtype=float)
        missing = np.isnan(ppl) & ~empty
        if missing.any():
            q = df.loc[missing, "query_id"].head(3).tolist()
            raise ValueError(f"S2MIA needs the target's token_logprobs (gray-box) for its perplexity; missing for {q}")
        nan = np.isnan(ppl)
        ref = np.array([d in reference_ids for d in df["doc_id"]], dtype=bool)
        if nan.any():
            if (nan | ~ref).all():
                raise ValueError(
                    "S2MIA: every reference response is empty, no perplexity can be imputed for the empty answers"
                )
            ppl[nan] = np.nanmax(ppl[ref])
        return pd.DataFrame({"doc_id": df["doc_id"].to_numpy(), "bleu": sim, "ppl": ppl, "no_answer": empty})

    def _make_classifier(self, seed: int):
        p = self.params
        kind = p["classifier"]
        n_est, depth = int(p["n_estimators"]), int(p["max_depth"])
        lr = float(p["learning_rate"])
        if kind in ("auto", "xgboost"):
            try:
                from xgboost import XGBClassifier
            except ImportError:
                if kind == "xgboost":
                    raise ConfigError(
                        "config key attacks.s2mia.classifier: xgboost is not installed (pip install xgboost-cpu)"
                    ) from None
            else:
                return XGBClassifier(
                    n_estimators=n_est,
                    max_depth=depth,
                    learning_rate=lr,
                    random_state=seed,
                    n_jobs=1,
                    eval_metric="logloss",
                )
        from sklearn.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(n_estimators=n_est, max_depth=depth, learning_rate=lr, random_state=seed)

    def model_scores(
        self, x: np.ndarray, doc_ids, reference_labels: Mapping[str, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(member probability, fold) per row, cross-fitted (ragmi.attacks.folds): every row is scored
        by the one classifier trained on the reference rows of the other folds."""
        k_folds = int(self.params["cv_folds"])
        seed = (self.seed ^ zlib.crc32(b"s2mia/M")) % 2**31
        fold, is_ref, y_ref = assign_folds(doc_ids, reference_labels, k_folds, self.seed, "s2mia/M", "S2MIA-M")
        y = np.zeros(len(fold), dtype=int)
        y[is_ref] = y_ref
        out = np.zeros(len(fold))
        for k in range(k_folds):
            train, test = fold_rows(list(doc_ids), fold, is_ref, k)
            if len(test):
                model = self._make_classifier(seed + k + 1)
                model.fit(x[train], y[train])
                out[test] = model.predict_proba(x[test])[:, 1]
        return constant_where_features_are(x, out, fold, k_folds), fold

    def threshold_scores(self, s, ppl, doc_ids, reference_labels: Mapping[str, int]) -> pd.DataFrame:
        """S2MIA-T cross-fitted (ragmi.attacks.folds): the rows of fold k are decided and scored by the
        (theta_sem, theta_ppl) searched on the reference rows of the other folds (and standardised by
        their spread).  Columns score, decision, theta_sem, theta_ppl, fold."""
        k_folds = int(self.params["cv_folds"])
        fold, is_ref, y_ref = assign_folds(doc_ids, reference_labels, k_folds, self.seed, "s2mia/T", "S2MIA-T")
        y = np.zeros(len(fold), dtype=int)
        y[is_ref] = y_ref
        score, ts_all, tp_all = np.zeros(len(fold)), np.zeros(len(fold)), np.zeros(len(fold))
        for k in range(k_folds):
            train, test = is_ref & (fold != k), fold == k
            if not test.any():
                continue
            ts, tp, _ = threshold_search(s[train], ppl[train], y[train])
            score[test] = min_margin(s[test], ppl[test], ts, tp, s[train], ppl[train])
            ts_all[test], tp_all[test] = ts, tp
        dec = ((s >= ts_all) & (ppl <= tp_all)).astype(int)
        return pd.DataFrame({"score": score, "decision": dec, "theta_sem": ts_all, "theta_ppl": tp_all, "fold": fold})

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        df = merge_responses(queries, responses)
        f = self.features(df, reference_labels)
        base = {"doc_id": f["doc_id"], "bleu": f["bleu"], "ppl": f["ppl"], "no_answer": f["no_answer"]}
        out = [pd.DataFrame({**base, "variant": "s2mia/s", "score": f["bleu"], "decision": pd.NA})]
        if not self.logprobs:  # T and M need the response perplexity
            self.skipped_variants += ["s2mia/T", "s2mia/M"]
            return out[0][["doc_id", "variant", "score", "decision", "bleu", "ppl", "no_answer"]]

        ids = f["doc_id"].tolist()
        y_ref = [int(reference_labels[d]) for d in ids if d in reference_labels]
        if len(set(y_ref)) < 2:
            raise ValueError("S2MIA-T/M need reference members and non-members")
        s, ppl = f["bleu"].to_numpy(), f["ppl"].to_numpy()
        t = self.threshold_scores(s, ppl, ids, reference_labels)
        out.append(
            pd.DataFrame(
                {
                    **base,
                    "variant": "s2mia/T",
                    **{c: t[c].to_numpy() for c in t.columns},
                    "selection": SELECTION_IN_FOLD,
                }
            )
        )
        x = np.column_stack([s, ppl])
        prob, fold = self.model_scores(x, ids, reference_labels)
        out.append(
            pd.DataFrame(
                {
                    **base,
                    "variant": "s2mia/M",
                    "score": prob,
                    "decision": (prob > 0.5).astype(int),
                    "fold": fold,
                    "selection": SELECTION_IN_FOLD,
                }
            )
        )
        res = pd.concat(out, ignore_index=True)
        cols = ["doc_id", "variant", "score", "decision"]
        return res[cols + [c for c in res.columns if c not in cols]]
