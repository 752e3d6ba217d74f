"""Detector verdicts persisted per query and the detection metrics of MEntA Tables 7-8."""

import json

import numpy as np
import pandas as pd
import pytest
from test_hooks_audit import DOCS, EchoGenerator, OverlapRetriever

from ragmi.audit.detection import detection_rates, detector_flags, wilson
from ragmi.defenses import build_defense
from ragmi.target.rag import RAGSystem
from ragmi.target.templates import get_template


def test_mirabel_verdicts_reach_the_hook_trace():
    d = build_defense("mirabel", {"kind": "mirabel"})
    r = RAGSystem(OverlapRetriever(DOCS), DOCS, get_template("rag_mia"), EchoGenerator(), k=2, seed=1, defenses=[d])
    queries = [DOCS["d3"], "nothing in common here"]
    out = pd.DataFrame(r.answer(queries, [5, 5], [0, 0], ["a", "b"]))
    flags = detector_flags(out.assign(query_id=["a", "b"]))
    assert list(flags["query_id"]) == ["a", "b"] and set(flags["defense"]) == {"mirabel"}
    assert flags.set_index("query_id")["flagged"].to_dict() == d.flags
    assert json.loads(out["hook_trace"].iloc[0])[0]["flagged"] == d.flags["a"]


def test_detection_rates_both_labellings():
    attack = pd.DataFrame(
        {"defense": "m", "flagged": [True, True, True, False], "label": [1, 1, 0, 0], "query_id": list("abcd")}
    )
    benign = pd.DataFrame({"defense": "m", "flagged": [True, False, False, False], "query_id": list("wxyz")})
    pos = detection_rates(attack, benign, "positive").iloc[0]
    assert (pos["recall"], pos["n_attack"], pos["fpr"], pos["n_benign"]) == (0.75, 4, 0.25, 4)
    neg = detection_rates(attack, benign, "negative").iloc[0]
    assert (neg["recall"], neg["n_attack"], neg["fpr"], neg["n_benign"]) == (1.0, 2, 2 / 6, 6)
    assert neg["recall_lo"] < 1.0 == neg["recall_hi"]
    with pytest.raises(ValueError):
        detection_rates(attack, benign, "both")


def test_wilson_interval_by_hand():
    # k = 0: upper bound z^2 / (n + z^2)
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(1.959963984540054**2 / (10 + 1.959963984540054**2))
    lo, hi = wilson(50, 100)
    assert (lo + hi) / 2 == pytest.approx(0.5) and hi - lo == pytest.approx(2 * 0.0960, abs=2e-3)
    assert np.isnan(wilson(0, 0)[0])
