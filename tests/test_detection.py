"""Detector verdicts persisted per query and the detection metrics of MEntA Tables 7-8."""

import json

import numpy as np
import pandas as pd
import pytest
from test_hooks_audit import DOCS, EchoGenerator, OverlapRetriever

from ragmi.audit.detection import detection_rates, detector_flags, wilson
from ragmi.defenses import build_defense
from ragmi.rag.system import RAGSystem
from ragmi.rag.templates import get_template


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


# --- benign queries, flags files and the detection table -------------------------------------


def _corpus():
    from ragmi.datasets.synthetic import generate

    return generate(200, 0, "compact")


def test_benign_queries_deterministic_topical_and_not_verbatim():
    from ragmi.audit.detection import MAX_SHARED_WORDS, _longest_shared_run, benign_queries

    corpus = _corpus()
    q = benign_queries(corpus, 40, seed=7)
    assert len(q) == 40 and q["query_id"].is_unique
    pd.testing.assert_frame_equal(q, benign_queries(corpus, 40, seed=7))
    assert not q["user_prompt"].equals(benign_queries(corpus, 40, seed=8)["user_prompt"])
    text = dict(zip(corpus["doc_id"], corpus["text"]))
    for _, r in q.iterrows():
        assert r["user_prompt"].endswith("?")
        assert _longest_shared_run(r["user_prompt"], text[r["source_doc_id"]]) <= MAX_SHARED_WORDS
        assert not any(ch.isdigit() for ch in r["user_prompt"]) and "@" not in r["user_prompt"]
    # no person name or e-mail address of the corpus reaches a query
    names = {w.strip("?,.:").lower() for t in corpus["text"] for w in t.split()[1:] if w[:1].isupper()}
    topics = {w.strip("?,.") for p in q["user_prompt"] for w in p.split()[1:] if w.islower()}
    assert not topics & (names - {"i", "doctor", "patient"})
    with pytest.raises(ValueError):
        benign_queries(corpus.head(3), 40, seed=7)


def test_longest_shared_run():
    from ragmi.audit.detection import _longest_shared_run

    assert _longest_shared_run("what is the knee pain here", "I have knee pain here daily") == 3
    assert _longest_shared_run("nothing", "") == 0


def _responses(qids, flags):
    trace = [json.dumps([{"defense": "mirabel", "hook": "retrieval", "flagged": f}]) for f in flags]
    return pd.DataFrame({"query_id": qids, "hook_trace": trace})


def test_flags_files_and_detection_frame_from_recorded_frames():
    from ragmi.audit.detection import BENIGN, FLAG_COLUMNS, attack_flags, benign_flags, detection_frame

    queries = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "doc_id": ["m1", "m1", "n1", "n2"]})
    a = attack_flags("rag_mia", queries, _responses(["q1", "q2", "q3", "q4"], [True, True, True, False]), ["m1"])
    assert list(a.columns) == FLAG_COLUMNS and list(a["label"]) == [1, 1, 0, 0]
    # a query refused before the detector: no verdict, left out
    refused = pd.DataFrame({"query_id": ["x"], "hook_trace": [json.dumps([{"defense": "input", "hook": "query"}])]})
    assert attack_flags("rag_mia", queries.head(1).assign(query_id="x"), refused, ["m1"]).empty
    b = benign_flags(_responses([f"benign-{i}" for i in range(4)], [True, False, False, False]))
    assert set(b["attack"]) == {BENIGN} and (b["label"] == 0).all()
    flags = pd.concat([a, b], ignore_index=True).assign(dataset="syn", target="mir")
    df = detection_frame(flags).set_index("labelling")
    pos = df.loc["non-member attack queries positive"]
    assert (pos["recall"], pos["n_attack"], pos["fpr"], pos["n_benign"]) == (0.75, 4, 0.25, 4)
    neg = df.loc["non-member attack queries negative"]
    assert (neg["recall"], neg["n_attack"], neg["fpr"], neg["n_benign"]) == (1.0, 2, 2 / 6, 6)
    assert pos["recall [95% CI]"].startswith("0.750 [") and set(df["attack"]) == {"rag_mia"}
    assert detection_frame(flags[flags["attack"] == BENIGN]).empty


T = {"kind": "rag", "control": "none", "database": "members", "framework": "standard"}  # a validated target's defaults


def test_detection_table_registered_and_built_only_with_an_attacked_detector(tmp_path):
    from ragmi.audit.detection import benign_flags, detection_files
    from ragmi.report import registry

    cfg = {
        "datasets": {"syn": {}},
        "attacks": {"rag_mia": {}},
        "defenses": {"mirabel": {"kind": "mirabel"}, "pad": {"kind": "pad"}},
        "targets": {
            "plain": {**T, "defenses": []},
            "pad": {**T, "defenses": ["pad"]},
            "probes": {**T, "defenses": ["mirabel"], "attacks": []},
        },
    }
    table = registry.TABLES["detection"]
    assert not registry.built(table, cfg)  # Mirabel only on a target that runs no attack
    cfg["targets"]["mir"] = {**T, "defenses": ["mirabel", "pad"]}
    assert detection_files(cfg) == ["results/audit/syn/mir/detection.parquet"] and registry.built(table, cfg)
    f = tmp_path / "detection.parquet"
    b = benign_flags(_responses(["b1", "b2"], [False, True])).assign(dataset="syn", target="mir")
    queries = pd.DataFrame({"query_id": ["q1"], "doc_id": ["m1"]})
    from ragmi.audit.detection import attack_flags

    a = attack_flags("rag_mia", queries, _responses(["q1"], [True]), ["m1"]).assign(dataset="syn", target="mir")
    pd.concat([a, b], ignore_index=True).to_parquet(f)
    out_csv, out_md = tmp_path / "detection.csv", tmp_path / "detection.md"
    df = registry.write_table(table, {"flags": [str(f)]}, cfg, str(out_csv), str(out_md))
    assert len(df) == 2 and set(df["defense"]) == {"mirabel"}
    md = out_md.read_text()
    assert "MEntA Tables 7-8" in md and "FPR [95% CI]" in md
