"""Tables and figures written by ragmi.report into a temporary directory."""

from __future__ import annotations

import os

import matplotlib.figure
import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from report_fixtures import md_tables

from ragmi.cells import format_extra
from ragmi.metrics import evaluate, metric_columns
from ragmi.report.plots import plot_roc, plot_score_distributions
from ragmi.report.tables import write_tables


def metrics_row(variant, attack, auc=(0.8123, 0.7512, 0.8649), bb=None, **extra):
    """A metrics row with hand-chosen numbers (only the columns the table reads)."""
    row = {c: np.nan for c in metric_columns()}
    row.update(
        variant=variant,
        n_ref_members=40,
        n_ref_nonmembers=40,
        n_members=50,
        n_nonmembers=50,
        n_boot=1000,
        auc=auc[0],
        auc_lo=auc[1],
        auc_hi=auc[2],
        threshold_accuracy=0.66,
        threshold_accuracy_lo=0.57,
        threshold_accuracy_hi=0.75,
        tpr_at_fpr_0=0.02,
        tpr_at_fpr_0_lo=0.0,
        tpr_at_fpr_0_hi=0.06,
        fpr_realized_0=0.0,
        fpr_realized_0_lo=0.0,
        fpr_realized_0_hi=0.0711,
        **{"tpr_at_fpr_0.5": 0.04, "tpr_at_fpr_0.5_lo": 0.0, "tpr_at_fpr_0.5_hi": 0.1, "fpr_realized_0.5": 0.02},
        tpr_at_fpr_1=0.1,
        tpr_at_fpr_1_lo=0.02,
        tpr_at_fpr_1_hi=0.18,
        fpr_realized_1=0.02,
        tpr_at_fpr_5=0.3,
        tpr_at_fpr_5_lo=0.18,
        tpr_at_fpr_5_hi=0.44,
        fpr_realized_5=0.06,
        fpr_realized_5_lo=0.0125,
        fpr_realized_5_hi=0.1655,
    )
    if bb is not None:  # a decision rule: its accuracy and rates
        row.update(bb_tpr=bb[0], bb_tpr_lo=bb[1], bb_tpr_hi=bb[2], bb_fpr=bb[3], bb_fpr_lo=bb[4], bb_fpr_hi=bb[5])
        row.update(accuracy=0.7, accuracy_lo=0.61, accuracy_hi=0.79)
    row.update(attack=attack, dataset="nq", **extra)
    return row


@pytest.fixture
def metrics_df():
    return pd.DataFrame(
        [
            metrics_row(
                "s2mia/gray/bleu",
                "s2mia",
                auc=(0.6, 0.5, 0.7),
                queries_per_candidate=1,
                prompt_tokens_per_candidate=1234.4,
                candidate_retrieved_rate=0.954,
                no_answer_rate=0.0,
            ),
            metrics_row(
                "rag_mia/black/yesno",
                "rag_mia",
                bb=(0.9, 0.81, 0.97, 0.2, 0.1, 0.31),
                queries_per_candidate=3,
                prompt_tokens_per_candidate=812.25,
                candidate_retrieved_rate=0.5,
                no_answer_rate=np.nan,
            ),
        ]
    )


def scores_frame(n_variants, n=60, seed=0, black_box=()):
    rng = np.random.default_rng(seed)
    parts = []
    for i in range(n_variants):
        v = f"attack{i}/gray/t{i}"
        for role in ("reference", "eval"):
            s = np.r_[rng.normal(0.5 + 0.1 * i, 1, n), rng.normal(0, 1, n)]
            lab = np.r_[np.ones(n, int), np.zeros(n, int)]
            dec = (s > 0.3).astype(float) if i in black_box else np.full(2 * n, np.nan)
            parts.append(
                pd.DataFrame(
                    dict(
                        doc_id=[f"{role}{j}" for j in range(2 * n)],
                        variant=v,
                        score=s,
                        decision=dec,
                        label=lab,
                        role=role,
                        text="ignored extra column",
                    )
                )
            )
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------
def test_markdown_cells_and_footnote(metrics_df, tmp_path):
    out_csv, out_md = tmp_path / "t" / "m.csv", tmp_path / "t" / "m.md"
    extra = ["queries_per_candidate", "prompt_tokens_per_candidate", "candidate_retrieved_rate", "no_answer_rate"]
    write_tables(metrics_df, out_csv, out_md, "Leakage on NQ", extra_columns=extra, notes=["Generator: SmolLM2."])
    md = out_md.read_text()
    lines = md.splitlines()
    assert lines[0] == "# Leakage on NQ"
    (_, core, core_rows), (heading, rest, rest_rows) = md_tables(md)
    # the core: the row's name (the attack is the variant's first part), its verdict, AUC, the rule's accuracy;
    # what every row shares is said once, above it
    assert core == ["variant", "verdict", "AUC", "Accuracy (decision rule)"]
    caption = next(line for line in lines if line.startswith("Same in every row: "))
    assert "dataset nq; n eval (m/nm) 50/50;" in caption and "n ref (m/nm) 40/40" in caption
    # 50 evaluation non-members resolve 5% FPR on the evaluation ROC, not 0.5% or 1%: n/e in every row
    assert "TPR@5%FPR (eval ROC) n/e" in caption and "TPR@0.5%FPR (eval ROC) n/e" in caption
    # 40 reference non-members cannot resolve 0.5% or 1% FPR (200 and 100 needed): n/e, not a number
    assert "TPR at ref. threshold for 5% FPR (FPR it realised, n) 0.30 [0.18, 0.44] (FPR 0.06, n = 50)" in caption
    assert "TPR at ref. threshold for 0.5% FPR n/e" in caption and "TPR at ref. threshold for 1% FPR n/e" in caption
    assert "TPR at ref. threshold for 0% FPR 0.02 [0.00, 0.06] (eval FPR 0.00 [0.00, 0.07], n = 50)" in caption
    assert "Best-threshold acc. (ragmi) 0.66 [0.57, 0.75]" in caption
    assert "0.04 [0.00, 0.10]" not in md
    # sorted by attack: rag_mia before s2mia
    assert core_rows == [
        ["rag_mia/black/yesno", "leaks", "0.81 [0.75, 0.86]", "0.70 [0.61, 0.79]"],
        ["s2mia/gray/bleu", "no evidence at this n", "0.60 [0.50, 0.70]", "–"],  # no decision rule: no accuracy
    ]
    # every other column under "All columns", the row's name first
    assert heading == "All columns"
    assert rest == [
        "variant",
        "Rule TPR",
        "Rule FPR",
        "queries/candidate",
        "prompt tokens/candidate",
        "candidate retrieved",
        "no answer",
    ]
    assert rest_rows[0] == ["rag_mia/black/yesno", "0.90 [0.81, 0.97]", "0.20 [0.10, 0.31]", "3", "812", "50.0%", "–"]
    assert rest_rows[1] == ["s2mia/gray/bleu", "–", "–", "1", "1,234", "95.4%", "0.0%"]
    assert "reference set" in md and "evaluation set" in md
    assert "Carlini et al. 2022" in md
    assert "- Generator: SmolLM2." in md
    # 40 reference non-members: 0.5% and 1% FPR are below 1/40, 5% is not
    assert "- n/e = not estimable: a threshold at x% FPR needs at least 1/x reference non-members " in md
    assert "(0.5% needs 200, 1% needs 100); with 40 reference non-members" in md
    assert ", 5% needs" not in md and "(5% needs" not in md
    assert not [p for p in out_md.parent.iterdir() if p.name.startswith(".")]  # no temp files


def test_core_verdicts_of_skipped_and_control_failed_rows(metrics_df, tmp_path):
    """The core's verdict is the summary's, from the row alone: a skipped variant is 'not computed' (every
    number a dash), a row whose note flags a failing negative control is 'control failed'."""
    skipped = {c: np.nan for c in metrics_df.columns} | {
        "dataset": "nq",
        "attack": "rag_mia",
        "variant": "rag_mia/gray/t2",
        "skipped": "skipped: the target returns no log-probabilities",
    }
    df = pd.concat([metrics_df, pd.DataFrame([skipped])], ignore_index=True)
    df["note"] = ["null-database control AUC [0.61, 0.83] excludes 0.5: the attack separates …", "", ""]
    write_tables(df, tmp_path / "m.csv", tmp_path / "m.md", "t", extra_columns=["skipped", "note"])
    md = (tmp_path / "m.md").read_text()
    (_, core, rows), (_, rest, rest_rows) = md_tables(md)
    by = {r[0]: dict(zip(core, r)) for r in rows}
    assert by["s2mia/gray/bleu"]["verdict"] == "control failed"
    assert by["rag_mia/black/yesno"]["verdict"] == "leaks"
    gray = by["rag_mia/gray/t2"]
    assert gray["verdict"] == "not computed" and gray["AUC"] == "–" and gray["n eval (m/nm)"] == "–"
    assert all(v == "–" for k, v in gray.items() if k.startswith("TPR"))
    notes = {r[0]: dict(zip(rest, r)) for r in rest_rows}
    assert notes["rag_mia/gray/t2"]["skipped"] == "skipped: the target returns no log-probabilities"


def test_csv_keeps_every_column_at_full_precision(metrics_df, tmp_path):
    df = metrics_df.assign(auc=[0.1 + 0.2, 1 / 3])
    write_tables(df, tmp_path / "m.csv", tmp_path / "m.md", "t")
    back = pd.read_csv(tmp_path / "m.csv")
    assert list(back.columns) == list(df.columns)
    assert back["auc"].tolist() == [0.1 + 0.2, 1 / 3]


def test_table_without_black_box_has_no_bb_columns(metrics_df, tmp_path):
    write_tables(metrics_df.iloc[:1], tmp_path / "m.csv", tmp_path / "m.md", "t")
    md = (tmp_path / "m.md").read_text()
    assert "Rule TPR" not in md and "| 0.60 [0.50, 0.70] |" in md
    # one row: nothing is moved to a caption
    (_, core, rows), (_, rest, _) = md_tables(md)
    assert core[:4] == ["dataset", "variant", "verdict", "n eval (m/nm)"] and rows[0][:3] == [
        "nq",
        "s2mia/gray/bleu",
        "no evidence at this n",
    ]
    assert "n ref (m/nm)" in rest and "Same in every row" not in md


def test_table_from_evaluate_output(tmp_path):
    m = evaluate(scores_frame(2, black_box=(1,)), n_boot=100)
    write_tables(m, tmp_path / "m.csv", tmp_path / "m.md", "real")
    md = (tmp_path / "m.md").read_text()
    r = m.iloc[0]
    assert f"{r.auc:.2f} [{r.auc_lo:.2f}, {r.auc_hi:.2f}]" in md
    (_, core, rows), (_, rest, rest_rows) = md_tables(md)
    assert [row[0] for row in rows] == ["attack0/gray/t0", "attack1/gray/t1"]
    assert "n eval (m/nm) 60/60; n ref (m/nm) 60/60" in md  # the same in both rows: said once
    assert "with 60 reference non-members" in md and "(0.5% needs 200, 1% needs 100)" in md
    # evaluate itself leaves the unresolvable levels empty (NaN), the resolvable ones filled
    assert m["tpr_at_fpr_0.5"].isna().all() and m["tpr_at_fpr_1"].isna().all()
    assert m["tpr_at_fpr_5"].notna().all() and m["tpr_at_fpr_0"].notna().all()
    # n/e in both rows at both unresolvable levels: in the caption, no column of n/e
    for level in ("0.5", "1"):
        assert f"TPR at ref. threshold for {level}% FPR n/e" in md
    assert "n/e" not in {c for row in rows + rest_rows for c in row}
    big = m.assign(n_ref_nonmembers=200)  # 1/200 = 0.5%: no FPR level is below the resolution
    write_tables(big, tmp_path / "m.csv", tmp_path / "m.md", "real")
    assert "TPR at ref. threshold for 0.5% FPR n/e" not in (tmp_path / "m.md").read_text()


def test_every_tpr_cell_says_which_tpr_and_the_fpr_it_realised(tmp_path):
    """A TPR at the reference threshold for x% FPR is "at x% FPR" only as far as its realised evaluation FPR
    says so: every such cell carries that FPR with its interval and n; a TPR read from the evaluation ROC
    says so in the cell."""
    m = evaluate(scores_frame(2, black_box=(1,)), n_boot=20)
    write_tables(m, tmp_path / "m.csv", tmp_path / "m.md", "real")
    md = (tmp_path / "m.md").read_text()
    cells = {}
    for _, header, body in md_tables(md):
        for row in body:
            for h, c in zip(header, row):
                cells.setdefault(h, []).append(c)
    n = int(m["n_nonmembers"].iloc[0])
    for line in md.splitlines():  # the caption: the columns with one value in every row
        if line.startswith("Same in every row: "):
            for part in line.rstrip(".").split("; "):
                if part.startswith("TPR"):
                    assert part.endswith(("n/e", "(eval ROC)", f", n = {n})")), part
    tpr = {h: v for h, v in cells.items() if h.startswith("TPR")}
    roc = [h for h in tpr if "eval ROC" in h]
    ref = [h for h in tpr if h.startswith("TPR at ref. threshold")]
    assert roc and ref
    for h in ref:
        for c in tpr[h]:
            # the core's narrow cell: the realised FPR with its n (its interval under All columns)
            in_core = h.endswith("(FPR it realised, n)") and "(FPR 0." in c and f", n = {n})" in c
            assert c == "n/e" or in_core or "(eval FPR 0." in c and f"], n = {n})" in c, (h, c)
    for h in roc:
        for c in tpr[h]:  # a header that names one level and the ROC reading labels every cell of its column
            assert c == "n/e" or c.endswith("(eval ROC)") or h.endswith("FPR (eval ROC)"), (h, c)
    r = m.iloc[0]
    want = f"(eval FPR {r['fpr_realized_5']:.2f} [{r['fpr_realized_5_lo']:.2f}, {r['fpr_realized_5_hi']:.2f}], n = {n})"
    assert any(want in c for c in tpr["TPR at ref. threshold for 5% FPR"])


def test_table_errors(metrics_df, tmp_path):
    with pytest.raises(ValueError, match="not in the metrics"):
        write_tables(metrics_df, tmp_path / "m.csv", tmp_path / "m.md", "t", extra_columns=["nope"])
    with pytest.raises(ValueError, match="empty"):
        write_tables(metrics_df.iloc[:0], tmp_path / "m.csv", tmp_path / "m.md", "t")
    assert not (tmp_path / "m.csv").exists()


def test_three_reference_nonmembers_make_5_percent_fpr_not_estimable(tmp_path):
    """5% FPR needs 20 reference non-members; with 3 the TPR there is n/e (NaN in the CSV), not a copy
    of TPR@0%FPR."""
    rows = []
    for role, n in (("reference", 3), ("eval", 6)):
        for i in range(n):
            rows.append(dict(doc_id=f"{role}m{i}", variant="a/v", score=1.0 + i, label=1, role=role))
            rows.append(dict(doc_id=f"{role}n{i}", variant="a/v", score=0.1 * i, label=0, role=role))
    m = evaluate(pd.DataFrame(rows), fprs=(0.0, 0.05), n_boot=20)
    r = m.iloc[0]
    assert r["n_ref_nonmembers"] == 3
    assert r["tpr_at_fpr_0"] == 1.0
    for c in ("tpr_at_fpr_5", "tpr_at_fpr_5_lo", "tpr_at_fpr_5_hi", "threshold_fpr_5", "fpr_realized_5"):
        assert np.isnan(r[c]), c
    write_tables(m, tmp_path / "m.csv", tmp_path / "m.md", "t")
    md = (tmp_path / "m.md").read_text()
    (_, core, rows), (_, rest, rest_rows) = md_tables(md)
    cells = dict(zip(rest, rest_rows[0]))
    assert cells["TPR at ref. threshold for 5% FPR"] == "n/e"
    assert cells["TPR at ref. threshold for 0% FPR"].startswith("1.00 [")
    # the core's reference-threshold TPR falls back to 0% (no non-zero level resolvable), with its realised FPR
    head = next(c for c in core if c.startswith("TPR at ref. threshold"))
    assert head == "TPR at ref. threshold for 0% FPR (FPR it realised, n)" and dict(zip(core, rows[0]))[
        head
    ].startswith("1.00 [")
    assert "(5% needs 20); with 3 reference non-members" in md
    assert np.isnan(pd.read_csv(tmp_path / "m.csv")["tpr_at_fpr_5"].iloc[0])


def test_format_extra():
    assert format_extra("queries_per_candidate", 4.0) == "4"
    assert format_extra("output_tokens_per_candidate", 12.345) == "12.35"
    assert format_extra("no_answer_rate", 0.125) == "12.5%"
    assert format_extra("x", np.nan) == "–"


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------
def check_png(path):
    assert path.exists()
    assert path.stat().st_size > 5_000
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 300
    assert img[..., :3].std() > 0.01  # not a blank canvas
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp files


@pytest.mark.parametrize("n_variants", [1, 3, 20])
def test_plots_for_1_to_20_variants(tmp_path, n_variants):
    df = scores_frame(n_variants, black_box=(0,) if n_variants > 1 else ())
    plot_roc(df, tmp_path / "fig" / "roc.png", f"{n_variants} variants")
    plot_score_distributions(df, tmp_path / "fig" / "dist.png", "scores")
    check_png(tmp_path / "fig" / "roc.png")
    check_png(tmp_path / "fig" / "dist.png")


def test_plots_are_deterministic(tmp_path):
    df = scores_frame(3, black_box=(2,))
    for name in ("a", "b"):
        plot_roc(df, tmp_path / f"roc_{name}.png", "t")
        plot_score_distributions(df, tmp_path / f"dist_{name}.png", "t")
    assert (tmp_path / "roc_a.png").read_bytes() == (tmp_path / "roc_b.png").read_bytes()
    assert (tmp_path / "dist_a.png").read_bytes() == (tmp_path / "dist_b.png").read_bytes()
    plot_roc(scores_frame(3, seed=1), tmp_path / "roc_c.png", "t")
    assert (tmp_path / "roc_a.png").read_bytes() != (tmp_path / "roc_c.png").read_bytes()


def test_failed_save_leaves_previous_png_untouched(tmp_path, monkeypatch):
    out = tmp_path / "roc.png"
    out.write_bytes(b"previous")

    def broken_savefig(self, fname, *args, **kwargs):
        with open(fname, "wb") as fh:
            fh.write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    with pytest.raises(OSError):
        plot_roc(scores_frame(1), out, "t")
    assert out.read_bytes() == b"previous"
    assert os.listdir(tmp_path) == ["roc.png"]


def test_plots_reject_bad_input(tmp_path):
    df = scores_frame(21)
    with pytest.raises(ValueError, match="20"):
        plot_roc(df, tmp_path / "roc.png", "t")
    one = scores_frame(1)
    no_members = one[~((one.role == "eval") & (one.label == 1))]
    with pytest.raises(ValueError, match="attack0/gray/t0"):
        plot_score_distributions(no_members, tmp_path / "d.png", "t")
    assert not list(tmp_path.iterdir())


def test_an_uninformative_control_is_shown_as_such_never_flagged_nor_a_pass():
    """A control that cannot tell candidates apart (constant scores; or no answer read, whatever its scores)
    cannot fail: it is 'uninformative' in its cell and never flagged, and its AUC is not shown as a pass;
    an informative control whose AUC interval excludes 0.5 is flagged."""
    from ragmi.report.comparison import attach_controls, comparison_frame
    from ragmi.report.tables import verdict_cell

    def scores(shift, constant=False, no_answer=False):
        df = scores_frame(1, n=30, seed=4)
        if constant:
            df["score"] = 0.0
        df["score"] += shift * df["label"]
        df["no_answer"] = no_answer
        return evaluate(df, n_boot=20)

    base = scores(1.5).assign(dataset="d", target="t")
    ctl_const = scores(0.0, constant=True).assign(dataset="d", target="t--null-db")
    ctl_unread = scores(3.0, no_answer=True).assign(dataset="d", target="t--no-retrieval")
    assert not ctl_unread["informative"].iloc[0] and ctl_unread["auc_lo"].iloc[0] > 0.5  # separates, unread
    targets = {
        "t": {"control": "none"},
        "t--null-db": {"control": "null_database"},
        "t--no-retrieval": {"control": "no_retrieval"},
    }
    df = comparison_frame(pd.concat([base, ctl_const, ctl_unread], ignore_index=True), [])
    out = attach_controls(df, targets)
    assert out["target"].tolist() == ["t"]
    assert out.loc[0, "null-db control AUC"] == "uninformative (constant scores)"
    assert out.loc[0, "k=0 control AUC"] == "uninformative (no answer read)"
    assert "excludes 0.5" not in out.loc[0, "note"] and verdict_cell(out.iloc[0]) != "control failed"
    # the same control, informative: its interval excludes 0.5 and it is flagged
    informative = scores(3.0).assign(dataset="d", target="t--no-retrieval")
    out = attach_controls(comparison_frame(pd.concat([base, ctl_const, informative], ignore_index=True), []), targets)
    assert out.loc[0, "k=0 control AUC"].startswith(f"{informative['auc'].iloc[0]:.2f} [")
    assert "no-retrieval (k = 0) control AUC [" in out.loc[0, "note"] and "excludes 0.5" in out.loc[0, "note"]
    assert verdict_cell(out.iloc[0]) == "control failed"
