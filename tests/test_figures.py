"""The report's figures show the finding: each figure the registry declares draws a PNG from the frame of a
realistic run of the embedded default (tests/report_fixtures.py), and what it draws is checked on the
matplotlib figure itself — the privacy–utility figure plots PAD's effect on the channel it acts on, the
ROC curve of a perfect attack lies inside the axes, DCMI's sweeps are curves, the canaries are counted
before and after the output hooks — and ``snakemake -n`` on config/config.yaml schedules every figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from conftest import run_snakemake
from report_fixtures import candidates, default_config, draw, write_results

import ragmi.report.plots as plots
from ragmi.report.registry import TABLES, outputs

ROOT = Path(__file__).resolve().parents[1]
FIGURES = [  # (table, figure): the figures over the report tables that the default draws
    ("privacy_utility", "privacy_utility"),
    ("defense_effect", "defense_effect"),
    ("dcmi_ablation", "dcmi_sweep"),
    ("canaries", "canaries"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("default-run")
    cfg, files = write_results(root)
    return root, cfg, files


@pytest.fixture
def drawn(monkeypatch):
    """The matplotlib figures handed to the PNG writer (still written), in order."""
    figs = []
    save = plots.save_atomic

    def keep(fig, out_png):
        figs.append(fig)
        save(fig, out_png)

    monkeypatch.setattr(plots, "save_atomic", keep)
    return figs


def check_png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 5_000
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 300
    assert img[..., :3].std() > 0.01  # not a blank canvas
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_the_registry_declares_the_figures_and_the_default_builds_them():
    cfg = default_config()
    declared = {(t.name, f.name): f for t in TABLES.values() for f in t.figures}
    for table, figure in FIGURES:
        f = declared[(table, figure)]
        assert f.path == f"results/figures/{figure}.png" and (ROOT / f.caption).is_file()
    assert {f"results/figures/{figure}.png" for _, figure in FIGURES} <= set(outputs(cfg))


def test_a_dry_run_of_the_default_schedules_every_figure(tmp_path):
    out = run_snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/config.yaml"))
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    for _, figure in FIGURES:
        assert f"rule figure_{figure}:" in text and f"results/figures/{figure}.png" in text


@pytest.mark.parametrize("table, figure", FIGURES)
def test_each_figure_draws_a_png_from_its_table(run, table, figure):
    root, cfg, files = run
    check_png(draw(root, cfg, files, table, figure))


def test_privacy_utility_plots_the_channel_the_defense_acts_on(run, drawn):
    """PAD rewrites the answer text: its effect shows on the text attack, the canaries and the e-mails,
    not on the log-probability headline (both targets at 0 there, the old figure's only panel)."""
    root, cfg, files = run
    draw(root, cfg, files, "privacy_utility", "privacy_utility")
    (fig,) = drawn
    labels = [ax.get_ylabel() for ax in fig.axes if ax.get_visible()]
    assert any("answer text" in y for y in labels) and any("log-probabilities only" in y for y in labels)
    assert any("canaries" in y for y in labels) and any("NELstrict" in y for y in labels)
    notes = texts(fig)
    assert "extraction/zeng" in notes  # the text variant PAD changed most, named beside its point
    assert any(t.startswith("26 → 0 of 100") for t in notes)  # canaries before → after
    assert "32 → 9 per run" in notes
    text_ax = next(ax for ax in fig.axes if "answer text" in ax.get_ylabel())
    ys = [y for c in text_ax.containers for y in np.atleast_1d(c.lines[0].get_ydata())]
    assert ys and max(ys) < -0.2  # below 0: less leakage


def test_defense_effect_draws_every_variant_of_the_defended_target(run, drawn):
    root, cfg, files = run
    draw(root, cfg, files, "defense_effect", "defense_effect")
    (fig,) = drawn
    (ax,) = [a for a in fig.axes if a.get_visible()]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert "extraction/zeng" in ticks and "rag_mia/gray/t2 (indirect)" in ticks
    assert len(ticks) == 11  # every headline variant of PAD, none of the undefended target
    assert "pad" in ax.get_title()


def test_dcmi_sweep_is_one_curve_per_target_over_theta_and_gamma(run, drawn):
    root, cfg, files = run
    draw(root, cfg, files, "dcmi_ablation", "dcmi_sweep")
    (fig,) = drawn
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_xlabel() for a in axes] == ["θ", "γ", "γ"]
    theta, gamma, _ = axes
    assert len(theta.lines) == 4 + 1  # one curve per target (2 of them negative controls) and chance
    assert sorted(theta.lines[0].get_xdata()) == [0.06, 0.12]
    assert len(gamma.lines[0].get_xdata()) == 10  # the ten γ values, one curve
    assert theta.collections  # the 95% bands


def test_canaries_before_and_after_the_output_hooks(run, drawn):
    root, cfg, files = run
    draw(root, cfg, files, "canaries", "canaries")
    (fig,) = drawn
    notes = texts(fig)
    assert notes.count("14 → 14\nof 50") == 1 and "14 → 0\nof 50" in notes and "12 → 0\nof 50" in notes
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert labels[:2] == ["qwen-rag: before output hooks", "qwen-rag: in the answers"]  # undefended first


def test_roc_of_a_perfect_attack_lies_inside_the_axes(tmp_path, drawn):
    cand = candidates()
    rows = []
    for i, v in enumerate(["a/perfect", "b/perfect-too", "c/noise"]):
        score = cand["label"] * 5.0 + (i if i < 2 else np.random.default_rng(0).normal(0, 1, len(cand)))
        rows.append(cand.assign(variant=v, score=score))
    plots.plot_roc(pd.concat(rows, ignore_index=True), tmp_path / "roc.png", "perfect")
    check_png(tmp_path / "roc.png")
    (fig,) = drawn
    lin = fig.axes[0]
    assert lin.get_xlim() == plots.ROC_LIMITS and lin.get_ylim() == plots.ROC_LIMITS
    lo, hi = plots.ROC_LIMITS
    assert lo < 0 and hi > 1  # x = 0 and y = 1 are inside the frame
    curves = [line for line in lin.lines if line.get_label().startswith(("a/", "b/", "c/"))]
    assert len(curves) == 3 and len({(c.get_linestyle(), c.get_marker()) for c in curves}) == 3
    assert lin.get_legend() is None and fig.legends  # the legend is outside the panels


def test_sweep_points_leave_the_per_attack_figures():
    assert plots.sweep_point("dcmi/theta=0.06") and plots.sweep_point("dcmi/gamma=1.0")
    assert plots.sweep_point("ia/paper/n=3")
    assert not plots.sweep_point("dcmi/calibration=none") and not plots.sweep_point("dcmi/adv1")
    assert not plots.sweep_point("rag_mia/gray-pyes/t2/reading=first-topk")


def test_roc_axes_say_they_read_the_evaluation_roc_and_a_rule_point_its_realised_fpr(tmp_path, drawn):
    """Every TPR the ROC figure plots says which TPR it is: the axes the evaluation ROC's, a decision rule's
    point its TPR at the FPR it realised on the evaluation non-members, with intervals and n."""
    from ragmi.metrics import clopper_pearson

    cand = candidates()
    ev = cand[cand["role"] == "eval"]
    rng = np.random.default_rng(1)
    score = cand["label"] * 1.0 + rng.normal(0, 1, len(cand))
    decision = (score > 0.5).astype(float)  # a Yes/No attack: the score is its decision
    rows = [
        cand.assign(variant="a/score", score=score),
        cand.assign(variant="b/rule", score=decision, decision=decision),
    ]
    plots.plot_roc(pd.concat(rows, ignore_index=True), tmp_path / "roc.png", "t")
    (fig,) = drawn
    lin, log = fig.axes[:2]
    assert "evaluation ROC" in lin.get_ylabel() and "evaluation ROC" in log.get_ylabel()
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    rule = next(t for t in labels if t.startswith("b/rule"))
    e = ev.assign(d=(score[ev.index] > 0.5))
    tp, n_m = int(e[e["label"] == 1]["d"].sum()), int((e["label"] == 1).sum())
    fp, n_n = int(e[e["label"] == 0]["d"].sum()), int((e["label"] == 0).sum())
    (flo, fhi), (tlo, thi) = clopper_pearson(fp, n_n), clopper_pearson(tp, n_m)
    assert (
        f"rule: TPR {tp / n_m:.2f} [{tlo:.2f}, {thi:.2f}]\nat its eval FPR {fp / n_n:.2f} [{flo:.2f}, {fhi:.2f}], "
        f"n = {n_m}+{n_n}"
    ) in rule
