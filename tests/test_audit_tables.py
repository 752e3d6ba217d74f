"""The audit tables on hand-made inputs: baselines, signed changes, Fisher p, "indirect" cells."""

import numpy as np
import pandas as pd
import pytest

from ragmi.analysis.defense_effect import defense_effect_frame
from ragmi.analysis.leakage import leakage_dashboard_frame, target_pools
from ragmi.metrics import auc_ci, roc_auc
from ragmi.plan import baseline_targets
from ragmi.report.audit_tables import (
    canaries_frame,
    hook_inventory_frame,
)
from ragmi.report.comparison import audit_published, defense_matches

T = {
    "kind": "rag",
    "retriever": "r",
    "generator": "g",
    "k": 4,
    "template": "rag_mia",
    "control": "none",
    "database": "members",
}


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
    assert df.loc["plain", "Fisher p, Holm over the table"] == "–"  # no test: not in the family


def test_canaries_fisher_p_gets_its_holm_adjustment_over_the_table():
    res = pd.DataFrame(
        [
            {"target": t, "seed": 1, "n_leaked": k, "n_canaries": 50, "n_leaked_raw": 20}
            for t, k in (("plain", 20), ("a", 8), ("b", 19), ("c", 0))
        ]
    )
    df = canaries_frame(res, {"plain": "plain", "a": "plain", "b": "plain", "c": "plain"}).set_index("target")
    from ragmi.audit import stats

    raw = {t: stats.fisher_one_sided(20, 50, k, 50) for t, k in (("a", 8), ("b", 19), ("c", 0))}
    assert raw["a"] < 0.05  # one by one, a reduces the leak
    holm = {t: float(df.loc[t, "Fisher p, Holm over the table"]) for t in raw}
    assert holm["c"] == pytest.approx(float(f"{3 * raw['c']:.2g}"))
    assert holm["a"] == pytest.approx(float(f"{2 * raw['a']:.2g}"))
    assert holm["b"] == pytest.approx(float(f"{max(raw['b'], 2 * raw['a']):.2g}"))


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
    # defended − undefended, signed as it goes, with the unit: fewer e-mails read as a decrease
    assert df.loc["pad", "Email change"] == "−3 e-mails/run (−100%)"  # 3 -> 0
    assert df.loc["pad", "Name change"] == "+1 names/run (+50%)"  # 2 -> 3
    assert df.loc["pad", "runs (distinct)"] == 1
    assert df.loc["plain", "MI AUC"].startswith("0.70 [0.60, 0.80]") and df.loc["pad", "MI AUC"] == "–"


def test_change_cells_are_signed_as_they_go_with_their_unit():
    from ragmi.analysis.leakage import format_change

    assert format_change(23.0, 0.0, "e-mails/run") == "−23 e-mails/run (−100%)"
    assert format_change(4.0, 2.5, "e-mails/run") == "−1.5 e-mails/run (−38%)"
    assert format_change(2.0, 3.0, "names/run") == "+1 names/run (+50%)"
    assert format_change(0.25, 0.5, "names/run") == "+0.25 names/run (+100%)"
    assert format_change(9.0, 9.0, "names/run") == "±0 names/run (0%)"
    assert format_change(0.0, 2.0, "e-mails/run") == "+2 e-mails/run (undefended 0)"
    assert format_change(None, 2.0, "e-mails/run") == "–"


def eval_scores(scores_by_variant, n=30, role="eval"):
    """A scores frame (doc_id, variant, score, label, role): n members then n non-members per variant."""
    parts = []
    for v, s in scores_by_variant.items():
        parts.append(
            pd.DataFrame(
                {
                    "doc_id": [f"m{i}" for i in range(n)] + [f"n{i}" for i in range(n)],
                    "variant": v,
                    "score": s,
                    "label": np.r_[np.ones(n, int), np.zeros(n, int)],
                    "role": role,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def effect_inputs():
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
                    "n_ref_nonmembers": 30,
                    "tpr_at_fpr_5": 0.3,
                    "tpr_at_fpr_0": 0.1,
                }
            )
    m = pd.DataFrame(rows)
    perfect = np.r_[np.arange(30) + 100.0, np.arange(30.0)]  # every member above every non-member
    noise = np.random.default_rng(0).normal(size=60)
    scores = {
        ("d", "plain", "r"): eval_scores({"r/gray/t2": perfect, "r/black/t2": perfect}),
        ("d", "pad", "r"): eval_scores({"r/gray/t2": noise, "r/black/t2": perfect}),
        ("d", "lprag", "r"): eval_scores({"r/gray/t2": noise, "r/black/t2": noise}),
    }
    ch = {("pad", "pad"): {"text"}, ("lprag", "lprag"): {"context", "prompt", "text", "first_token_logprobs"}}
    reads = lambda a, v: ("first_token_logprobs",) if "gray" in v else ("text",)  # noqa: E731
    return m, scores, ch, reads


def test_defense_effect_paired_delta_and_verdicts():
    m, scores, ch, reads = effect_inputs()
    args = (m, {"plain": [], "pad": ["pad"], "lprag": ["lprag"]}, ch, reads)
    base = {"plain": "plain", "pad": "plain", "lprag": "plain"}
    df = defense_effect_frame(*args, base, scores=scores)
    by = df.set_index(["target", "variant"])
    # identical, perfectly separating scores on the same candidates: delta 0, and an interval that keeps the
    # width of AUC 1's score interval at 30 + 30 (the paired bootstrap collapsed it to [0, 0])
    same = by.loc[("pad", "r/black/t2")]
    one_lo = auc_ci(1.0, 30, 30)[0]
    assert same["delta_auc"] == 0.0
    assert same["delta_auc_lo"] == pytest.approx(one_lo - 1) and same["delta_auc_hi"] == pytest.approx(1 - one_lo)
    assert same["delta_auc_hi"] - same["delta_auc_lo"] > 0.1
    assert same["verdict"] == "no detectable change"
    assert same["effect"] == (
        f"ΔAUC +0.00 [−{1 - one_lo:.2f}, +{1 - one_lo:.2f}], ΔTPR at ref. threshold for 5% FPR +0.00"
    )
    # random scores against a perfect undefended target: the whole interval is below 0
    red = by.loc[("lprag", "r/gray/t2")]
    auc_noise = roc_auc(np.r_[np.ones(30), np.zeros(30)], scores[("d", "lprag", "r")]["score"][:60])
    assert red["delta_auc"] == pytest.approx(auc_noise - 1.0)
    assert red["delta_auc_hi"] < 0 and red["verdict"] == "reduces"
    assert red["effect"].startswith("ΔAUC −") and "[−" in red["effect"]
    assert (red["n_paired_members"], red["n_paired_nonmembers"]) == (30, 30)
    # PAD changes the text only; gray-box reads log-probabilities: indirect, ΔAUC kept for information
    ind = by.loc[("pad", "r/gray/t2")]
    assert ind["verdict"] == "indirect" and ind["effect"].startswith("indirect (no shared channel); ")
    assert ind["delta_auc"] < 0 and "ΔAUC −" in ind["effect"]
    assert (by.loc["plain", "verdict"] == "baseline").all() and (by.loc["plain", "effect"] == "baseline").all()
    # the reverse comparison increases
    up = defense_effect_frame(
        m[m["target"] != "pad"],
        {"plain": ["x"], "lprag": []},
        {("plain", "x"): {"first_token_logprobs"}},
        reads,
        {"plain": "lprag", "lprag": "lprag"},
        scores=scores,
    ).set_index(["target", "variant"])
    assert up.loc[("plain", "r/gray/t2"), "verdict"] == "increases"
    assert up.loc[("plain", "r/gray/t2"), "delta_auc_lo"] > 0
    # a function of its inputs, independent of the other rows
    again = defense_effect_frame(*args, base, scores=scores)
    pd.testing.assert_frame_equal(df, again)
    alone = defense_effect_frame(m[m["target"].isin(["plain", "lprag"])], *args[1:], base, scores=scores).set_index(
        ["target", "variant"]
    )
    assert alone.loc[("lprag", "r/gray/t2"), "delta_auc_lo"] == red["delta_auc_lo"]


def test_defense_effect_pairs_only_shared_eval_candidates():
    m, scores, ch, reads = effect_inputs()
    defended = scores[("d", "lprag", "r")]
    # reference rows, a skipped variant's NaN score and candidates the baseline lacks are not counted
    extra = eval_scores({"r/gray/t2": np.zeros(60)}, role="reference").assign(doc_id=lambda d: "ref-" + d["doc_id"])
    nan_row = pd.DataFrame([{"doc_id": "m0", "variant": "r/gray/t2", "score": np.nan, "label": 1, "role": "eval"}])
    base = scores[("d", "plain", "r")]
    base = base[~base["doc_id"].isin(["m1", "n1"])]
    scores = {
        **scores,
        ("d", "lprag", "r"): pd.concat([defended[defended["doc_id"] != "m0"], extra, nan_row]),
        ("d", "plain", "r"): base,
    }
    df = defense_effect_frame(
        m,
        {"plain": [], "pad": ["pad"], "lprag": ["lprag"]},
        ch,
        reads,
        {"plain": "plain", "pad": "plain", "lprag": "plain"},
        scores=scores,
    ).set_index(["target", "variant"])
    r = df.loc[("lprag", "r/gray/t2")]
    assert (r["n_paired_members"], r["n_paired_nonmembers"]) == (28, 29)  # m0 (NaN), m1 and n1 (no baseline)
    # no undefended target, or no scores: not compared, with the reason
    none = defense_effect_frame(
        m,
        {"plain": [], "pad": ["pad"], "lprag": ["lprag"]},
        ch,
        reads,
        {"plain": "plain", "pad": None, "lprag": "plain"},
        scores={},
    ).set_index(["target", "variant"])
    assert none.loc[("pad", "r/black/t2"), "effect"] == "– (no undefended target)"
    assert none.loc[("lprag", "r/black/t2"), "verdict"] == "not compared"
    assert "no scores" in none.loc[("lprag", "r/black/t2"), "effect"]
    assert np.isnan(none.loc[("lprag", "r/black/t2"), "delta_auc"])


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


def test_scorer_entangled_cells_are_never_printed_as_a_reduction():
    """LPRAG writes one-word names and example.* domains that NELstrict can only score as
    PERSON_NAME_AMBIGUOUS / PLACEHOLDER_NAME and EMAIL_PLACEHOLDER: both change cells are n/a."""
    from ragmi.analysis.leakage import scorer_entanglement
    from ragmi.defenses import build_defense
    from ragmi.nel import entangled_columns

    lprag = build_defense("lprag", {"kind": "lprag"})
    assert set(entangled_columns(lprag.vocabulary)) == {"EMAIL_REAL", "PERSON_NAME"}
    assert entangled_columns(build_defense("pad", {"kind": "pad"}).vocabulary) == {}  # "[EMAIL]" removes it
    cfg = {
        # the validated entries (defaults filled), as the table rule gets them
        "defenses": {n: {"kind": n, **build_defense(n, {"kind": n}).params} for n in ("lprag", "pad")},
        "targets": {
            "plain": {**T, "defenses": []},
            "lprag": {**T, "defenses": ["lprag"]},
            "pad": {**T, "defenses": ["pad"]},
        },
    }
    ent = scorer_entanglement(cfg)
    assert set(ent) == {"lprag"}
    runs = pd.DataFrame(
        [
            {
                "dataset": "d",
                "target": t,
                "run": "x/a",
                "EMAIL_REAL": e,
                "PERSON_NAME": n,
                "reproduced_fraction": 0.0,
                "outputs_digest": t,
            }
            for t, e, n in (("plain", 4, 2), ("lprag", 0, 0), ("pad", 0, 2))
        ]
    )
    mi = pd.DataFrame(columns=["dataset", "target", "variant", "auc", "auc_lo", "auc_hi"])
    base = {"plain": "plain", "lprag": "plain", "pad": "plain"}
    df = leakage_dashboard_frame(runs, mi, {}, base, n_boot=50, seed=0, entangled=ent).set_index("target")
    assert df.loc["lprag", "Email change"] == df.loc["lprag", "Name change"] == "n/a (scorer-entangled)"
    assert "example.com" in df.loc["lprag", "scorer-entangled"] and "Alice" in df.loc["lprag", "scorer-entangled"]
    assert df.loc["pad", "Email change"] == "−4 e-mails/run (−100%)" and df.loc["pad", "scorer-entangled"] == "–"


def pooled_inputs():
    """Two datasets x two extraction prompts; an undefended target, two ε variants of a DP kind
    (independent runs: distinct outputs) and two ε variants of PAD (inert ε: identical outputs); the
    baseline also ran a third dataset that no defended target ran."""
    defenses = {
        "dp-e1": {"kind": "dp_retrieval", "epsilon": 1.0},
        "dp-e5": {"kind": "dp_retrieval", "epsilon": 5.0},
        "pad-e1": {"kind": "pad"},
        "pad-e5": {"kind": "pad"},
    }
    targets = {
        "plain": {**T, "defenses": []},
        "dp1": {**T, "defenses": ["dp-e1"]},
        "dp5": {**T, "defenses": ["dp-e5"]},
        "pad1": {**T, "defenses": ["pad-e1"]},
        "pad5": {**T, "defenses": ["pad-e5"]},
    }
    email = {"plain": 4, "dp1": 2, "dp5": 3, "pad1": 0, "pad5": 0}
    rows = []
    for t, e in email.items():
        for d in ("d1", "d2", "d3") if t == "plain" else ("d1", "d2"):
            for p in ("extraction/targeted", "extraction/generic"):
                digest = f"pad|{d}|{p}" if t.startswith("pad") else f"{t}|{d}|{p}"  # PAD's ε: identical outputs
                rows.append(
                    {
                        "dataset": d,
                        "target": t,
                        "run": p,
                        "EMAIL_REAL": 100 if d == "d3" else e,
                        "PERSON_NAME": 2,
                        "reproduced_fraction": 0.0,
                        "outputs_digest": digest,
                    }
                )
    return defenses, targets, pd.DataFrame(rows)


MI_COLUMNS = ["dataset", "target", "variant", "auc", "auc_lo", "auc_hi"]


def test_target_pools_by_defense_kind():
    defenses, targets, _ = pooled_inputs()
    targets["plain--null-db"] = {**T, "defenses": [], "control": "null_database"}
    assert target_pools(targets, defenses) == {
        "plain": "none",
        "dp1": "dp_retrieval",
        "dp5": "dp_retrieval",
        "pad1": "pad",
        "pad5": "pad",
        "plain--null-db": "control: null_database",
    }


def test_pooled_dashboard_pools_epsilon_variants_and_collapses_identical_runs():
    defenses, targets, runs = pooled_inputs()
    mi = pd.DataFrame(columns=MI_COLUMNS)
    df = leakage_dashboard_frame(
        runs,
        mi,
        {},
        baseline_targets(targets),
        n_boot=50,
        seed=0,
        pools=target_pools(targets, defenses),
    )
    pooled = df[df["block"] == "pooled"].set_index("pool")
    per = df[df["block"] == "per target"].set_index(["dataset", "target"])
    assert list(pooled.index) == ["none", "dp_retrieval", "pad"]  # the baseline pool first
    # ε variants of one DP kind: one row, n = the sum of their distinct runs (2 targets x 2 datasets x 2 prompts)
    assert pooled.loc["dp_retrieval", "runs (distinct)"] == 8
    assert pooled.loc["dp_retrieval", "target"] == "pooled (dp1, dp5)"
    assert pooled.loc["dp_retrieval", "dataset"] == "d1, d2"
    assert pooled.loc["dp_retrieval", "Email NEL/run"].startswith("2.50")
    # the change is over the same cells: the baseline's d3 runs (100 e-mails each) are left out
    assert pooled.loc["dp_retrieval", "Email change"] == "−1.5 e-mails/run (−38%)"  # 4 -> 2.5
    assert pooled.loc["dp_retrieval", "Name change"] == "±0 names/run (0%)"
    assert pooled.loc["none", "Email change"] == "baseline" and pooled.loc["none", "runs (distinct)"] == 6
    # PAD's ε variants have identical outputs: each (dataset, prompt) counts once
    assert pooled.loc["pad", "runs (distinct)"] == 4 and pooled.loc["pad", "runs (raw)"] == 8
    assert pooled.loc["pad", "Email change"].endswith("e-mails/run (−100%)")
    # the per-target rows stay, each naming its pool
    assert per.loc[("d1", "dp1"), "runs (distinct)"] == 2 and per.loc[("d1", "dp1"), "pool"] == "dp_retrieval"
    assert per.loc[("d1", "dp5"), "Email change"] == "−1 e-mails/run (−25%)"  # 4 -> 3 on d1 alone
    assert len(per) == 3 + 2 * 4


def test_pooled_rows_keep_scorer_entangled_cells():
    defenses, targets, runs = pooled_inputs()
    ent = {"pad1": {"EMAIL_REAL": ["x.example"]}, "pad5": {"EMAIL_REAL": ["y.example"]}}
    df = leakage_dashboard_frame(
        runs,
        pd.DataFrame(columns=MI_COLUMNS),
        {},
        baseline_targets(targets),
        50,
        0,
        ent,
        target_pools(targets, defenses),
    )
    pad = df[(df["block"] == "pooled") & (df["pool"] == "pad")].iloc[0]
    assert pad["Email change"] == "n/a (scorer-entangled)" and pad["Name change"] == "±0 names/run (0%)"
    assert pad["scorer-entangled"] == "EMAIL_REAL: x.example, y.example"


def test_published_values_sit_on_the_pooled_rows_only(tmp_path):
    """Through the registry: MtH Table II pools per defense, so its values compare with the pooled
    rows, never with a per-ε row."""
    from report_fixtures import as_the_rules_do

    from ragmi.report.registry import TABLES

    defenses, targets, runs = pooled_inputs()
    runs.to_csv(tmp_path / "leakage.csv", index=False)
    hooks = pd.DataFrame(
        [
            {"target": t, "defense": d, "defense_status": "retrieval-only"}
            for t in targets
            for d in targets[t]["defenses"]
        ]
    )
    hooks.to_csv(tmp_path / "hooks.csv", index=False)
    mi = pd.DataFrame(
        [
            {"dataset": "d1", "target": t, "variant": "v", "auc": a, "auc_lo": a - 0.1, "auc_hi": a + 0.1}
            for t, a in (("plain", 0.7), ("dp1", 0.6), ("dp5", 0.65))
        ]
    )
    mi.to_csv(tmp_path / "mi.csv", index=False)
    files = {
        "leakage": [str(tmp_path / "leakage.csv")],
        "hooks": [str(tmp_path / "hooks.csv")],
        "metrics": [str(tmp_path / "mi.csv")],
        "published": ["config/published.yaml"],
    }
    cfg = {"defenses": defenses, "targets": targets, "audit": {"n_boot": 50}, "seed": 0}
    # the keys it declares suffice
    df = TABLES["leakage_dashboard"].build(as_the_rules_do("leakage_dashboard", files, cfg, tmp_path), cfg)
    pooled = df[df["block"] == "pooled"].set_index("pool")
    assert "email +8.1%" in pooled.loc["dp_retrieval", "published"]
    assert "2.25/run" in pooled.loc["none", "published"] and "-42.9%" in pooled.loc["pad", "published"]
    assert (df.loc[df["block"] == "per target", "published"] == "").all()
    assert pooled.loc["dp_retrieval", "MI AUC"] == "0.60–0.65 over 2 targets (per-target rows)"
    assert pooled.loc["none", "MI AUC"].startswith("0.70 [0.60, 0.80]")
    assert pooled.loc["dp_retrieval", "hooks active"] == "dp-e1: retrieval-only; dp-e5: retrieval-only"
