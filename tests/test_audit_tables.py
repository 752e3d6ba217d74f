"""The audit tables on hand-made inputs: baselines, signed changes, Fisher p, "indirect" cells."""

import numpy as np
import pandas as pd

from ragmi.report.audit_tables import (
    baseline_targets,
    canaries_frame,
    defense_effect_frame,
    hook_inventory_frame,
    leakage_dashboard_frame,
)
from ragmi.report.comparison import audit_published, defense_matches

T = {"retriever": "r", "generator": "g", "k": 4, "template": "rag_mia"}


def test_baseline_targets():
    targets = {
        "plain": {**T, "defenses": []},
        "pad": {**T, "defenses": ["pad"]},
        "k2": {**T, "k": 2, "defenses": ["pad"]},
    }
    assert baseline_targets(targets) == {"k2": None, "pad": "plain", "plain": "plain"}


def test_canaries_frame_fisher_against_the_baseline():
    res = pd.DataFrame(
        [
            {"target": "plain", "seed": 101, "n_leaked": 21, "n_canaries": 50, "n_leaked_raw": 21},
            {"target": "plain", "seed": 102, "n_leaked": 16, "n_canaries": 50, "n_leaked_raw": 16},
            {"target": "plain", "seed": 103, "n_leaked": 16, "n_canaries": 50, "n_leaked_raw": 16},
            {"target": "lprag", "seed": 101, "n_leaked": 0, "n_canaries": 50, "n_leaked_raw": 20},
            {"target": "lprag", "seed": 102, "n_leaked": 0, "n_canaries": 50, "n_leaked_raw": 15},
            {"target": "lprag", "seed": 103, "n_leaked": 0, "n_canaries": 50, "n_leaked_raw": 17},
        ]
    )
    df = canaries_frame(res, {"plain": "plain", "lprag": "plain"}).set_index("target")
    assert df.loc["plain", "total"] == "53/150 (35.3%)" and df.loc["lprag", "seed 102"] == "0/50"
    assert df.loc["lprag", "before output hooks"] == "52/150"
    assert float(df.loc["lprag", "Fisher p (one-sided, vs undefended)"]) < 1e-14
    assert df.loc["plain", "Fisher p (one-sided, vs undefended)"] == "–"


def test_leakage_dashboard_changes_and_collapsed_runs():
    runs = pd.DataFrame(
        [
            {
                "dataset": "d",
                "target": "plain",
                "run": "x/a",
                "EMAIL_REAL": 4,
                "PERSON_NAME": 2,
                "reproduced_fraction": 0.5,
                "outputs_digest": "1",
            },
            {
                "dataset": "d",
                "target": "plain",
                "run": "x/b",
                "EMAIL_REAL": 2,
                "PERSON_NAME": 2,
                "reproduced_fraction": 0.5,
                "outputs_digest": "2",
            },
            {
                "dataset": "d",
                "target": "pad",
                "run": "x/a",
                "EMAIL_REAL": 0,
                "PERSON_NAME": 3,
                "reproduced_fraction": 0.0,
                "outputs_digest": "3",
            },
            {
                "dataset": "d",
                "target": "pad",
                "run": "x/b",
                "EMAIL_REAL": 0,
                "PERSON_NAME": 3,
                "reproduced_fraction": 0.0,
                "outputs_digest": "3",
            },  # identical outputs: counted once
        ]
    )
    mi = pd.DataFrame([{"dataset": "d", "target": "plain", "variant": "v", "auc": 0.7, "auc_lo": 0.6, "auc_hi": 0.8}])
    df = leakage_dashboard_frame(
        runs, mi, {"pad": "pad: pattern-limited"}, {"plain": "plain", "pad": "plain"}, n_boot=200, seed=1
    ).set_index("target")
    assert df.loc["plain", "Email change"] == "baseline"
    assert df.loc["pad", "Email change"] == "+100.0%"  # 3 -> 0
    assert df.loc["pad", "Name change"] == "-50.0%"  # 2 -> 3
    assert df.loc["pad", "runs (distinct)"] == 1
    assert df.loc["plain", "MI AUC"].startswith("0.70 [0.60, 0.80]") and df.loc["pad", "MI AUC"] == "–"


def test_defense_effect_indirect_and_delta():
    rows = []
    for t, auc in (("plain", 0.80), ("pad", 0.80), ("lprag", 0.60)):
        for v in ("r/gray/t2", "r/black/t2"):
            rows.append(
                {
                    "dataset": "d",
                    "target": t,
                    "attack": "r",
                    "variant": v,
                    "auc": auc,
                    "tpr_at_fpr_5": 0.3,
                    "tpr_at_fpr_0": 0.1,
                }
            )
    m = pd.DataFrame(rows)
    ch = {("pad", "pad"): {"text"}, ("lprag", "lprag"): {"context", "prompt", "text", "first_token_logprobs"}}
    reads = lambda a, v: ("first_token_logprobs",) if "gray" in v else ("text",)  # noqa: E731
    df = defense_effect_frame(
        m,
        {"plain": [], "pad": ["pad"], "lprag": ["lprag"]},
        ch,
        reads,
        {"plain": "plain", "pad": "plain", "lprag": "plain"},
    )
    cell = {(r.target, r.variant): r.effect for r in df.itertuples()}
    assert cell[("pad", "r/gray/t2")].startswith("indirect")
    assert cell[("pad", "r/black/t2")] == "ΔAUC +0.00, ΔTPR +0.00"
    assert cell[("lprag", "r/gray/t2")] == "ΔAUC -0.20, ΔTPR +0.00"
    assert cell[("plain", "r/black/t2")] == "baseline"


def test_hook_inventory_frame():
    hooks = pd.DataFrame(
        [
            {
                "dataset": "d",
                "target": "l",
                "defense": "l",
                "kind": "lprag",
                "hook": "content",
                "probe_fire_rate": 1.0,
                "attack_fire_rate": 0.97,
                "attack_n": 30,
                "status": "active",
                "defense_status": "end-to-end",
            },
            {
                "dataset": "d",
                "target": "l",
                "defense": "l",
                "kind": "lprag",
                "hook": "output",
                "probe_fire_rate": 0.5,
                "attack_fire_rate": np.nan,
                "attack_n": 0,
                "status": "pattern-limited",
                "defense_status": "end-to-end",
            },
        ]
    )
    row = hook_inventory_frame(hooks).iloc[0]
    assert row["retrieval-side hooks"] == "content: active (probes 100%, attack queries 97% of 30)"
    assert row["generation hook"] == "output: pattern-limited (probes 50%, attack queries none)"
    assert row["status"] == "end-to-end"


def test_published_defense_matching():
    e = {"defense": "instruction_rag_mia", "defense_params": {"placement": "user"}}
    assert defense_matches(e, [("instruction_rag_mia", {"placement": "user"})])
    assert not defense_matches(e, [("instruction_rag_mia", {"placement": "system_context"})])
    assert not defense_matches(e, [])
    assert defense_matches({}, []) and not defense_matches({}, [("pad", {})])
    pub = [{"paper": "P", "table": "canaries", "defense": "none", "value": "53/150"}]
    assert audit_published(pub, "canaries", []) == "53/150 (P)"
    assert audit_published(pub, "canaries", [("pad", {})]) == ""
