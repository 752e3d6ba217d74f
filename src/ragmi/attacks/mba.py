"""MBA, the mask-based membership inference attack (Liu et al., "Mask-based Membership Inference
Attacks for Retrieval-Augmented Generation").

The attacker masks up to ``n_masks`` hard-to-guess words of the candidate document and asks the RAG
system to fill them in: a member is retrieved (the masked document is the query) and the generator can
copy the words from its context; otherwise it has to guess.

``prepare`` (one proxy-LM forward pass per document, :func:`rank_words`, :func:`choose_masks`):

* words are the whitespace-separated tokens; the mask replaces a word's *core* (the word without
  leading/trailing punctuation), so punctuation stays in the masked text;
* a token's rank is the number of vocabulary entries with a strictly larger proxy logit given its
  full prefix (a start token is prepended when the tokenizer adds none); a word's score is the max
  rank over the tokens overlapping its core;
* the words are split into ``n_masks`` subtexts of equal word count and the highest-scoring word of
  each is masked (ties: the first); stop-words (:data:`NLTK_ENGLISH_STOPWORDS`), punctuation-only
  words, words next to a chosen mask and unranked words are never chosen, so a document may get
  fewer masks;
* when the document is longer than the proxy's context (or ``max_proxy_tokens``), only the words
  inside the proxy input are ranked (``n_words_ranked``); the query still holds the whole document;
* masks are numbered ``[Mask_1]`` .. in document order; ``spell_correction: true`` is refused.

Materials (one row per document): ``doc_id, masked_text, answers`` (original words, in mask order),
``n_masks``, ``n_words``, ``n_words_ranked``, ``n_tokens``, ``mask_word_indices``, ``mask_ranks``,
``proxy_lm``, ``proxy_lm_path``.

Query: :data:`QUERY_TEMPLATE` around the masked document; ``max_tokens`` = ``max_tokens_per_mask`` *
n_masks + 16 unless ``max_tokens`` is set; no log-probabilities.

Scores: answers are parsed tolerantly (:func:`parse_mask_answers`) and compared with the original
words after :func:`normalize_answer`.  ``mba``: #correct / n_masks (0 without masks).  ``mba/gamma``:
member iff #correct >= gamma * n_masks, gamma from ``gamma_grid`` with the best F1 on reference
documents (ties: the smallest), score = decision, the chosen gamma in column ``gamma``.  gamma is
chosen in-fold (``cv_folds``, :mod:`ragmi.attacks.folds`): a document of fold k (a reference document
by a stratified deal, an evaluation document by a hash of its doc_id) is decided by the gamma chosen
on the reference documents of the other folds (columns ``fold``, ``selection`` = "in-fold"); the paper
chooses once on the whole reference set, here each choice sees (K - 1) / K of it.

Provenance: docs/provenance.md#mba.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .base import Attack, merge_responses
from .folds import SELECTION_IN_FOLD, assign_folds
from .models import load_proxy
from .work import AttackWork

# MBA Fig. 2 simplified attack prompt; "\n" in the format spec is the two characters printed in the paper.
QUERY_TEMPLATE = (
    "Predict the answers of the masks in the given texts:\n\n{masked_document}\n\n"
    "You should strictly follow the contexts below to answer, and provide your answers in the "
    'specified format:\n"[Mask_i]: answer_i\\n" for each mask:'
)

# NLTK English stop-word list (corpora/stopwords/english, 179 words), copied as data (no download).
NLTK_ENGLISH_STOPWORDS = frozenset(
    """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've
now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split()
)

_WORD = re.compile(r"\S+")
_CORE = re.compile(r"^[\W_]*(.*?)[\W_]*$", re.DOTALL)


# --------------------------------------------------------------------------------------------
# Words and masks
# --------------------------------------------------------------------------------------------
def word_spans(text: str) -> list[tuple[int, int, int, int]]:
    """``(start, end, core_start, core_end)`` of every whitespace-separated word of ``text``; the
    core drops leading/trailing punctuation and symbols (empty core = punctuation-only word)."""
    out = []
    for m in _WORD.finditer(text):
        c = _CORE.match(m.group(0))
        cs, ce = m.start() + c.start(1), m.start() + c.end(1)
        if cs == ce:
            cs = ce = m.start()
        out.append((m.start(), m.end(), cs, ce))
    return out


def is_candidate_word(core: str) -> bool:
    """Neither punctuation-only nor an NLTK English stop-word (case-insensitive)."""
    return bool(core) and core.lower() not in NLTK_ENGLISH_STOPWORDS


def choose_masks(cores: list[str], scores, n_masks: int, n_ranked: int | None = None) -> list[int]:
    """Word indices to mask: the argmax-score candidate of each of ``n_masks`` equal subtexts of the
    first ``n_ranked`` words.  Stop-words, punctuation-only
    words, words next to an already chosen mask and words with a negative score (unranked) are never
    chosen."""
    n = len(cores) if n_ranked is None else int(n_ranked)
    scores = np.asarray(scores, dtype=float)
    chosen: list[int] = []
    taken: set[int] = set()
    if n <= 0 or n_masks <= 0:
        return chosen
    bounds = [(k * n) // n_masks for k in range(n_masks + 1)]
    for k in range(n_masks):
        best, best_score = None, -1.0
        for j in range(bounds[k], bounds[k + 1]):
            if not is_candidate_word(cores[j]) or (j - 1) in taken or (j + 1) in taken:
                continue
            if scores[j] < 0:
                continue
            if best is None or scores[j] > best_score:
                best, best_score = j, float(scores[j])
        if best is not None:
            chosen.append(best)
            taken.add(best)
    return chosen


def apply_masks(text: str, spans, chosen: list[int]) -> tuple[str, list[str]]:
    """Replace the cores of the ``chosen`` words by ``[Mask_1]``..; returns (masked text, answers)."""
    order = sorted(chosen)
    pieces, answers, pos = [], [], 0
    for i, j in enumerate(order, start=1):
        _, _, cs, ce = spans[j]
        pieces.append(text[pos:cs])
        pieces.append(f"[Mask_{i}]")
        answers.append(text[cs:ce])
        pos = ce
    pieces.append(text[pos:])
    return "".join(pieces), answers


# --------------------------------------------------------------------------------------------
# Proxy LM ranking
# --------------------------------------------------------------------------------------------
def token_ranks(model, input_ids) -> np.ndarray:
    """Rank of every token of ``input_ids`` (1-D) given its full prefix, from one forward pass.

    ``ranks[t]`` = number of vocabulary entries whose logit at position ``t-1`` is strictly larger
    than that of ``input_ids[t]``; ``ranks[0] = -1`` (no prefix)."""
    import torch

    ids = torch.as_tensor(input_ids, dtype=torch.long).reshape(1, -1).to(model.device)
    out = np.full(ids.shape[1], -1, dtype=np.int64)
    if ids.shape[1] < 2:
        return out
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, :-1]
        true = ids[0, 1:]
        for a in range(0, logits.shape[0], 256):  # bound the memory of the comparison
            lg = logits[a : a + 256]
            tv = lg.gather(1, true[a : a + 256, None])
            out[1 + a : 1 + a + lg.shape[0]] = (lg > tv).sum(dim=1).cpu().numpy()
    return out


def model_context(model, tokenizer=None) -> int | None:
    """Longest input the proxy can rank (positions), from its config (or tokenizer)."""
    cfg = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        val = getattr(cfg, key, None)
        if isinstance(val, int) and val > 0:
            return val
    val = getattr(tokenizer, "model_max_length", None)
    if isinstance(val, int) and 0 < val < 10**7:
        return val
    return None


def start_token_id(tokenizer) -> int | None:
    """The token prepended to the document, or None when the tokenizer adds its own BOS."""
    probe = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    if len(probe) > len(plain) and probe[0] != plain[0]:
        return int(probe[0])
    for tid in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    return None


def rank_words(text: str, tokenizer, model, max_tokens: int | None = None) -> dict:
    """Word scores of ``text`` (max token rank over each word's core, -1 if unranked).

    Returns ``spans``, ``cores``, ``scores`` (np.ndarray), ``n_words_ranked``, ``n_tokens`` (document
    tokens), ``token_ranks`` (per document token, -1 when unranked) and ``token_offsets``."""
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError("MBA needs a fast (Rust) tokenizer for its proxy LM: character offsets map tokens to words")
    spans = word_spans(text)
    cores = [text[cs:ce] for _, _, cs, ce in spans]
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    start = start_token_id(tokenizer)
    prefix = [] if start is None else [start]
    limit = model_context(model, tokenizer)
    if max_tokens is not None:
        limit = int(max_tokens) if limit is None else min(limit, int(max_tokens))
    full = prefix + ids
    kept = full if limit is None else full[:limit]
    ranks_in = token_ranks(model, kept) if kept else np.zeros(0, dtype=np.int64)
    n_doc_kept = len(kept) - len(prefix)  # document tokens inside the proxy input
    doc_ranks = np.full(len(ids), -1, dtype=np.int64)
    if n_doc_kept > 0:
        doc_ranks[:n_doc_kept] = ranks_in[len(prefix) :]
    scores = np.full(len(spans), -1.0)
    n_ranked = len(spans)
    starts, ends = offsets[:, 0], offsets[:, 1]
    for w, (_, _, cs, ce) in enumerate(spans):
        if cs == ce:  # punctuation-only: still check whether it is inside the proxy input
            lo = int(np.searchsorted(ends, spans[w][0], side="right"))
            hi = int(np.searchsorted(starts, spans[w][1], side="left"))
        else:
            lo = int(np.searchsorted(ends, cs, side="right"))
            hi = int(np.searchsorted(starts, ce, side="left"))
        if hi > n_doc_kept and n_ranked == len(spans):
            n_ranked = w  # first word with a token past the cap: it and all later words are unranked
        if w >= n_ranked or cs == ce:
            continue
        r = doc_ranks[lo:hi]
        r = r[r >= 0]
        if r.size:
            scores[w] = float(r.max())
    scores[n_ranked:] = -1.0
    return {
        "spans": spans,
        "cores": cores,
        "scores": scores,
        "n_words_ranked": int(n_ranked),
        "n_tokens": len(ids),
        "token_ranks": doc_ranks,
        "token_offsets": offsets,
    }


def mask_document(text: str, tokenizer, model, n_masks: int, max_tokens: int | None = None) -> dict:
    """Rank, choose and apply the masks of one document (one proxy forward pass)."""
    r = rank_words(text, tokenizer, model, max_tokens)
    chosen = choose_masks(r["cores"], r["scores"], n_masks, r["n_words_ranked"])
    masked, answers = apply_masks(text, r["spans"], chosen)
    order = sorted(chosen)
    return {
        "masked_text": masked,
        "answers": answers,
        "n_masks": len(answers),
        "n_words": len(r["spans"]),
        "n_words_ranked": r["n_words_ranked"],
        "n_tokens": r["n_tokens"],
        "mask_word_indices": order,
        "mask_ranks": [int(r["scores"][j]) for j in order],
    }


# --------------------------------------------------------------------------------------------
# Answer parsing and scoring
# --------------------------------------------------------------------------------------------
_MARKER = r"\[?\s*mask[\s_\-]*(\d+)\s*\]?"
_MASK_ANSWER = re.compile(_MARKER + r"""\s*["'`*]*\s*(?::|=>|->|=|\u2192|\u2013|\u2014|-)\s*""", re.IGNORECASE)
_ANY_MARKER = re.compile(r"""["'`*]*\s*\[?\s*mask[\s_\-]*\d+\s*\]?""", re.IGNORECASE)
_NUMBERED = re.compile(
    r"^[ \t]*(?:[-*\u2022][ \t]*)?\**[ \t]*(\d+)[ \t]*\**[ \t]*[.):][ \t]*(.*?)[ \t]*$", re.MULTILINE
)


def _clean_answer(s: str) -> str:
    return s.strip().strip("*_`\"' ,;").strip()


def parse_mask_answers(text: str) -> dict[int, str]:
    """``{mask index: answer}`` from a response, tolerant of the formats LLMs use (see module doc)."""
    text = text or ""
    out: dict[int, str] = {}
    for m in _MASK_ANSWER.finditer(text):
        idx = int(m.group(1))
        rest = text[m.end() :]
        nl = rest.find("\n")
        line = rest if nl < 0 else rest[:nl]
        nxt = _ANY_MARKER.search(line)
        ans = _clean_answer(line if nxt is None else line[: nxt.start()])
        if idx not in out:
            out[idx] = ans
    if out:
        return out
    for m in _NUMBERED.finditer(text):
        idx = int(m.group(1))
        if idx not in out:
            out[idx] = _clean_answer(m.group(2))
    return out


def normalize_answer(s: str) -> str:
    """NFKC, case-folded, punctuation and underscores removed, whitespace collapsed."""
    s = unicodedata.normalize("NFKC", str(s)).casefold()
    s = re.sub(r"[^\w\s]|_", "", s)
    return " ".join(s.split())


def count_correct(response: str, answers) -> int:
    """Number of masks ``i`` (1-based) whose parsed answer equals ``answers[i-1]`` (normalised)."""
    parsed = parse_mask_answers(response)
    n = 0
    for i, truth in enumerate(list(answers), start=1):
        options = [truth] if isinstance(truth, str) else list(truth)  # a set of accepted answers
        if i in parsed and normalize_answer(parsed[i]) in {normalize_answer(t) for t in options}:
            n += 1
    return n


def _f1(y: np.ndarray, pred: np.ndarray) -> float:
    tp = int(np.sum((pred == 1) & (y == 1)))
    fp = int(np.sum((pred == 1) & (y == 0)))
    fn = int(np.sum((pred == 0) & (y == 1)))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def gamma_decisions(fractions, gamma) -> np.ndarray:
    """Member iff correct >= gamma * M, i.e. fraction >= gamma (1e-9 absorbs 0.3*10 = 3.0000000000000004);
    ``gamma`` one value or one per row."""
    return (np.asarray(fractions, dtype=float) + 1e-9 >= gamma).astype(int)


def select_gamma(ref_fractions, ref_labels, gammas) -> tuple[float, float]:
    """(gamma, F1) with the best F1 on the reference set; ties go to the smallest gamma."""
    y = np.asarray(ref_labels, dtype=int)
    if y.size == 0 or not (y == 1).any():
        raise ValueError("MBA's gamma is chosen by F1 on reference documents, which need at least one member")
    best, best_f1 = None, -1.0
    for g in sorted(float(x) for x in gammas):
        f1 = _f1(y, gamma_decisions(ref_fractions, g))
        if f1 > best_f1 + 1e-12:
            best, best_f1 = g, f1
    return best, best_f1


# --------------------------------------------------------------------------------------------
# Attack
# --------------------------------------------------------------------------------------------
class MBA(Attack):
    name = "mba"
    needs_prepare = True
    audit_mi_rank = 5
    out_of_fold = True  # mba/gamma's gamma is chosen in-fold (cv_folds)

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What this attack sends per candidate (:mod:`ragmi.attacks.work`; ``tools/eta.py``)."""
        mt = p["max_tokens"] if p["max_tokens"] is not None else p["max_tokens_per_mask"] * p["n_masks"] + 16
        return AttackWork(1, 190 + doc_chars, 0.8 * mt, int(mt), rough=True)

    @classmethod
    def model_references(cls, params):
        return [("proxy_lm", "attacker-weights" if params["proxy_lm"] == "attacker" else "model")]

    def __init__(self, params: Mapping | None = None, **kwargs):
        super().__init__(params, **kwargs)
        if self.params["spell_correction"]:
            raise ConfigError(
                "config key attacks.mba.spell_correction: true is not supported: the paper's spell-correction "
                "model (oliverguhr/spelling-correction-english-base) is not available offline; set it to false"
            )

    def prepare(self, candidates: pd.DataFrame, tools) -> pd.DataFrame:
        p = self.params
        name = str(p["proxy_lm"])
        path = tools.local_model_path(name)
        tok, model = load_proxy(path, str(p["proxy_dtype"]), str(p["device"]))
        cap = p["max_proxy_tokens"]
        n_masks = int(p["n_masks"])
        rows = []
        for k, (doc_id, text) in enumerate(zip(candidates["doc_id"], candidates["text"])):
            r = mask_document(str(text), tok, model, n_masks, None if cap is None else int(cap))
            rows.append({"doc_id": doc_id, **r, "proxy_lm": name, "proxy_lm_path": str(path)})
            if r["n_words_ranked"] < r["n_words"]:
                tools.log(
                    f"mba: {doc_id}: proxy context holds {r['n_words_ranked']}/{r['n_words']} words; "
                    "masks chosen among those"
                )
            if (k + 1) % 100 == 0:
                tools.log(f"mba: masked {k + 1}/{len(candidates)} documents")
        return pd.DataFrame(
            rows,
            columns=[
                "doc_id",
                "masked_text",
                "answers",
                "n_masks",
                "n_words",
                "n_words_ranked",
                "n_tokens",
                "mask_word_indices",
                "mask_ranks",
                "proxy_lm",
                "proxy_lm_path",
            ],
        )

    def max_tokens_for(self, n_masks: int) -> int:
        p = self.params
        if p["max_tokens"] is not None:
            return int(p["max_tokens"])
        return int(p["max_tokens_per_mask"]) * int(n_masks) + 16

    def build_queries(self, candidates: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        if materials is None:
            raise ValueError("MBA builds its queries from the masks written by prepare (materials)")
        mat = materials.set_index("doc_id")
        missing = [d for d in candidates["doc_id"] if d not in mat.index]
        if missing:
            raise ValueError(f"MBA materials lack documents {missing[:3]}")
        rows = []
        for doc_id in candidates["doc_id"]:
            m = mat.loc[doc_id]
            n = int(m["n_masks"])
            rows.append(
                {
                    "query_id": f"{doc_id}::mba",
                    "doc_id": doc_id,
                    "user_prompt": QUERY_TEMPLATE.format(masked_document=m["masked_text"]),
                    "max_tokens": self.max_tokens_for(n),
                    "top_logprobs": 0,
                    "answers": [str(a) for a in m["answers"]],
                    "n_masks": n,
                }
            )
        return pd.DataFrame(rows)

    def crossfit_gamma(self, fractions, doc_ids, reference_labels: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """(gamma, fold) per row, cross-fitted (ragmi.attacks.folds): the rows of fold k get the gamma
        with the best F1 on the reference rows of the other folds (:func:`select_gamma`)."""
        k_folds = int(self.params["cv_folds"])
        fold, is_ref, y_ref = assign_folds(doc_ids, reference_labels, k_folds, self.seed, "mba/gamma", "MBA's gamma")
        y = np.zeros(len(fold), dtype=int)
        y[is_ref] = y_ref
        frac = np.asarray(fractions, dtype=float)
        gamma = np.zeros(len(fold))
        for k in range(k_folds):
            train, test = is_ref & (fold != k), fold == k
            if test.any():
                gamma[test] = select_gamma(frac[train], y[train], self.params["gamma_grid"])[0]
        return gamma, fold

    def score(self, queries, responses, reference_labels: Mapping[str, int], materials=None, tools=None):
        df = merge_responses(queries, responses)
        if "answers" not in df.columns:
            if materials is None:
                raise ValueError("MBA scoring needs the mask answers (queries column 'answers' or materials)")
            df = df.merge(materials[["doc_id", "answers", "n_masks"]], on="doc_id", how="left")
        correct = np.array([count_correct(r, a) for r, a in zip(df["response_text"], df["answers"])], dtype=int)
        n_masks = np.array([len(a) for a in df["answers"]], dtype=int)
        frac = np.where(n_masks > 0, correct / np.maximum(n_masks, 1), 0.0)
        no_answer = np.array([not parse_mask_answers(r) for r in df["response_text"]])
        base = {"doc_id": df["doc_id"].to_numpy(), "n_correct": correct, "n_masks": n_masks, "no_answer": no_answer}
        out = [pd.DataFrame({**base, "variant": "mba", "score": frac, "decision": pd.NA})]

        gamma, fold = self.crossfit_gamma(frac, df["doc_id"].tolist(), reference_labels)
        dec = gamma_decisions(frac, gamma)
        out.append(
            pd.DataFrame(
                {
                    **base,
                    "variant": "mba/gamma",
                    "score": dec.astype(float),
                    "decision": dec,
                    "gamma": gamma,
                    "fold": fold,
                    "selection": SELECTION_IN_FOLD,
                }
            )
        )
        res = pd.concat(out, ignore_index=True)
        cols = ["doc_id", "variant", "score", "decision"]
        return res[cols + [c for c in res.columns if c not in cols]]


__all__ = [
    "MBA",
    "QUERY_TEMPLATE",
    "NLTK_ENGLISH_STOPWORDS",
    "parse_mask_answers",
    "count_correct",
    "select_gamma",
    "choose_masks",
    "rank_words",
    "token_ranks",
    "mask_document",
]
