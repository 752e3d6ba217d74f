"""Detection metrics of the query-level detectors (Mirabel, the LLM detector): recall on attack
queries and false-positive rate on benign queries, per (detector, attack, dataset), as MEntA
Tables 7 and 8 report them (docs/provenance.md#mirabel, #llm_detector).

The detectors decide per query; the target writes each verdict into the response's hook trace
(``flagged`` of the detector's entry, ``ragmi.rag.system.RAGSystem.run_hook``), and
:func:`detector_flags` reads them back.  A query the detector never saw (refused by an earlier
defense) has no verdict and is left out.

Two labellings of an attack query about a *non-member* candidate are used by the two papers:

* ``nonmember_attack="positive"`` (MEntA Table 7): every attack query is an attack, whatever the
  candidate; recall is over all attack queries;
* ``nonmember_attack="negative"`` (Mirabel, Choi et al.): only queries about member documents are
  to be caught — a query about a non-member has no member to reveal and counts with the benign
  queries as a negative.

Intervals: 95% Wilson score intervals of each proportion (queries as the unit).
"""

from __future__ import annotations

import json
import math
import random
import re

import pandas as pd

from ..defenses import defense_class
from ..metrics import wilson

LABELLINGS = ("positive", "negative")


def detector_flags(responses: pd.DataFrame) -> pd.DataFrame:
    """One row per (query, detector) with a verdict: query_id, defense, flagged."""
    rows = []
    for qid, trace in zip(responses["query_id"], responses["hook_trace"]):
        for t in json.loads(trace) if isinstance(trace, str) else trace:
            if "flagged" in t:
                rows.append({"query_id": str(qid), "defense": t["defense"], "flagged": bool(t["flagged"])})
    return pd.DataFrame(rows, columns=["query_id", "defense", "flagged"])


def detection_rates(attack: pd.DataFrame, benign: pd.DataFrame, nonmember_attack: str = "positive") -> pd.DataFrame:
    """Per detector: recall on the attack queries and FPR on the negatives, with Wilson intervals.

    ``attack``: flags of the attack queries with a ``label`` column (1: the query's candidate is a
    member, 0: a non-member); ``benign``: flags of the benign queries.  ``nonmember_attack`` picks
    the labelling (module docstring)."""
    if nonmember_attack not in LABELLINGS:
        raise ValueError(f"nonmember_attack must be one of {LABELLINGS}, got {nonmember_attack!r}")
    out = []
    for d in sorted(set(attack["defense"]) | set(benign["defense"])):
        a, b = attack[attack["defense"] == d], benign[benign["defense"] == d]
        if nonmember_attack == "positive":
            pos, neg = a, b
        else:
            pos = a[a["label"].astype(int) == 1]
            neg = pd.concat([b, a[a["label"].astype(int) == 0]], ignore_index=True)
        kp, np_ = int(pos["flagged"].sum()), len(pos)
        kn, nn = int(neg["flagged"].sum()), len(neg)
        r_lo, r_hi = wilson(kp, np_)
        f_lo, f_hi = wilson(kn, nn)
        out.append(
            {
                "defense": d,
                "labelling": f"non-member attack queries {nonmember_attack}",
                "recall": kp / np_ if np_ else float("nan"),
                "recall_lo": r_lo,
                "recall_hi": r_hi,
                "n_attack": np_,
                "fpr": kn / nn if nn else float("nan"),
                "fpr_lo": f_lo,
                "fpr_hi": f_hi,
                "n_benign": nn,
            }
        )
    return pd.DataFrame(out)


# --- what a configuration runs ------------------------------------------------------------------

BENIGN = "benign"  # the ``attack`` of the benign queries' flags
BENIGN_MAX_TOKENS = 16  # the detectors decide before generation; the answers are not read


def detector_defenses(cfg, target: str) -> list[str]:
    """The defenses of ``target`` that decide per query (their class's ``detector``: Mirabel, the LLM
    detector)."""
    return [d for d in cfg["targets"][target]["defenses"] if defense_class(cfg["defenses"][d]["kind"]).detector]


def detection_pairs(cfg) -> list[tuple[str, str]]:
    """(dataset, target) of every local target with a detector that runs at least one attack on the
    dataset: the benign queries are sent to those, and their attack responses hold the flags."""
    from ..plan import runs
    from ..targets import own_pipeline

    return sorted(
        {(d, t) for d, t, _ in runs(cfg) if detector_defenses(cfg, t) and not own_pipeline(cfg["targets"][t])}
    )


def detection_files(cfg) -> list[str]:
    return [f"results/audit/{d}/{t}/detection.parquet" for d, t in detection_pairs(cfg)]


# --- benign queries -----------------------------------------------------------------------------

_STOP = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers him his how i if in into is it its itself just me more most my no nor
    not now of off on once only or other our out over own same she should so some such than that the
    their them then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours patient doctor hello thanks thank
    please dear sir madam regards take also since last days weeks months years year week day month
    times time today yesterday every like feel feeling felt getting get got really much many well still
    sometimes often usually always never again ever already shall might must need needs used using use""".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_TEMPLATES_ONE = (
    "What is {a}?",
    "Can you explain {a} in simple terms?",
    "What are the main causes of {a}?",
    "What should I know about {a}?",
    "How is {a} usually dealt with?",
    "What are the latest findings on {a}?",
)
_TEMPLATES_TWO = (
    "How are {a} and {b} related?",
    "Is {a} linked to {b}?",
    "What is the difference between {a} and {b}?",
    "Can you give an overview of {a} and {b}?",
)
MAX_SHARED_WORDS = 3  # a benign query shares no run of more than 3 words with its source document


def _words(text: str) -> list[str]:
    return _WORD.findall(text or "")


def _topics(text: str) -> list[str]:
    """The topic candidates of one document: lower-case content words and adjacent pairs of them
    (a word that is ever capitalised mid-sentence in the document — a name, a city — is left out,
    as is every token with a digit or an @, which the word pattern never matches)."""
    words = _words(text)
    proper = {w.lower() for i, w in enumerate(words) if w[0].isupper() and i > 0}
    ok = [
        w.lower() if (w.islower() and w.lower() not in _STOP and w.lower() not in proper and len(w) >= 4) else None
        for w in words
    ]
    uni = [w for w in ok if w]
    bi = [f"{a} {b}" for a, b in zip(ok, ok[1:]) if a and b and a != b]
    return uni + bi


def _longest_shared_run(query: str, text: str) -> int:
    q, t = [w.lower() for w in _words(query)], [w.lower() for w in _words(text)]
    best, prev = 0, [0] * (len(t) + 1)
    for qi in q:
        cur = [0] * (len(t) + 1)
        for j, tj in enumerate(t, 1):
            if qi == tj:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def benign_queries(corpus: pd.DataFrame, n: int, seed: int, max_tokens: int = BENIGN_MAX_TOKENS) -> pd.DataFrame:
    """``n`` ordinary information-seeking questions about the corpus's topics, deterministic in
    (corpus, n, seed).

    MEntA (App. C.1, Tables 7-8) takes its benign queries from the BEIR query sets of its corpora:
    real users' questions about the corpus's topics, not about one document's wording.  The datasets
    here have no such query set, so each benign query names one or two *topics* of a document drawn
    at random: the document's most distinctive content words or word pairs (frequent in the
    document, found in between 2 documents and 10% of the corpus, so neither a one-off detail nor
    filler), set in a neutral question template.  No name, number or address reaches a query, and a
    query shares no run of more than :data:`MAX_SHARED_WORDS` words with its source document.
    """
    docs = corpus.sort_values("doc_id", kind="stable").reset_index(drop=True)
    texts = [f"{ti or ''}. {tx or ''}" for ti, tx in zip(docs.get("title", [""] * len(docs)), docs["text"])]
    per_doc = [_topics(t) for t in texts]
    df: dict[str, int] = {}
    for tops in per_doc:
        for w in set(tops):
            df[w] = df.get(w, 0) + 1
    hi = max(2, int(0.10 * len(docs)))
    rng = random.Random(f"benign-queries:{seed}")
    order = list(range(len(docs)))
    rng.shuffle(order)
    rows: list[dict] = []
    for i in order:
        if len(rows) >= n:
            break
        tf: dict[str, int] = {}
        for w in per_doc[i]:
            tf[w] = tf.get(w, 0) + 1
        cands = [w for w in tf if 2 <= df[w] <= hi]
        if not cands:
            continue
        # tf-idf, word pairs preferred (a pair names a topic better than one word); ties by the word
        score = {w: (" " in w, tf[w] * math.log(len(docs) / df[w])) for w in cands}
        ranked = sorted(cands, key=lambda w: (score[w], w), reverse=True)[:4]
        a = ranked[0]
        others = [w for w in ranked[1:] if not set(w.split()) & set(a.split())]
        if others and rng.random() < 0.4:
            query = rng.choice(_TEMPLATES_TWO).format(a=a, b=others[0])
        else:
            query = rng.choice(_TEMPLATES_ONE).format(a=a)
        if _longest_shared_run(query, texts[i]) > MAX_SHARED_WORDS:
            continue
        rows.append(
            {
                "query_id": f"benign-{len(rows):05d}",
                "user_prompt": query,
                "max_tokens": int(max_tokens),
                "top_logprobs": 0,
                "source_doc_id": str(docs["doc_id"].iloc[i]),
            }
        )
    if len(rows) < n:
        raise ValueError(f"only {len(rows)} benign queries from {len(docs)} documents, {n} asked for")
    return pd.DataFrame(rows, columns=["query_id", "user_prompt", "max_tokens", "top_logprobs", "source_doc_id"])


# --- flags of one target ------------------------------------------------------------------------

FLAG_COLUMNS = ["attack", "query_id", "doc_id", "label", "defense", "flagged"]


def attack_flags(attack: str, queries: pd.DataFrame, responses: pd.DataFrame, member_ids) -> pd.DataFrame:
    """The flags of one attack's responses, each with its candidate (``doc_id``) and ``label`` (1: the
    candidate is a member of the target's database split, 0: a non-member)."""
    f = detector_flags(responses)
    cand = dict(zip(queries["query_id"].astype(str), queries["doc_id"].astype(str)))
    members = {str(m) for m in member_ids}
    f["doc_id"] = f["query_id"].map(cand)
    f["label"] = f["doc_id"].map(lambda d: int(d in members))
    f["attack"] = attack
    return f[FLAG_COLUMNS]


def benign_flags(responses: pd.DataFrame) -> pd.DataFrame:
    f = detector_flags(responses)
    return f.assign(attack=BENIGN, doc_id=None, label=0)[FLAG_COLUMNS]


# --- the detection table ------------------------------------------------------------------------


def _cell(p: float, lo: float, hi: float) -> str:
    return "—" if math.isnan(p) else f"{p:.3f} [{lo:.3f}, {hi:.3f}]"


def detection_frame(flags: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, target, defense, attack, labelling) from the flags files of
    :func:`detection_files` (columns ``dataset``, ``target`` and :data:`FLAG_COLUMNS`): recall on the
    attack's queries and FPR on the target's benign queries (with, under the ``negative`` labelling,
    the attack's non-member queries), each with its Wilson 95% interval."""
    out = []
    for (dataset, target), g in flags.groupby(["dataset", "target"], sort=True):
        benign = g[g["attack"] == BENIGN]
        for attack in sorted(set(g["attack"]) - {BENIGN}):
            a = g[g["attack"] == attack]
            for lab in LABELLINGS:
                r = detection_rates(a, benign, lab)
                r.insert(0, "attack", attack)
                r.insert(0, "target", target)
                r.insert(0, "dataset", dataset)
                out.append(r)
    cols = ["dataset", "target", "defense", "attack", "labelling", "n_attack", "recall", "recall_lo", "recall_hi"]
    cols += ["n_benign", "fpr", "fpr_lo", "fpr_hi"]
    if not out:
        return pd.DataFrame(columns=cols + ["recall [95% CI]", "FPR [95% CI]"])
    df = pd.concat(out, ignore_index=True)[cols]
    df["recall [95% CI]"] = [_cell(*x) for x in zip(df["recall"], df["recall_lo"], df["recall_hi"])]
    df["FPR [95% CI]"] = [_cell(*x) for x in zip(df["fpr"], df["fpr_lo"], df["fpr_hi"])]
    return df
