"""The headline summary table: verdicts (leaks, inverted, no evidence, uninformative, control failed,
inherited controls), the two TPR figures, costs, the power footnote, determinism; and the control flags
of the comparison table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from report_fixtures import as_the_rules_do

from ragmi.analysis.summary import summary_frame
from ragmi.metric_rows import auc_verdict
from ragmi.metrics import evaluate, metric_columns, min_detectable_auc, min_detectable_auc_power
from ragmi.report.comparison import attach_controls
from ragmi.report.registry import TABLES, write_table
from ragmi.report.summary import summary_markdown

TARGETS = {
    "t": {"defenses": [], "control": "none"},
    "t--null-db": {"defenses": [], "control": "null_database"},
    "t--no-retrieval": {"defenses": [], "control": "no_retrieval"},
    "pad": {"defenses": ["pad"], "control": "none"},
}


def mrow(target, variant, auc, n_ref=40, n=(20, 20), **extra):
    row = {c: np.nan for c in metric_columns()}
    row.update(
        dataset="d",
        target=target,
        attack=variant.split("/")[0],
        variant=variant,
        n_members=n[0],
        n_nonmembers=n[1],
        n_ref_members=40,
        n_ref_nonmembers=n_ref,
        auc=auc[0],
        auc_lo=auc[1],
        auc_hi=auc[2],
        tpr_at_fpr_0=0.1,
        tpr_at_fpr_0_lo=0.0,
        tpr_at_fpr_0_hi=0.2,
        tpr_at_fpr_1=0.15,
        tpr_at_fpr_1_lo=0.05,
        tpr_at_fpr_1_hi=0.25,
        tpr_at_fpr_5=0.4,
        tpr_at_fpr_5_lo=0.3,
        tpr_at_fpr_5_hi=0.5,
        fpr_realized_5=0.1,
        fpr_realized_5_lo=0.01,
        fpr_realized_5_hi=0.3,
        tpr_roc_5=0.55,
        tpr_roc_5_lo=0.3,
        tpr_roc_5_hi=0.75,
        informative=True,
        uninformative_reason="",
        queries_per_candidate=2.0,
        prompt_tokens_per_candidate=100.0,
        output_tokens_per_candidate=20.5,
    )
    row.update(extra)
    return row


def metrics():
    return pd.DataFrame(
        [
            mrow("pad", "a/leaky", (0.8, 0.7, 0.9)),
            mrow("pad", "a/leaky/x=1", (0.9, 0.85, 0.95)),  # a sweep point: not a headline row
            mrow("pad", "b/inv", (0.3, 0.2, 0.4)),
            mrow("pad", "c/chance", (0.55, 0.45, 0.65), n_ref=3),
            mrow("t", "a/leaky", (0.8, 0.7, 0.9)),
            mrow("t--null-db", "a/leaky", (0.85, 0.72, 0.93)),  # the null-db control separates: control failed
            mrow("t--no-retrieval", "a/leaky", (0.5, 0.4, 0.6)),
            mrow("t", "b/inv", (0.3, 0.2, 0.4)),
            mrow("t--null-db", "b/inv", (0.5, 0.45, 0.55)),
            mrow("t--no-retrieval", "b/inv", (0.15, 0.07, 0.28)),  # k = 0 below 0.5: control failed too
            mrow("t", "c/chance", (0.55, 0.45, 0.65)),
            mrow("t--null-db", "c/chance", (0.5, 0.4, 0.6)),
            mrow("t", "g/gray", (np.nan, np.nan, np.nan), skipped="skipped: no log-probabilities"),
        ]
    )


def test_auc_verdict_boundaries():
    assert auc_verdict(0.51, 0.9) == "leaks"
    assert auc_verdict(0.1, 0.49) == "inverted"
    assert auc_verdict(0.5, 0.9) == "no evidence at this n"  # the interval touches 0.5
    assert auc_verdict(0.2, 0.5) == "no evidence at this n"


def test_summary_verdicts_controls_and_columns():
    df = summary_frame(metrics(), TARGETS)
    assert list(zip(df["target"], df["variant"])) == [
        ("t", "a/leaky"),
        ("t", "b/inv"),
        ("t", "c/chance"),
        ("t", "g/gray"),
        ("pad", "a/leaky"),
        ("pad", "b/inv"),
        ("pad", "c/chance"),
    ]  # control targets and sweep points left out, undefended targets first, metrics order kept
    v = dict(zip(zip(df["target"], df["variant"]), df["verdict"]))
    assert v[("t", "a/leaky")] == "control failed"  # would be "leaks" without the null-db control
    assert v[("t", "b/inv")] == "control failed"  # the k = 0 control excludes 0.5 (from below)
    assert v[("t", "c/chance")] == "no evidence at this n"  # its controls contain 0.5
    assert v[("t", "g/gray")] == "not computed"
    # a defended target has no controls of its own: it inherits its undefended counterpart's
    assert v[("pad", "a/leaky")] == "control failed"
    assert v[("pad", "b/inv")] == "control failed"
    assert v[("pad", "c/chance")] == "no evidence at this n"
    by = df.set_index(["target", "variant"])
    assert by.loc[("t", "a/leaky"), "verdict_detail"] == (
        "null-db AUC 0.85 [0.72, 0.93] excludes 0.5 after Holm (p = 2e-04, adjusted 8e-04) (own verdict: leaks)"
    )
    assert by.loc[("pad", "a/leaky"), "verdict_detail"] == (
        "null-db AUC 0.85 [0.72, 0.93] (of t) excludes 0.5 after Holm (p = 2e-04, adjusted 8e-04) (own verdict: leaks)"
    )
    assert by.loc[("pad", "a/leaky"), "controls_from"] == "t" and by.loc[("t", "a/leaky"), "controls_from"] == "t"
    assert "k=0 AUC 0.15 [0.07, 0.28] excludes 0.5 after Holm" in by.loc[("t", "b/inv"), "verdict_detail"]
    assert by.loc[("t", "c/chance"), "controls"] == "null-db AUC 0.50 [0.40, 0.60]"
    assert by.loc[("t", "g/gray"), "verdict_detail"] == "skipped: no log-probabilities"
    assert by.loc[("pad", "a/leaky"), "defenses"] == "pad" and by.loc[("t", "a/leaky"), "defenses"] == ""
    # the operational TPR at the reference threshold of the lowest non-zero level the reference set
    # resolves: 5% with 40 (0.5% needs 200, 1% needs 100), with the FPR it realised on the evaluation set;
    # with 3 reference non-members no non-zero level, the 0% threshold with a note
    assert by.loc[("pad", "a/leaky"), "tpr_fpr"] == 0.05 and by.loc[("pad", "a/leaky"), "tpr"] == 0.4
    assert by.loc[("pad", "a/leaky"), "fpr_realized"] == 0.1 and by.loc[("pad", "a/leaky"), "fpr_realized_hi"] == 0.3
    assert by.loc[("pad", "a/leaky"), "tpr_note"] == ("TPR@0.5% and 1% FPR not estimable with 40 reference non-members")
    assert by.loc[("pad", "c/chance"), "tpr_fpr"] == 0.0 and by.loc[("pad", "c/chance"), "tpr"] == 0.1
    assert np.isnan(by.loc[("pad", "c/chance"), "fpr_realized"])  # no fpr_realized_0 in the metrics row
    # the evaluation ROC's TPR at 5% FPR: 20 evaluation non-members resolve it, 19 do not
    assert by.loc[("pad", "a/leaky"), "roc_tpr_fpr"] == 0.05 and by.loc[("pad", "a/leaky"), "roc_tpr"] == 0.55
    few = summary_frame(metrics().assign(n_nonmembers=19), TARGETS)
    assert few["roc_tpr"].isna().all()
    assert by.loc[("pad", "a/leaky"), "tokens_per_candidate"] == 120.5
    assert by.loc[("pad", "a/leaky"), "min_detectable_auc"] == min_detectable_auc(20, 20)
    assert by.loc[("pad", "a/leaky"), "min_detectable_auc_80"] == min_detectable_auc_power(20, 20, 0.8)
    wide = metrics().assign(n_ref_nonmembers=100)
    assert summary_frame(wide, TARGETS)["tpr_fpr"].iloc[0] == 0.01  # 100 resolve 1%


def test_uninformative_cells_and_controls():
    m = metrics()
    # every answer "No.": the main cell's scores are constant
    m.loc[(m["target"] == "t") & (m["variant"] == "c/chance"), ["informative", "uninformative_reason"]] = [
        False,
        "constant scores",
    ]
    # the null-db control of a/leaky cannot fail: its scores are constant (AUC 0.5 [0.5, 0.5] by construction)
    m.loc[(m["target"] == "t--null-db") & (m["variant"] == "a/leaky"), ["auc", "auc_lo", "auc_hi", "informative"]] = [
        0.5,
        0.3,
        0.7,
        False,
    ]
    by = summary_frame(m, TARGETS).set_index(["target", "variant"])
    assert by.loc[("t", "c/chance"), "verdict"] == "uninformative"
    assert by.loc[("t", "c/chance"), "verdict_detail"] == "constant scores"
    # a/leaky: the failing null-db control is now uninformative, the k=0 control (0.5 [0.4, 0.6]) passes
    assert by.loc[("t", "a/leaky"), "verdict"] == "leaks"
    assert by.loc[("t", "a/leaky"), "controls"] == "null-db uninformative; k=0 AUC 0.50 [0.40, 0.60]"
    assert by.loc[("t", "a/leaky"), "n_informative_controls"] == 1
    assert by.loc[("t", "a/leaky"), "n_uninformative_controls"] == 1
    # without its k=0 control, a/leaky leaks with no informative control: the footnote names it
    m2 = m[~((m["target"] == "t--no-retrieval") & (m["variant"] == "a/leaky"))]
    md = summary_markdown(summary_frame(m2, TARGETS), "S")
    assert "Leaking rows without an informative control: t a/leaky, pad a/leaky" in md
    assert "1 control(s) uninformative" in md


def test_summary_markdown_is_narrow_and_explains_power():
    df = summary_frame(metrics(), TARGETS)
    md = summary_markdown(df, "Summary", notes=["a note"])
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") + 1 <= 8 for line in table)
    assert "Dataset: d." in md  # one dataset: in the caption, not a column
    assert table[0] == (
        "| target | attack/variant | n eval | AUC [95% CI] | TPR@5%FPR (eval ROC) | TPR at ref. threshold, at "
        "realised eval FPR | queries / tokens per candidate | verdict |"
    )
    row = next(line for line in table if line.startswith("| pad (pad) | a/leaky |"))
    assert (
        "| 20/20 | 0.80 [0.70, 0.90] | 0.55 [0.30, 0.75] | 0.40 [0.30, 0.50] at FPR 0.10 [0.01, 0.30] | 2 / 120 |"
        in row
    )
    t_row = next(line for line in table if line.startswith("| t | a/leaky |"))
    assert t_row.endswith(
        "| control failed (null-db AUC 0.85 [0.72, 0.93] excludes 0.5 after Holm (p = 2e-04, adjusted 8e-04) "
        "(own verdict: leaks)) |"
    )
    assert table.index(t_row) < table.index(row)  # undefended rows first
    x, y = min_detectable_auc(20, 20), min_detectable_auc_power(20, 20, 0.8)
    assert f"at n = 20+20 a true AUC of about {x:.2f} is detected with 50% power and {y:.2f} with 80% power" in md
    assert "Hanley–McNeil 1982" in md and md.endswith("- a note\n")
    assert "coarser here: TPR@0.5% and 1% FPR not estimable with 40 reference non-members; " in md
    assert "; no non-zero FPR level estimable with 3 reference non-members." in md
    # t's own controls: 5 informative intervals (a/leaky and b/inv two each, c/chance one), 2 excluding 0.5;
    # pad's inherited ones are not counted twice
    assert (
        "- Controls: 2 of 5 informative controls exclude 0.5 per test (95% interval; about 0.25 would by chance "
        "alone), 2 after Holm over the run's 5" in md
    )
    assert "Defended targets read their undefended counterpart's controls: pad from t" in md
    assert "Controls:" not in summary_markdown(summary_frame(metrics().query("target in ['t', 'pad']"), TARGETS), "S")


def scores_csv(path, target, variant, shift, n=20, seed=0, **extra):
    rng = np.random.default_rng(seed)
    parts = []
    for role in ("reference", "eval"):
        parts.append(
            pd.DataFrame(
                {
                    "doc_id": [f"{role}{i}" for i in range(2 * n)],
                    "variant": variant,
                    "score": np.r_[rng.normal(shift, 1, n), rng.normal(0, 1, n)],
                    "label": np.r_[np.ones(n, int), np.zeros(n, int)],
                    "role": role,
                }
            )
        )
    m = evaluate(pd.concat(parts), n_boot=50, costs={variant: {"queries_per_candidate": 1.0, **extra}})
    for i, (col, val) in enumerate([("dataset", "d"), ("target", target), ("attack", variant.split("/")[0])]):
        m.insert(i, col, val)
    m.to_csv(path, index=False)
    return str(path)


def test_summary_table_through_the_registry_is_byte_identical(tmp_path):
    assert next(iter(TABLES)) == "summary"  # registered first, read first
    files = {
        "metrics": [
            scores_csv(tmp_path / "a.csv", "pad", "a/v", 3.0, prompt_tokens_per_candidate=10.0),
            scores_csv(tmp_path / "b.csv", "t", "a/v", 0.0, seed=5),
            scores_csv(tmp_path / "c.csv", "t--null-db", "a/v", 0.0, seed=6),
        ]
    }
    cfg = {"targets": TARGETS}
    out = []
    for name in ("one", "two"):
        table_files = as_the_rules_do("summary", files, cfg, tmp_path / name)  # rule analysis, then rule table
        df = write_table(TABLES["summary"], table_files, cfg, tmp_path / f"{name}.csv", tmp_path / f"{name}.md")
        out.append(((tmp_path / f"{name}.csv").read_bytes(), (tmp_path / f"{name}.md").read_bytes()))
    assert out[0] == out[1]
    assert df.set_index("target").loc["pad", "verdict"] == "leaks"
    csv = pd.read_csv(tmp_path / "one.csv", keep_default_na=False)
    for c in ("dataset", "target", "defenses", "attack", "variant", "auc", "auc_lo", "auc_hi", "verdict"):
        assert c in csv.columns
    assert csv["defenses"].tolist() == ["", "pad"]  # undefended first
    assert csv["n_members"].tolist() == [20, 20]
    md = (tmp_path / "one.md").read_text()
    # the controls' false-alarm simulation runs in the analysis and reaches the footnote through its parquet
    assert "Chance of a spurious 'control failed' in this run" in md
    assert md.startswith(f"# {TABLES['summary'].title}\n")
    assert all(f"- {n}" in md for n in TABLES["summary"].notes)


def test_attach_controls_flags_both_control_kinds():
    def row(target, auc, lo, hi):
        return {"dataset": "d", "target": target, "variant": "v", "auc": auc, "auc_lo": lo, "auc_hi": hi, "note": ""}

    targets = {
        "t": {"control": "none"},
        "t--null-db": {"control": "null_database"},
        "t--no-retrieval": {"control": "no_retrieval"},
    }
    df = pd.DataFrame(
        [row("t", 0.8, 0.7, 0.9), row("t--null-db", 0.5, 0.4, 0.6), row("t--no-retrieval", 0.7, 0.6, 0.8)]
    )
    note = attach_controls(df, targets).loc[0, "note"]
    assert note == (
        "no-retrieval (k = 0) control AUC [0.60, 0.80] excludes 0.5: the attack separates members from "
        "non-members without any retrieval"
    )
    df.loc[1, ["auc_lo", "auc_hi"]] = [0.2, 0.45]  # both excluding 0.5: both flagged
    note = attach_controls(df, targets).loc[0, "note"]
    assert note.startswith("null-database control AUC [0.20, 0.45] excludes 0.5: the attack separates candidates")
    assert "; no-retrieval (k = 0) control AUC [0.60, 0.80] excludes 0.5" in note
    df.loc[2, ["auc_lo", "auc_hi"]] = [0.5, 0.8]  # touching 0.5 does not exclude it
    assert "no-retrieval" not in attach_controls(df, targets).loc[0, "note"]


@pytest.mark.parametrize("n", [0])
def test_summary_of_no_rows_has_the_columns(n):
    df = summary_frame(metrics().iloc[n:0], TARGETS)
    assert df.empty and "verdict" in df.columns


def test_summary_markdown_keeps_eight_columns_with_two_datasets():
    m = pd.concat([metrics(), metrics().assign(dataset="e")], ignore_index=True)
    md = summary_markdown(summary_frame(m, TARGETS), "S")
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") + 1 == 8 for line in table)
    assert table[0].startswith("| dataset/target | attack/variant |")
    assert any(line.startswith("| e/pad (pad) | a/leaky |") for line in table)
    assert "Dataset:" not in md


# ---------------------------------------------------------------------------------------------------
# the control rule at a known false-alarm rate (Holm over the run's controls) and the cells' Holm reading

NULL_TARGETS = {
    "t": {"defenses": [], "control": "none"},
    "t--null-db": {"defenses": [], "control": "null_database"},
    "t--no-retrieval": {"defenses": [], "control": "no_retrieval"},
}


def twenty_controls(first_null=(0.27, 0.15, 0.45), first_p=0.02, main_p=1e-6):
    """10 headline variants of t, each with a null-db and a k=0 control: 20 informative controls, all
    at chance but the first null-db control (a per-test rejection at p ≈ first_p)."""
    rows = []
    for i in range(10):
        v = f"a/v{i}"
        rows.append(mrow("t", v, (0.9, 0.78, 0.96), auc_p=main_p * 2, auc_p_greater=main_p))
        null = first_null if i == 0 else (0.52, 0.35, 0.68)
        rows.append(mrow("t--null-db", v, null, auc_p=first_p if i == 0 else 0.8, auc_p_greater=0.4))
        rows.append(mrow("t--no-retrieval", v, (0.48, 0.32, 0.65), auc_p=0.85, auc_p_greater=0.6))
    return pd.DataFrame(rows)


def test_one_of_twenty_null_controls_rejecting_at_p_002_does_not_fail_the_cell():
    df = summary_frame(twenty_controls(), NULL_TARGETS)
    by = df.set_index(["target", "variant"])
    assert by.loc[("t", "a/v0"), "verdict"] == "leaks"  # the former rule read "control failed"
    assert by.loc[("t", "a/v0"), "verdict_detail"] == (
        "null-db AUC 0.27 [0.15, 0.45]: excludes 0.5 per test (p = 0.02), not after Holm over the run's 20 "
        "controls (adjusted p = 0.4)"
    )
    assert (df["n_run_controls"] == 20).all()
    assert by.loc[("t", "a/v0"), "controls_failed_per_test"] == 1
    assert by.loc[("t", "a/v0"), "controls_failed_holm"] == 0
    assert by.loc[("t", "a/v0"), "control_p_null_database"] == 0.02
    md = summary_markdown(df, "S")
    assert "- Controls: 1 of 20 informative controls exclude 0.5 per test" in md
    assert "0 after Holm over the run's 20" in md
    assert "| leaks (also after Holm) (null-db AUC 0.27 [0.15, 0.45]: excludes 0.5 per test" in md


def test_the_footnote_gives_the_simulated_false_alarm_rate_of_both_rules():
    from ragmi.analysis.summary import control_false_alarm_rates

    md = summary_markdown(summary_frame(twenty_controls(), NULL_TARGETS), "S")
    rates = control_false_alarm_rates([(20, 20)] * 20, [("d", "t", "a", k) for k in ("null-db", "k=0")] * 10)
    # Holm keeps the run's chance of a spurious 'control failed' at about 5% (at most, up to the simulation's
    # error); the former rule raised it to 1 - 0.95^20 ≈ 64% for independent controls
    assert rates["holm_independent"] <= 0.05 + 0.015 and rates["old_independent"] > 0.55
    assert rates["holm_shared"] <= rates["holm_independent"] + 0.015 and rates["old_shared"] < rates["old_independent"]
    assert f"{rates['holm_independent']:.1%} independent, {rates['holm_shared']:.1%} with the variants" in md
    assert f"(any 95% interval excluding 0.5) {rates['old_independent']:.0%} and {rates['old_shared']:.0%}" in md


def test_a_control_that_rejects_after_holm_still_fails_the_cell():
    m = twenty_controls(first_null=(0.88, 0.75, 0.95), first_p=1e-5)
    by = summary_frame(m, NULL_TARGETS).set_index(["target", "variant"])
    assert by.loc[("t", "a/v0"), "verdict"] == "control failed"
    assert by.loc[("t", "a/v0"), "controls_failed_holm"] == 1
    assert by.loc[("t", "a/v0"), "verdict_detail"].startswith(
        "null-db AUC 0.88 [0.75, 0.95] excludes 0.5 after Holm (p = 1e-05, adjusted 2e-04)"
    )
    assert by.loc[("t", "a/v1"), "verdict"] == "leaks"


def test_the_footnote_counts_a_failing_control_behind_an_uninformative_main_row():
    m = twenty_controls(first_null=(0.88, 0.75, 0.95), first_p=1e-5)
    main = (m["target"] == "t") & (m["variant"] == "a/v0")
    m.loc[main, ["informative", "uninformative_reason"]] = [False, "constant scores"]
    df = summary_frame(m, NULL_TARGETS)
    assert df.set_index("variant").loc["a/v0", "verdict"] == "uninformative"
    md = summary_markdown(df, "S")
    assert "- Controls: 1 of 20 informative controls exclude 0.5 per test" in md
    assert "1 after Holm over the run's 20" in md


def test_verdict_holm_reads_the_cells_family_wise():
    rows = [mrow("t", f"a/v{i}", (0.7, 0.55, 0.82), auc_p_greater=0.03, auc_p=0.06) for i in range(19)]
    rows.append(mrow("t", "a/strong", (0.95, 0.84, 0.99), auc_p_greater=1e-6, auc_p=2e-6))
    df = summary_frame(pd.DataFrame(rows), {"t": {"defenses": [], "control": "none"}})
    by = df.set_index("variant")
    assert (df["verdict"] == "leaks").all()
    assert by.loc["a/strong", "verdict_holm"] == "leaks"
    assert by.loc["a/v0", "verdict_holm"] == "no evidence after Holm"
    assert by.loc["a/v0", "auc_p_greater_holm"] == pytest.approx(0.57)  # Holm: 19 × 0.03, step-down maxima
    md = summary_markdown(df, "S")
    assert "- Family-wise: 20 of 20 tested cells leak read one by one (95% interval above 0.5), 1 after Holm" in md
    assert "| leaks (not after Holm) |" in md and "| leaks (also after Holm) |" in md


def test_the_false_alarm_benchmark_runs_at_a_tiny_size(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "control_rule.py"
    spec = importlib.util.spec_from_file_location("control_rule", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--reps", "50", "--controls", "3", "--sizes", "8"]) == 0
    out = capsys.readouterr().out
    assert "m=3   n=8+8: Holm " in out and "former rule " in out
