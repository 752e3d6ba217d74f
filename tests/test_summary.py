"""The headline summary table: verdicts (leaks, inverted, no evidence, control failed), the TPR level
the reference set resolves, costs, the power footnote, determinism; and the control flags of the
comparison table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragmi.metrics import evaluate, metric_columns, min_detectable_auc
from ragmi.report.comparison import attach_controls
from ragmi.report.registry import TABLES, write_table
from ragmi.report.summary import auc_verdict, summary_frame, summary_markdown

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
            mrow("t--null-db", "a/leaky", (0.7, 0.6, 0.8)),  # the null-db control separates: control failed
            mrow("t--no-retrieval", "a/leaky", (0.5, 0.4, 0.6)),
            mrow("t", "b/inv", (0.3, 0.2, 0.4)),
            mrow("t--null-db", "b/inv", (0.5, 0.45, 0.55)),
            mrow("t--no-retrieval", "b/inv", (0.35, 0.25, 0.45)),  # k = 0 below 0.5: control failed too
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
        ("pad", "a/leaky"),
        ("pad", "b/inv"),
        ("pad", "c/chance"),
        ("t", "a/leaky"),
        ("t", "b/inv"),
        ("t", "c/chance"),
        ("t", "g/gray"),
    ]  # control targets and sweep points left out, metrics order kept
    v = dict(zip(zip(df["target"], df["variant"]), df["verdict"]))
    assert v[("pad", "a/leaky")] == "leaks"
    assert v[("pad", "b/inv")] == "inverted"
    assert v[("pad", "c/chance")] == "no evidence at this n"
    assert v[("t", "a/leaky")] == "control failed"  # would be "leaks" without the null-db control
    assert v[("t", "b/inv")] == "control failed"  # the k = 0 control excludes 0.5 (from below)
    assert v[("t", "c/chance")] == "no evidence at this n"  # its controls contain 0.5
    assert v[("t", "g/gray")] == "not computed"
    by = df.set_index(["target", "variant"])
    assert by.loc[("t", "a/leaky"), "verdict_detail"] == (
        "null-db AUC 0.70 [0.60, 0.80] excludes 0.5 (own verdict: leaks)"
    )
    assert "k=0 AUC 0.35 [0.25, 0.45] excludes 0.5" in by.loc[("t", "b/inv"), "verdict_detail"]
    assert by.loc[("t", "c/chance"), "controls"] == "null-db AUC 0.50 [0.40, 0.60]"
    assert by.loc[("t", "g/gray"), "verdict_detail"] == "skipped: no log-probabilities"
    assert by.loc[("pad", "a/leaky"), "defenses"] == "pad" and by.loc[("t", "a/leaky"), "defenses"] == ""
    # TPR at the lowest non-zero level the reference set resolves: 5% with 40 (0.5% needs 200, 1% needs
    # 100); with 3 reference non-members no non-zero level, TPR@0%FPR with a note
    assert by.loc[("pad", "a/leaky"), "tpr_fpr"] == 0.05 and by.loc[("pad", "a/leaky"), "tpr"] == 0.4
    assert by.loc[("pad", "a/leaky"), "tpr_note"] == ("TPR@0.5% and 1% FPR not estimable with 40 reference non-members")
    assert by.loc[("pad", "c/chance"), "tpr_fpr"] == 0.0 and by.loc[("pad", "c/chance"), "tpr"] == 0.1
    assert by.loc[("pad", "a/leaky"), "tokens_per_candidate"] == 120.5
    assert by.loc[("pad", "a/leaky"), "min_detectable_auc"] == min_detectable_auc(20, 20)
    wide = metrics().assign(n_ref_nonmembers=100)
    assert summary_frame(wide, TARGETS)["tpr_fpr"].iloc[0] == 0.01  # 100 resolve 1%


def test_summary_markdown_is_narrow_and_explains_power():
    df = summary_frame(metrics(), TARGETS)
    md = summary_markdown(df, "Summary", notes=["a note"])
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") + 1 <= 10 for line in table)
    assert table[0].startswith("| dataset | target | defenses | attack/variant | n eval (m/nm) | AUC [95% CI] |")
    row = next(line for line in table if "| pad | pad | a/leaky |" in line)
    assert "| 20/20 | 0.80 [0.70, 0.90] | TPR@5%FPR 0.40 [0.30, 0.50] | 2 | 120 | leaks |" in row
    t_row = next(line for line in table if "| t | none | a/leaky |" in line)
    assert t_row.endswith("| control failed (null-db AUC 0.70 [0.60, 0.80] excludes 0.5 (own verdict: leaks)) |")
    assert "TPR@0%FPR 0.10 [0.00, 0.20]" in md
    x = min_detectable_auc(20, 20)
    assert f"the smallest AUC whose 95% interval excludes 0.5 at n = 20+20 is about {x:.2f}" in md
    assert "Hanley–McNeil 1982" in md and md.endswith("- a note\n")
    assert "coarser here: TPR@0.5% and 1% FPR not estimable with 40 reference non-members; " in md
    assert "; no non-zero FPR level estimable with 3 reference non-members." in md
    # 5 control intervals (a/leaky and b/inv two each, c/chance one), 2 of them excluding 0.5
    assert (
        "- Controls: 2 of 5 control AUC intervals exclude 0.5. With 95% intervals about 0.25 would by chance alone (23% "
        in md
    )
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
    m = evaluate(pd.concat(parts), n_boot=50, seed=1, costs={variant: {"queries_per_candidate": 1.0, **extra}})
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
        df = write_table(TABLES["summary"], files, cfg, tmp_path / f"{name}.csv", tmp_path / f"{name}.md")
        out.append(((tmp_path / f"{name}.csv").read_bytes(), (tmp_path / f"{name}.md").read_bytes()))
    assert out[0] == out[1]
    assert df["verdict"].tolist()[0] == "leaks"
    csv = pd.read_csv(tmp_path / "one.csv", keep_default_na=False)
    for c in ("dataset", "target", "defenses", "attack", "variant", "auc", "auc_lo", "auc_hi", "verdict"):
        assert c in csv.columns
    assert csv["defenses"].tolist() == ["pad", ""]
    assert csv["n_members"].tolist() == [20, 20]
    md = (tmp_path / "one.md").read_text()
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
