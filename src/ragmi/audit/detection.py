"""Detection metrics of the query-level detectors (Mirabel, the LLM detector): recall on attack
queries and false-positive rate on benign queries, per (detector, attack, dataset), as MEntA
Tables 7 and 8 report them (docs/provenance.md#mirabel, #llm_detector).

The detectors decide per query; the target writes each verdict into the response's hook trace
(``flagged`` of the detector's entry, ``ragmi.target.rag.RAGSystem.run_hook``), and
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

import pandas as pd

LABELLINGS = ("positive", "negative")
Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes out of ``n`` (NaN, NaN when n = 0)."""
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, centre - half), min(1.0, centre + half)


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
