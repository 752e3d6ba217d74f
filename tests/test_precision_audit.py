"""ragmi.precision_audit: two runs that differ only in the generator's dtype, compared cell by cell (known
pairs of score sets whose verdict must move and must not), and benchmarks/precision.py's comparison of two
results trees."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from ragmi.precision_audit import OUTSIDE, SAME, WITHIN, auc_interval_verdict, compare_cell, compare_runs

ROOT = Path(__file__).resolve().parents[1]
LABELS = np.array([1] * 20 + [0] * 20)


def test_a_pair_that_differs_by_rounding_keeps_its_verdict():
    rng = np.random.default_rng(0)
    a = rng.normal(LABELS * 1.5, 1.0)
    b = a + rng.normal(0, 1e-3, a.size)  # what bf16 rounding does to a log-probability, roughly
    cell = compare_cell(LABELS, a, b)
    assert cell["verdict_a"] == cell["verdict_b"] == "leaks"
    assert cell["reading"] == SAME and not cell["verdict_moved"]
    assert cell["delta_lo"] <= 0 <= cell["delta_hi"] and abs(cell["delta_auc"]) < 0.01


def test_a_pair_whose_signal_precision_destroyed_moves_outside_the_interval():
    rng = np.random.default_rng(1)
    a = rng.normal(LABELS * 2.0, 1.0)  # AUC about 0.9: leaks
    b = np.where(rng.random(a.size) < 0.9, 0.0, 1.0)  # every answer "No" but a few: no signal left
    cell = compare_cell(LABELS, a, b)
    assert cell["verdict_a"] == "leaks" and cell["verdict_b"] != "leaks"
    assert cell["verdict_moved"] and cell["reading"] == OUTSIDE
    assert cell["delta_hi"] < 0


def test_a_borderline_cell_moves_within_the_paired_interval():
    """A cell whose AUC interval's lower end sits just above 0.5: one swap of two neighbouring candidates
    (a member and the non-member ranked just below it) moves its verdict, not its scores beyond chance."""
    rng = np.random.default_rng(2)
    for _ in range(5000):
        a = rng.normal(LABELS * 0.9, 1.0)
        if auc_interval_verdict(LABELS, a) != "leaks":
            continue
        order = np.argsort(a)
        pairs = [
            (order[i], order[i + 1]) for i in range(len(a) - 1) if LABELS[order[i]] == 0 and LABELS[order[i + 1]] == 1
        ]
        b = a.copy()
        i, j = pairs[0]
        b[i], b[j] = a[j], a[i]
        if auc_interval_verdict(LABELS, b) == "leaks":
            continue
        cell = compare_cell(LABELS, a, b)
        assert cell["delta_auc"] == pytest.approx(-1 / 400)
        assert cell["verdict_moved"] and cell["reading"] == WITHIN, cell
        return
    pytest.fail("no borderline pair found")


def test_given_verdicts_are_used_and_a_move_without_a_score_change_is_within():
    rng = np.random.default_rng(3)
    a = rng.normal(LABELS, 1.0)
    cell = compare_cell(LABELS, a, a, "leaks", "control failed")  # a control's verdict moved, not this cell's
    assert cell["verdict_moved"] and cell["reading"] == WITHIN and cell["delta_auc"] == 0.0


def _tree(root: Path, scores: dict[str, np.ndarray], verdicts: dict[str, str]) -> None:
    ids = [f"d{i:02d}" for i in range(40)]
    split = root / "results/split/synthetic"
    split.mkdir(parents=True)
    pd.DataFrame({"doc_id": ids, "label": LABELS, "role": "eval"}).to_parquet(split / "candidates.parquet")
    sc = root / "results/scores/synthetic/qwen-rag"
    sc.mkdir(parents=True)
    pd.DataFrame(
        [{"doc_id": d, "variant": v, "score": float(s[i])} for v, s in scores.items() for i, d in enumerate(ids)]
    ).to_parquet(sc / "rag_mia.parquet")
    (root / "results/tables").mkdir(parents=True)
    pd.DataFrame(
        [
            {"dataset": "synthetic", "target": "qwen-rag", "attack": "rag_mia", "variant": v, "verdict": verdicts[v]}
            for v in scores
        ]
    ).to_csv(root / "results/tables/summary.csv", index=False)


def test_benchmarks_precision_compares_two_results_trees(tmp_path):
    """benchmarks/precision.py --compare on two small results trees (its smoke test): one cell keeps its
    verdict, one moves outside the interval; the CSV and the sentence say so."""
    rng = np.random.default_rng(4)
    keep = rng.normal(LABELS * 1.5, 1.0)
    lose = rng.normal(LABELS * 2.0, 1.0)
    _tree(
        tmp_path / "fp32",
        {"rag_mia/gray/t2": keep, "rag_mia/black/t2": lose},
        {"rag_mia/gray/t2": "leaks", "rag_mia/black/t2": "leaks"},
    )
    _tree(
        tmp_path / "bf16",
        {"rag_mia/gray/t2": keep + 1e-4, "rag_mia/black/t2": rng.permutation(lose)},
        {"rag_mia/gray/t2": "leaks", "rag_mia/black/t2": "no evidence at this n"},
    )
    direct = compare_runs(tmp_path / "fp32", tmp_path / "bf16")
    assert list(direct["reading"]) == [SAME, OUTSIDE]
    out = tmp_path / "cmp.csv"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/precision.py"),
            "--compare",
            str(tmp_path / "fp32"),
            str(tmp_path / "bf16"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 of 2 verdicts equal" in proc.stdout and "1 moved outside it" in proc.stdout
    assert pd.read_csv(out)["reading"].tolist() == [SAME, OUTSIDE]


def test_two_runs_of_different_splits_are_refused(tmp_path):
    rng = np.random.default_rng(5)
    s = rng.normal(LABELS, 1.0)
    _tree(tmp_path / "a", {"v": s}, {"v": "leaks"})
    _tree(tmp_path / "b", {"v": s}, {"v": "leaks"})
    c = pd.read_parquet(tmp_path / "b/results/split/synthetic/candidates.parquet")
    c["label"] = c["label"][::-1].to_numpy()
    c.to_parquet(tmp_path / "b/results/split/synthetic/candidates.parquet")
    with pytest.raises(ValueError, match="split synthetic differently"):
        compare_runs(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "b/results/split")
    with pytest.raises(FileNotFoundError, match="candidates of synthetic"):
        compare_runs(tmp_path / "a", tmp_path / "b")


def test_benchmarks_precision_plans_both_runs_of_the_default(tmp_path):
    """benchmarks/precision.py's run form, planned only (snakemake --dry-run): both workdirs get an overlay
    that sets every generator's dtype and nothing else, and Snakemake accepts the merged configuration."""
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/precision.py"),
            "--workdir",
            str(tmp_path),
            "--dry-run",
            "--cores",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for dtype in ("float32", "bfloat16"):
        assert yaml.safe_load((tmp_path / dtype / "overlay.yaml").read_text()) == {
            "generators": {"qwen": {"dtype": dtype}}
        }
        assert f"{dtype}: " in proc.stdout
