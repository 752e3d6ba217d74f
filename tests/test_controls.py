"""Negative controls: the null-database and k = 0 targets derived from every undefended target, the
null database itself, and the comparison table's control columns and flag."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.report.comparison import attach_controls
from ragmi.split import null_database, split_corpus

BASE = yaml.safe_load(open("config/config.yaml"))


def test_control_targets_are_derived_for_undefended_targets_only():
    c = copy.deepcopy(BASE)
    c["controls"] = {"null_database": True, "no_retrieval": True, "attacks": ["rag_mia"]}
    v = validate_config(c)
    assert v["targets"]["qwen-rag--null-db"]["database"] == "null_control"
    assert v["targets"]["qwen-rag--no-retrieval"]["k"] == 0
    assert v["targets"]["qwen-rag--no-retrieval"]["attacks"] == ["rag_mia"]
    assert not any(t.startswith(("pad--", "lprag--", "probe-")) and "--" in t for t in v["targets"])
    assert validate_config(v)["targets"].keys() == v["targets"].keys()  # idempotent


def test_unknown_control_attack():
    c = copy.deepcopy(BASE)
    c["controls"] = {"null_database": True, "attacks": ["nope"]}
    with pytest.raises(ConfigError, match="controls.attacks.0"):
        validate_config(c)


def test_null_database_holds_no_candidate_and_keeps_the_size():
    corpus = pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(100)],
            "text": [f"text {i}" for i in range(100)],
            "title": "",
            "human_turn": "",
        }
    )
    members, nonmembers, candidates, _ = split_corpus(corpus, 0.8, 3, 4, seed=1)
    db = null_database(members, nonmembers, candidates, seed=1)
    assert len(db) == len(members)
    assert not set(db["doc_id"]) & set(candidates["doc_id"])
    assert len(set(db["doc_id"]) & set(members["doc_id"])) == len(members) - 7  # 7 member candidates replaced
    assert db["doc_id"].is_unique


def row(target, auc, lo, hi):
    return {"dataset": "d", "target": target, "variant": "v", "auc": auc, "auc_lo": lo, "auc_hi": hi, "note": ""}


def test_attach_controls_moves_control_aucs_beside_their_base_and_flags():
    df = pd.DataFrame(
        [row("t", 0.8, 0.7, 0.9), row("t--null-db", 0.7, 0.6, 0.8), row("t--no-retrieval", 0.5, 0.4, 0.6)]
    )
    targets = {
        "t": {"control": "none"},
        "t--null-db": {"control": "null_database"},
        "t--no-retrieval": {"control": "no_retrieval"},
    }
    out = attach_controls(df, targets)
    assert out["target"].tolist() == ["t"]
    assert out.loc[0, "null-db control AUC"] == "0.70 [0.60, 0.80]"
    assert out.loc[0, "k=0 control AUC"] == "0.50 [0.40, 0.60]"
    assert "excludes 0.5" in out.loc[0, "note"]
    df.loc[1, ["auc_lo", "auc_hi"]] = [0.45, 0.8]
    assert "excludes" not in attach_controls(df, targets).loc[0, "note"]


def test_control_base_names_the_target_a_derived_control_applies():
    from ragmi.plan import control_base

    v = validate_config(copy.deepcopy(BASE))
    assert control_base(v, "qwen-rag--null-db") == "qwen-rag"
    assert control_base(v, "qwen-rag--no-retrieval") == "qwen-rag"
    assert control_base(v, "qwen-rag") is None and control_base(v, "pad") is None


def test_a_control_applies_the_base_targets_fitted_attack_and_answers_eval_candidates_only():
    """DCMI's Adversary 1 picks θ on the reference candidates: a control scores with the base target's θ
    (read from the base target's answers), never with one refitted on the control's own answers."""
    from test_dcmi import CAL, REF, attack, frames, variant

    from ragmi.attacks.base import check_scores
    from ragmi.workflow import control_responses, eval_queries

    candidates = pd.DataFrame(
        {"doc_id": list(CAL[0.04]), "role": ["eval" if d.startswith("e") else "reference" for d in CAL[0.04]]}
    )
    q, base = frames()
    # the control's answers: refitted on them, other θ would win (θ's calibrated scores swapped)
    swapped = {0.04: CAL[0.08], 0.06: CAL[0.06], 0.08: CAL[0.04]}
    _, own = frames(cal=swapped)
    fitted = variant(check_scores(attack().score(q, base, REF)), "dcmi/adv1")  # the base target's choices
    refit = variant(check_scores(attack().score(q, own, REF)), "dcmi/adv1")
    asked = eval_queries(q, candidates)  # what the control's generate job answers
    assert set(asked["doc_id"]) == {"e1", "e2"}
    assert not refit.loc[["e1", "e2"], "theta"].equals(fitted.loc[["e1", "e2"], "theta"])  # refitting would show
    own = own[own["query_id"].isin(asked["query_id"])]
    s = variant(check_scores(attack().score(q, control_responses(base, own, q, candidates), REF)), "dcmi/adv1")
    # each evaluation document decided by the base target's in-fold choice of its fold (its doc_id's)
    for d in ("e1", "e2"):
        assert (s.loc[d, "theta"], s.loc[d, "threshold"], s.loc[d, "fold"]) == (
            fitted.loc[d, "theta"],
            fitted.loc[d, "threshold"],
            fitted.loc[d, "fold"],
        )
        assert s.loc[d, "score"] == pytest.approx(swapped[fitted.loc[d, "theta"]][d])  # the control's own answer
    assert s.loc["r1", "score"] == pytest.approx(CAL[fitted.loc["r1", "theta"]]["r1"])  # the base target's answer


# ---------------------------------------------------------------------------------------------------
# the control rule (ragmi.report.summary): Holm over the run's controls still catches a control that
# separates the classes for a reason


def _metrics_of(target, variant, member_scores, nonmember_scores, seed):
    """evaluate()'s row of one variant: the given eval scores, a reference set drawn at chance."""
    import numpy as np

    from ragmi.metrics import evaluate

    rng = np.random.default_rng(seed)
    ev_m, ev_n = np.asarray(member_scores, float), np.asarray(nonmember_scores, float)
    ref = rng.uniform(0.2, 0.8, 40)
    frame = pd.DataFrame(
        {
            "doc_id": [f"e{i}" for i in range(ev_m.size + ev_n.size)] + [f"r{i}" for i in range(40)],
            "variant": variant,
            "score": np.r_[ev_m, ev_n, ref],
            "label": np.r_[np.ones(ev_m.size, int), np.zeros(ev_n.size, int), np.ones(20, int), np.zeros(20, int)],
            "role": ["eval"] * (ev_m.size + ev_n.size) + ["reference"] * 40,
        }
    )
    m = evaluate(frame, n_boot=1)
    return m.assign(dataset="d", target=target, attack=variant.split("/")[0])


def test_a_null_database_with_planted_near_duplicates_of_the_members_still_fails_the_control():
    """A null database that holds near-duplicates of the member candidates (a split that leaked) lets the
    retriever find a member's text: RAG-MIA's gray-box P(Yes) is then high for members, as for a
    retrieved document (0.85 to 0.99), and spread at chance for non-members (0.2 to 0.8, what a model
    that finds nothing in its context says: tests/known_answer_model.py's blind model).  Among the run's
    20 informative controls, 19 at chance, Holm still rejects it: control failed."""
    import numpy as np

    from ragmi.analysis.summary import summary_frame

    rng = np.random.default_rng(7)
    rows = []
    for i in range(10):
        v = f"rag_mia/v{i}"
        rows.append(_metrics_of("t", v, rng.uniform(0.6, 1.0, 20), rng.uniform(0.2, 0.8, 20), 10 * i))
        if i == 0:  # the planted null database
            null = _metrics_of("t--null-db", v, rng.uniform(0.85, 0.99, 20), rng.uniform(0.2, 0.8, 20), 10 * i + 1)
        else:
            null = _metrics_of("t--null-db", v, rng.uniform(0.2, 0.8, 20), rng.uniform(0.2, 0.8, 20), 10 * i + 1)
        rows += [null, _metrics_of("t--no-retrieval", v, *rng.uniform(0.2, 0.8, (2, 20)), 10 * i + 2)]
    targets = {
        "t": {"defenses": [], "control": "none"},
        "t--null-db": {"defenses": [], "control": "null_database"},
        "t--no-retrieval": {"defenses": [], "control": "no_retrieval"},
    }
    df = summary_frame(pd.concat(rows, ignore_index=True), targets).set_index("variant")
    assert df["n_run_controls"].iloc[0] == 20
    assert df.loc["rag_mia/v0", "control_p_null_database"] < 1e-6  # exact Mann-Whitney: complete separation
    assert df.loc["rag_mia/v0", "verdict"] == "control failed"
    assert df.loc["rag_mia/v0", "controls_failed_holm"] == 1
    assert (df.drop(index="rag_mia/v0")["controls_failed_holm"] == 0).all()


def test_a_target_that_sends_another_targets_requests_answers_after_it():
    """Output-only defenses act after the response cache: PAD's target sends the undefended target's
    requests, so its generate jobs wait for that target's (a DAG edge) instead of for its answers.
    Anything that changes the requests (a retrieval defense, k, the database) breaks the pairing."""
    from ragmi.plan import generation_key, same_requests_as

    root = Path(__file__).resolve().parents[1]
    cfg = yaml.safe_load((root / "config" / "config.yaml").read_text())
    cfg["targets"]["pad-k3"] = {**cfg["targets"]["pad"], "k": 3}
    cfg = validate_config(cfg)
    got = {t: same_requests_as(cfg, t) for t in cfg["targets"]}
    assert got["pad"] == "qwen-rag" and got["qwen-rag"] is None
    assert got["dp-r"] is None  # noise on the retrieval: its own requests
    assert got["pad-k3"] is None and got["qwen-rag--null-db"] is None and got["qwen-rag--no-retrieval"] is None
    assert generation_key(cfg, "pad") == generation_key(cfg, "qwen-rag") != generation_key(cfg, "dp-r")
