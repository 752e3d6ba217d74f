"""The report tables a person reads fit a screen: on a realistic results tree of the embedded default
(tests/report_fixtures.py: 20+20 candidates, the default FPR levels, PAD and both negative controls), each
wide table's Markdown starts with a core table of at most 10 columns whose lines fit in 160 characters
(the verdict early, then n, AUC, the headline TPR), says once what every row shares, and keeps every other
column under "## All columns"; the CSVs keep every column; signed changes say which way they go."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from report_fixtures import build_table, md_tables, records, write_results

MAX_CORE_COLUMNS = 10
MAX_WIDTH = 160


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("default-run")
    cfg, files = write_results(root)
    return root, cfg, files


@pytest.fixture(scope="module")
def tables(run):
    root, cfg, files = run
    return {name: build_table(root, cfg, files, name) for name in files}


def core_tables(md: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables before "## All columns" (a table may have several, one per block)."""
    out = []
    for t in md_tables(md):
        if t[0] == "All columns":
            break
        out.append(t)
    return out


def table_lines(md: str, header: list[str]) -> list[str]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line == "| " + " | ".join(header) + " |")
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


@pytest.mark.parametrize(
    "name, width",
    [
        ("attack_comparison", MAX_WIDTH),
        ("defense_effect", MAX_WIDTH),
        ("rag_mia", MAX_WIDTH),
        ("leakage_dashboard", MAX_WIDTH),
        ("privacy_utility", MAX_WIDTH),
        ("dcmi_ablation", 170),  # the long names of the negative-control targets on a no-evidence row
    ],
)
def test_core_tables_fit_a_screen(tables, name, width):
    _, md = tables[name]
    cores = core_tables(md)
    assert cores, name
    for _, header, rows in cores:
        assert len(header) <= MAX_CORE_COLUMNS, (name, header)
        assert rows and all(len(r) == len(header) for r in rows)
        widest = max(table_lines(md, header), key=len)
        assert len(widest) <= width, (name, len(widest), widest)


@pytest.mark.parametrize("name", ["attack_comparison", "defense_effect", "rag_mia", "dcmi_ablation"])
def test_metric_tables_put_the_verdict_early_and_the_rest_below(tables, name):
    df, md = tables[name]
    (_, core, rows), *_ = core_tables(md)
    # the row's name, then its verdict; AUC and the headline TPR in the core
    assert core.index("verdict") <= 2 and "AUC" in core
    assert any(c.startswith("TPR@") and c.endswith("(eval ROC)") for c in core)
    assert any(c.startswith("TPR at ref. threshold") for c in core)
    # every column of the old layout is somewhere: in the core, in the caption, or under All columns
    heading, rest, _ = md_tables(md)[-1]
    assert heading == "All columns"
    assert "n ref (m/nm)" in rest or "n ref (m/nm) 20/20" in md
    assert "TPR at ref. threshold for 0% FPR" in rest
    for c in ("Rule TPR", "Rule FPR", "Best-threshold acc. (ragmi)", "queries/candidate"):
        assert c in rest or f"; {c} " in md, c  # below, or the same in every row
    # a column with one value in every row is said once, above the table, not repeated in it
    caption = next(line for line in md.splitlines() if line.startswith("Same in every row: "))
    assert "dataset synthetic" in caption and "n eval (m/nm) 20/20" in caption
    assert "dataset" not in core and "n eval (m/nm)" not in core
    for level in ("0.5", "1"):  # 20 non-members resolve neither level: n/e in every row, in the caption only
        assert f"TPR@{level}%FPR (eval ROC) n/e" in caption
        assert f"TPR@{level}%FPR (eval ROC)" not in rest and f"TPR@{level}%FPR (eval ROC)" not in core
    # the attack is the variant's first part: no column of its own
    assert "attack" not in core and "attack" not in rest


def test_the_csvs_keep_every_column(run, tables):
    root, cfg, files = run
    metrics = pd.concat([pd.read_csv(f) for f in files["attack_comparison"]["metrics"]], ignore_index=True)
    for name in ("attack_comparison", "defense_effect"):
        csv = pd.read_csv(root / f"results/tables/{name}.csv")
        assert set(metrics.columns) <= set(csv.columns), name
    effect = pd.read_csv(root / "results/tables/defense_effect.csv")
    assert {"defenses", "channels", "effect", "verdict", "delta_auc", "delta_auc_lo", "delta_auc_hi"} <= set(effect)
    dash = pd.read_csv(root / "results/tables/leakage_dashboard.csv")
    assert {"block", "pool", "hooks active", "runs (raw)", "Email change", "EMAIL_REAL_mean"} <= set(dash.columns)


def test_defense_effect_core_reads_the_change(tables):
    _, md = tables["defense_effect"]
    (_, core, rows), *_ = core_tables(md)
    assert core[:4] == ["target", "variant", "verdict", "ΔAUC [95% CI]"]
    by = {(r["target"], r["variant"]): r for r in records((None, core, rows))}
    zeng = by[("pad (pad)", "extraction/zeng")]
    assert zeng["verdict"] == "reduces" and zeng["ΔAUC [95% CI]"].startswith("−")
    assert by[("pad (pad)", "rag_mia/gray/t2")]["verdict"] == "indirect"
    assert by[("qwen-rag", "rag_mia/gray/t2")]["verdict"] == "baseline"
    # the effect text (with ΔTPR) and the channels are under All columns
    rest = md_tables(md)[-1][1]
    assert "effect" in rest and "channels" in rest


def test_dashboard_changes_say_which_way_they_go(tables):
    df, md = tables["leakage_dashboard"]
    pad = df[(df["block"] == "per target") & (df["target"] == "pad")].iloc[0]
    assert pad["Email change"] == "−23 e-mails/run (−100%)"  # 23 -> 0: a decrease, with its unit
    assert pad["Name change"] == "±0 names/run (0%)"
    cores = core_tables(md)
    assert [h for h, _, _ in cores] == ["Pooled per defense kind", "Per target"]
    for _, header, rows in cores:
        assert "Δ e-mails/run" in header
        cells = {c for r in rows for c in r}
        assert "−23 e-mails/run (−100%)" in cells
        assert not any(re.fullmatch(r"\+\d+(\.\d+)?%", c) for c in cells)  # no bare "+100.0%" for a decrease
    assert "Same in every row: dataset synthetic" in md


def test_privacy_utility_reads_per_target_and_per_measure(tables):
    df, md = tables["privacy_utility"]
    cores = core_tables(md)
    assert [h for h, _, _ in cores] == [
        "Leakage, per target",
        "Copied by an adaptive extraction campaign, per target (dgea/white, 10 queries, 3 seeds)",
        "Utility, per target and measure",
    ]
    copied = {r["target"]: r for r in records(cores[1])}
    assert copied["qwen-rag"]["Δ copied [95% CI]"] == "baseline"
    assert (
        copied["pad (pad)"]["Δ copied [95% CI]"].endswith(")")
        and "%" in copied["pad (pad)"]["copied verbatim [95% CI]"]
    )
    cores = [cores[0], cores[2]]
    leak = {r["target"]: r for r in records(cores[0])}
    assert len(leak) == 2  # one row per target, not one per utility measure
    text = next(c for c in cores[0][1] if c.startswith("ΔAUC, answer text"))
    logprobs = next(c for c in cores[0][1] if c.startswith("ΔAUC, log-probabilities only"))
    assert text == "ΔAUC, answer text (extraction/zeng)"  # the variant PAD changed most on the channel it acts on
    assert (
        leak["pad (pad)"][text].startswith("−") and leak["pad (pad)"][logprobs] == "+0.00 [−0.04, +0.04]"
    )  # identical scores: MOVER keeps a width
    assert leak["pad (pad)"]["canaries (p)"].startswith("0/100 (p = ")
    assert leak["qwen-rag"]["canaries (p)"] == "26/100"
    assert len(records(cores[1])) == 2 * 4
    pad = df[(df["target"] == "pad") & (df["utility_metric"] == "f1")].iloc[0]
    assert pad["text_variant"] == "extraction/zeng" and pad["text_delta_auc_hi"] < 0
    assert pad["logprobs_delta_auc"] == 0.0 and pad["delta_auc"] == 0.0  # the headline variant reads log-probs
