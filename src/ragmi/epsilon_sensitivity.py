"""The sensitivity Δ of a DP retrieval defense, measured on the target's real retriever.

DP-R, CA-DP and Private-RAG (``ragmi/defenses/dp_retrieval.py``, ``ca_dp.py``, ``private_rag.py``) add
i.i.d. Laplace noise of scale Δ/ε to the ``m`` retrieval scores of one query's candidates (DP-R and
CA-DP: the first ``pool`` of the pool; Private-RAG: the top k) and declare Δ as a parameter.  The
Laplace mechanism on a vector of m numbers is ε-DP between input vectors at most Δ apart in L1 norm
(Dwork & Roth, "The Algorithmic Foundations of Differential Privacy", FnT-TCS 2014, Thm 3.6), so the
norm that matters is L1 over the m noised coordinates.

What the hook sees is positional: the candidates' scores best first.  Between the database D and D
with one document x removed, the first m scores of a query change as follows (a dense flat index: a
document's score depends on the query and that document only): when x ranks r < m, every score below
it moves up one place and the (m+1)-th enters, so the positional difference is s_i - s_{i+1} for
i = r .. m-1, L1 = s_r - s_m (a telescoping sum), L∞ its largest gap; when x ranks m or lower nothing
changes.  Adding a document y of score a that ranks r < m among D's scores is the mirror image:
L1 = a - s_{m-1}.  :func:`pool_changes` computes both for every (query, document) at once,
:func:`measure` takes the maximum and the pair (D, neighbour) that realises it, which the audit then
feeds to the defense's own hook (:func:`ragmi.epsilon_audit.vector_trial`).

The measurement is a maximum over the queries and documents tried, a lower bound on the true
sensitivity (another query or document may move the scores more), never a certificate.  A BM25
index's scores depend on the whole corpus (IDF, mean length), so removing one document moves every
score; this module measures dense flat indexes only and says so for others (:data:`NOT_MEASURED`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

NORM_L1 = "L1"
NOT_MEASURED = "not measured: the retriever's scores are not a per-document function (only dense flat indexes)"

# One row per (dataset, target, defense) of the rule's parquet
SENSITIVITY_COLUMNS = [
    "dataset",
    "target",
    "defense",
    "noised",  # m: the coordinates the defense noises
    "norm",
    "delta_measured",
    "delta_linf",
    "change",  # "removed" or "added": which neighbour realises the maximum
    "query_id",
    "doc_id",
    "scores_d",  # the m scores of D (positional, best first)
    "scores_neighbour",  # the m scores of the neighbour
    "n_queries",
    "n_docs",  # documents tried (database documents removed + outside documents added)
    "n_pairs",  # (query, document) pairs whose neighbour changes the m scores
    "turns",  # T: the most queries one attack sends about one candidate (None: no attack queries)
    "note",
]


def pool_changes(scores: np.ndarray, added: np.ndarray | None, m: int) -> dict:
    """Every neighbour's change of the first ``m`` positional scores, vectorised.

    ``scores``: (queries × database documents) scores; ``added``: (queries × outside documents) scores of
    documents that could be added (None: removal only).  Returns arrays ``top`` (queries × m+1, D's
    best first), ``order`` (their database columns), and per change ``removed`` / ``added``: ``l1``,
    ``linf`` (queries × documents; 0 where the change leaves the m scores alone) and ``rank``."""
    s = np.asarray(scores, dtype=float)
    q, n = s.shape
    if n < 2:
        raise ValueError(f"a database of {n} documents has no neighbour that keeps a candidate")
    m = min(int(m), n - 1)
    order = np.argsort(-s, axis=1, kind="stable")[:, : m + 1]
    top = np.take_along_axis(s, order, axis=1)
    gaps = top[:, :-1] - top[:, 1:]  # (q, m): s_i - s_{i+1}, i < m
    # removing the document of rank r < m: L1 = s_r - s_m, L∞ = max gap from r on
    suffix_max = np.maximum.accumulate(gaps[:, ::-1], axis=1)[:, ::-1]
    rem_l1 = np.zeros((q, n))
    rem_linf = np.zeros((q, n))
    rem_rank = np.full((q, n), -1)
    rows = np.repeat(np.arange(q), m)
    cols = order[:, :m].reshape(-1)
    rem_l1[rows, cols] = (top[:, :m] - top[:, [m]]).reshape(-1)
    rem_linf[rows, cols] = suffix_max.reshape(-1)
    rem_rank[rows, cols] = np.tile(np.arange(m), q)
    out = {"top": top, "order": order, "m": m, "removed": {"l1": rem_l1, "linf": rem_linf, "rank": rem_rank}}
    if added is not None and np.size(added):
        a = np.asarray(added, dtype=float)
        head = top[:, :m]
        rank = (head[:, None, :] >= a[:, :, None]).sum(axis=2)  # (q, k): the place a takes among D's first m
        inside = rank < m
        add_l1 = np.where(inside, a - head[:, [m - 1]], 0.0)
        # L∞: a - s_r at its place, then the gaps s_{i-1} - s_i below it (i = r+1 .. m-1)
        g = np.concatenate([gaps[:, : m - 1], np.zeros((q, 1))], axis=1)  # gap i pairs s_i with s_{i+1}
        g_suffix = np.maximum.accumulate(g[:, ::-1], axis=1)[:, ::-1]  # max over gaps i >= r
        r_clip = np.minimum(rank, m - 1)
        at = a - np.take_along_axis(head, r_clip, axis=1)
        below = np.take_along_axis(g_suffix, r_clip, axis=1)
        add_linf = np.where(inside, np.maximum(at, below), 0.0)
        out["added"] = {"l1": add_l1, "linf": add_linf, "rank": np.where(inside, rank, -1)}
    return out


def neighbour_scores(top_row: np.ndarray, m: int, change: str, rank: int, score: float | None = None) -> np.ndarray:
    """The m positional scores of the neighbour: ``top_row`` (D's first m+1) without its rank-``rank``
    document (``removed``), or with a document of ``score`` placed at ``rank`` (``added``)."""
    t = np.asarray(top_row, dtype=float)
    if change == "removed":
        return np.delete(t, rank)[:m]
    return np.insert(t[:m], rank, float(score))[:m]


def measure(
    scores: np.ndarray,
    added: np.ndarray | None,
    m: int,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    added_ids: Sequence[str] = (),
) -> dict:
    """The largest L1 change of the first ``m`` scores over every query and neighbour
    (:func:`pool_changes`), with the pair that realises it: ``delta_measured``, ``delta_linf`` (the
    largest per-coordinate change over the same neighbours), ``change``, ``query_id``, ``doc_id``,
    ``scores_d``, ``scores_neighbour`` (each m long), ``noised`` (m, at most the database size minus
    one), ``n_queries``, ``n_docs``, ``n_pairs``, ``norm``."""
    c = pool_changes(scores, added, m)
    m = c["m"]
    best = None
    n_pairs = 0
    linf = 0.0
    for change, ids in (("removed", list(doc_ids)), ("added", list(added_ids))):
        if change not in c:
            continue
        l1 = c[change]["l1"]
        n_pairs += int((l1 > 0).sum())
        linf = max(linf, float(c[change]["linf"].max(initial=0.0)))
        qi, di = np.unravel_index(int(np.argmax(l1)), l1.shape)
        if best is None or l1[qi, di] > best[0]:
            best = (float(l1[qi, di]), change, qi, di, ids[di])
    value, change, qi, di, doc = best
    top = c["top"][qi]
    rank = int(c[change]["rank"][qi, di])
    if rank < 0:  # no neighbour changes anything (every score tied): D is its own neighbour
        pair = top[:m]
    else:
        extra = None if change == "removed" else float(np.asarray(added, dtype=float)[qi, di])
        pair = neighbour_scores(top, m, change, rank, extra)
    return {
        "noised": m,
        "norm": NORM_L1,
        "delta_measured": value,
        "delta_linf": linf,
        "change": change,
        "query_id": str(list(query_ids)[qi]),
        "doc_id": str(doc),
        "scores_d": [float(x) for x in top[:m]],
        "scores_neighbour": [float(x) for x in pair],
        "n_queries": int(np.shape(scores)[0]),
        "n_docs": int(np.shape(scores)[1]) + (int(np.shape(added)[1]) if added is not None else 0),
        "n_pairs": n_pairs,
    }


def noised_coordinates(defense, k: int) -> int | None:
    """How many candidate scores a defense's Laplace noise covers: DP-R and CA-DP the first ``pool``
    of the pool (``_common.noisy_top_k``), Private-RAG the retrieved top ``k``; None for another."""
    from .defenses.dp_retrieval import DpRetrieval
    from .defenses.private_rag import PrivateRag

    if isinstance(defense, DpRetrieval):
        return int(defense.params["pool"])
    if isinstance(defense, PrivateRag):
        return int(k)
    return None


def outside_scores(retriever, queries_vec: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """Scores, on the retriever's scale, of documents outside its database (``texts`` as the database
    would hold them), for the embedded queries ``queries_vec``."""
    from .rag.index import text_prefixes

    _q, passage = text_prefixes(retriever.spec)
    x = retriever.embedder.encode([passage + t for t in texts], normalize=retriever.meta["normalized"])
    x = np.asarray(x, dtype=np.float64)
    q = np.asarray(queries_vec, dtype=np.float64)
    if retriever.meta["index"] == "flat_l2":
        return -((q * q).sum(1)[:, None] + (x * x).sum(1)[None, :] - 2 * q @ x.T)
    return q @ x.T


def attack_turns(query_frames: Sequence[pd.DataFrame]) -> int | None:
    """T: the most queries any one attack sends about one candidate
    (:func:`ragmi.defenses.ca_dp.queries_per_candidate` of each attack's query file, the largest); None
    without a query file that names its candidates."""
    from .defenses.ca_dp import queries_per_candidate

    ts = [queries_per_candidate(q) for q in query_frames if len(q) and "doc_id" in q.columns]
    return max(ts) if ts else None


def measure_target(
    retriever,
    queries: pd.DataFrame,
    outside: pd.DataFrame,
    defenses: dict,
    k: int,
    with_titles: bool,
    max_queries: int,
    max_added: int,
    turns: int | None = None,
) -> list[dict]:
    """One :func:`measure` per DP defense of a target (``defenses``: {name: built defense}): the
    attacks' queries (``queries``: ``query_id`` and ``user_prompt``, what the target retrieves with;
    the first ``max_queries`` distinct ones) scored against every database document (removal) and against the
    first ``max_added`` of ``outside`` (``doc_id``, ``text``, optionally ``title``: documents that
    could be added); ``turns``: T, the most queries one attack sends about one candidate
    (:func:`attack_turns`), carried into every row.  A retriever without whole-database scores gets a row
    with :data:`NOT_MEASURED`."""
    from .rag.index import database_texts

    q = queries.drop_duplicates("user_prompt").head(int(max_queries))
    rows = []
    dense_flat = retriever.meta["kind"] == "dense" and retriever.meta["index"] in ("flat_ip", "flat_l2")
    if dense_flat and len(q):
        s = np.vstack(retriever.all_scores(q["user_prompt"].astype(str).tolist()))
        out = outside.head(int(max_added))
        added = None
        if len(out):
            added = outside_scores(
                retriever,
                retriever.embed_queries(q["user_prompt"].astype(str).tolist()),
                database_texts(out, with_titles),
            )
    for name, d in sorted(defenses.items()):
        m = noised_coordinates(d, k)
        if m is None:
            continue
        row = {"defense": name, "turns": turns, "note": ""}
        if not dense_flat or not len(q):
            row.update(noised=m, norm=NORM_L1, n_queries=len(q), n_docs=0, n_pairs=0)
            row["note"] = NOT_MEASURED if not dense_flat else "not measured: no attack query reaches this target"
        else:
            ids = out["doc_id"].astype(str).tolist() if added is not None else ()
            row.update(measure(s, added, m, q["query_id"].astype(str).tolist(), retriever.ids, ids))
        rows.append(row)
    return rows
