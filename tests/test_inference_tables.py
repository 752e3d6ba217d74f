"""The inference analyses and tables on hand-made scores: dataset inference per target (a leaking target's members
are found, its non-members and a control's members are not, a data owner's sets are checked against the
candidates) and the ε audit (a mis-scaled DP retrieval is flagged, an attack's document-level bound never
is), through the registry as the table rule builds them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragmi import dataset_inference as di
from ragmi.analysis import dataset_inference as dia
from ragmi.analysis import epsilon as eps
from ragmi.config import validate_config
from ragmi.defenses import build_defense
from ragmi.defenses.dp_retrieval import DpRetrieval
from ragmi.errors import ConfigError
from ragmi.metrics import clopper_pearson
from ragmi.report import inference_tables as it
from ragmi.report.registry import TABLES, analysis_input_files, built, input_files


def candidates(n_ref=20, n_eval=20) -> pd.DataFrame:
    rows = []
    for role, n in (("reference", n_ref), ("eval", n_eval)):
        for label in (1, 0):
            rows += [{"doc_id": f"{role[0]}{label}-{i:02d}", "label": label, "role": role} for i in range(n)]
    return pd.DataFrame(rows)


def scores_of(cand: pd.DataFrame, shift: float, seed: int, variant: str) -> pd.DataFrame:
    """One variant's scores: members shifted by ``shift`` standard deviations."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=len(cand)) + shift * cand["label"].to_numpy()
    return cand.assign(variant=variant, score=s, decision=np.nan)


@pytest.fixture
def scores():
    cand = candidates()
    out = {}
    for t, shift in (("leaky", 2.0), ("leaky--null-db", 0.0)):
        for j, a in enumerate(("rag_mia", "s2mia")):
            out[("d", t, a)] = scores_of(cand, shift, 10 * j + len(t), f"{a}/x")
    return cand, out


PARAMS = {
    "alpha": 0.01,
    "f_values": [1.0, 0.5, 0.25],
    "draws": 50,
    "calibration_folds": 5,
    "shift_topics": 2,
    "evidence": ["all"],
}


def test_members_found_non_members_and_control_not(scores):
    cand, sc = scores
    df = dia.dataset_inference_frame(sc, {"d": cand}, [("d", "leaky"), ("d", "leaky--null-db")], PARAMS, seed=3)
    assert list(df.columns) == dia.DI_COLUMNS
    raw = df[df["design"] == dia.RAW]
    v = raw.set_index(["target", "suspect_set", "f"])["verdict"]
    assert v[("leaky", "members", 1.0)] == "in the database"
    assert v[("leaky", "non-members", 0.0)] == "no evidence"
    assert v[("leaky--null-db", "members", 1.0)] == "no evidence"
    leaky = raw[(raw["target"] == "leaky") & (raw["suspect_set"] == "members")].iloc[0]
    assert leaky["p_value"] >= leaky["p_floor"] == pytest.approx(1 / 30045015)  # 1/C(30, 10)
    assert leaky["p_value"] < 1e-6 and 2 <= leaky["min_suspect_size"] < 20
    assert leaky["n_suspect"] == 20 and leaky["n_outside"] == 10 and leaky["test"] == "exact Mann-Whitney (one-sided)"
    # the leaky target has a null-db control: its rows again, as differences against it; the control has none
    diff = df[df["design"] == dia.DIFFERENCE]
    assert set(diff["target"]) == {"leaky"} and "members" in set(diff["suspect_set"])
    # calibration: 20 reference non-members, disjoint 5+5 splits at α = 0.01: 2 independent tests
    assert df.groupby("target")["calibration_splits"].first().eq(2).all()
    assert (df["calibration_split_size"] == 5).all() and (df["calibration_pool"] == 20).all()
    md = it.dataset_inference_markdown(df, "T", notes=("a note",))
    assert "| leaky | raw | members | 20 (20) / 10 |" in md and "- a note" in md
    assert "- d/leaky: 2 disjoint 5+5 splits of 20 reference non-members: " in md
    assert "the interval cannot resolve α = 0.01" in md


def test_calibration_is_disjoint_from_every_tested_set(scores):
    """The calibration pool is the reference non-members, out of fold; no suspect or outside document is in it."""
    cand, sc = scores
    frames = dia._group_scores(sc, "d", "leaky")
    comb, feats, _ = di.fit_on_reference(frames, cand)
    tested = set(cand.loc[cand["role"] == "eval", "doc_id"])
    cal = dia.calibration(feats, cand, 0.01, 5, 3, tested)
    ref_non = cand.loc[(cand["role"] == "reference") & (cand["label"] == 0), "doc_id"]
    assert cal["calibration_pool"] == len(ref_non) == 20 and cal["calibration_splits"] == 2
    assert set(cal["calibration_ids"]) == set(ref_non) and not set(cal["calibration_ids"]) & tested
    assert (cal["calibration_lo"], cal["calibration_hi"]) == clopper_pearson(cal["calibration_rejections"], 2)
    with pytest.raises(ValueError, match="shares"):
        dia.calibration(feats, cand, 0.01, 5, 3, tested | {ref_non.iloc[0]})


def test_p_at_its_floor_prints_as_at_most_the_floor():
    assert it.p_cell(1 / 30045015, 1 / 30045015) == "≤ 3.3e-08"
    assert it.p_cell(0.004, 1 / 252) == "0.004" and it.p_cell(float("nan"), 0.1) == "–"


def test_holm_over_the_table_is_one_family_and_stricter():
    df = pd.DataFrame(
        {
            "p_value": [0.004, 0.009, 0.03, np.nan, 0.0001],
            "verdict": ["in the database", "in the database", "no evidence", "uninformative", "in the database"],
        }
    )
    out = dia.with_holm(df, 0.01)
    np.testing.assert_allclose(out["p_holm"].to_numpy()[[0, 1, 2, 4]], [0.012, 0.018, 0.03, 0.0004])
    assert np.isnan(out["p_holm"].iloc[3])
    assert out["verdict_holm"].tolist() == [
        "no evidence",
        "no evidence",
        "no evidence",
        "uninformative",
        "in the database",
    ]


def _text_candidates(seed=0):
    """Candidates with text: non-member lengths vary widely; 40 reference + 40 evaluation per class."""
    cand = candidates(40, 40)
    rng = np.random.default_rng(seed)
    n_words = rng.integers(20, 400, len(cand))
    topics = np.array(["kernel patch driver", "recipe oven flour"])[rng.integers(0, 2, len(cand))]
    return cand.assign(text=[" ".join([t] * int(n // 3)) for t, n in zip(topics, n_words, strict=True)])


def test_length_shift_rejects_raw_and_the_null_db_difference_fixes_it():
    """Every score depends on the document's length, in the target's answers and in its null-db control's
    alike (a document-intrinsic effect), and members score higher on the target only.  The longest third of
    the NON-members reads "in the database" in the raw design; the difference against the control does not,
    and still finds the members."""
    cand = _text_candidates()
    z = (cand["text"].str.len() - cand["text"].str.len().mean()) / cand["text"].str.len().std()
    rng = np.random.default_rng(1)
    sc = {}
    for t, shift in (("leaky", 1.5), ("leaky--null-db", 0.0)):
        for a in ("rag_mia", "s2mia"):
            noise = rng.normal(0, 0.4, len(cand))
            s = 2.0 * z.to_numpy() + noise + shift * cand["label"].to_numpy() * (cand["role"] == "eval").to_numpy()
            if t == "leaky":  # the reference candidates' scores are the base target's in both
                s = s + shift * cand["label"].to_numpy() * (cand["role"] == "reference").to_numpy()
            sc[("d", t, a)] = cand.drop(columns="text").assign(variant=f"{a}/x", score=s, decision=np.nan)
    for a in ("rag_mia", "s2mia"):  # the control reads the base target's answers for the reference candidates
        ref = cand["role"] == "reference"
        sc[("d", "leaky--null-db", a)].loc[ref, "score"] = sc[("d", "leaky", a)].loc[ref, "score"]
    df = dia.dataset_inference_frame(sc, {"d": cand}, [("d", "leaky")], PARAMS, seed=3)
    rows = df.set_index(["design", "suspect_set"])
    length = "length: longest third"
    assert rows.loc[(dia.RAW, length), "verdict"] == "in the database"  # the failure, kept in view
    assert rows.loc[(dia.DIFFERENCE, length), "verdict"] == "no evidence"
    assert rows.loc[(dia.DIFFERENCE, "members"), "verdict"] == "in the database"
    assert set(df.loc[df["shift"] != "none", "shift"]) == {"length", "topic"}
    md = it.dataset_inference_markdown(df, "T")
    assert "Distribution shift" in md and "- null-db difference: 0 of 3 shifted non-member sets rejected" in md


def test_data_owner_sets_must_be_evaluation_candidates(scores):
    cand, sc = scores
    suspect = [f"e1-{i:02d}" for i in range(12)]
    outside = [f"e0-{i:02d}" for i in range(12)]
    df = dia.dataset_inference_frame(sc, {"d": cand}, [("d", "leaky")], PARAMS, seed=3, user=(suspect, outside))
    user = df[df["suspect_set"] == "user"]
    assert user["design"].tolist() == [dia.RAW, dia.DIFFERENCE]  # leaky has a null-db control
    assert user["verdict"].iloc[0] == "in the database" and user["n_outside"].iloc[0] == 12
    with pytest.raises(ConfigError, match=r"dataset_inference.suspect: 1 of its doc_ids are not evaluation"):
        dia.dataset_inference_frame(sc, {"d": cand}, [("d", "leaky")], PARAMS, seed=3, user=(["r1-00"], outside))


def test_read_ids(tmp_path):
    (tmp_path / "a.txt").write_text("x\n\ny\n")
    pd.DataFrame({"doc_id": ["p", "q"]}).to_csv(tmp_path / "b.csv", index=False)
    pd.DataFrame({"id": ["p"]}).to_csv(tmp_path / "c.csv", index=False)
    assert dia.read_ids(tmp_path / "a.txt") == ["x", "y"]
    assert dia.read_ids(tmp_path / "b.csv") == ["p", "q"]
    with pytest.raises(ConfigError, match="no doc_id column"):
        dia.read_ids(tmp_path / "c.csv")


class Broken(DpRetrieval):
    """Declares its ε but draws its noise for 20 times that."""

    def noise_epsilon(self) -> float:
        return 20.0 * self.params["epsilon"]


def test_epsilon_frame_flags_a_mis_scaled_mechanism_and_never_an_attack(scores):
    cand, sc = scores
    good = build_defense("dp-r", {"kind": "dp_retrieval", "epsilon": 1.0})
    bad = Broken("bad", dict(good.params))
    bad.kind = "dp_retrieval"
    other = build_defense("exp", {"kind": "exp_mechanism", "epsilon": 0.1})
    df = eps.epsilon_frame(
        {"dp-r": good, "bad": bad, "exp": other}, [("d", "leaky", ["dp-r"])], sc, 0.95, trials=2000, seed=1
    )
    mech = df[df["source"].str.startswith("mechanism")].set_index("defense")
    assert mech.loc["dp-r", "verdict"] == "not refuted" and mech.loc["dp-r", "eps_lb"] <= 1.0
    assert mech.loc["bad", "verdict"] == "exceeds its claim" and mech.loc["bad", "eps_lb"] > 1.0
    assert mech.loc["exp", "verdict"] == eps.NO_TRIAL and np.isnan(mech.loc["exp", "eps_lb"])
    # no retriever measured: the declared Δ's pair, one query against ε, with what the audit could show
    assert mech.loc["dp-r", "source"] == "mechanism, declared Δ" and mech.loc["dp-r", "unit"] == "per query: 1 query"
    assert mech.loc["dp-r", "eps_certifiable"] > 5 and mech.loc["dp-r", "correct_q95"] <= 1.05
    attack = df[df["source"].str.startswith("attack ")]
    assert set(attack["source"]) == {"attack rag_mia/x", "attack s2mia/x"}
    assert (attack["verdict"] == "bound not comparable").all() and attack["flagged"].isna().all()
    assert (attack["eps_lb"] > 0).all()  # a leaking target: far from what document-level DP would allow
    md = it.epsilon_markdown(df, "T")
    assert "| bad (dp_retrieval) | – | mechanism, declared Δ | 1 (per query" in md
    assert "holds" not in md and "consistent" not in md and "not refuted" in md


def test_tables_declared_and_built_by_the_default_shape():
    cfg = validate_config(
        {
            "datasets": {"d": {"source": "synthetic", "n_docs": 60}},
            "retrievers": {"r": {"kind": "bm25"}},
            "generators": {"g": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}},
            "defenses": {"dp": {"kind": "dp_retrieval"}},
            "targets": {
                "t": {"retriever": "r", "generator": "g"},
                "dp": {"retriever": "r", "generator": "g", "defenses": ["dp"], "attacks": ["rag_mia"]},
            },
            "attacks": {"rag_mia": {}},
        }
    )
    assert built(TABLES["dataset_inference"], cfg) and built(TABLES["epsilon_audit"], cfg)
    # each computes in rule analysis (its parquet the table's only input)
    assert input_files("epsilon_audit", cfg) == {"analysis": ["results/analysis/epsilon_audit.parquet"]}
    files = analysis_input_files("epsilon_audit", cfg)
    assert files["scores"] == ["results/scores/d/dp/rag_mia.parquet"]
    assert files["sensitivity"] == ["results/epsilon/d/dp.parquet"]  # Δ measured on its retriever
    assert input_files("dataset_inference", cfg) == {"analysis": ["results/analysis/dataset_inference.parquet"]}
    di = analysis_input_files("dataset_inference", cfg)
    assert "results/scores/d/t/rag_mia.parquet" in di["scores"] and di["candidates"] == [
        "results/split/d/candidates.parquet"
    ]
    off = validate_config({**cfg, "dataset_inference": {"enabled": False}})
    assert not built(TABLES["dataset_inference"], off)


def test_config_needs_both_files(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("a\n")
    base = {
        "datasets": {"d": {"source": "synthetic"}},
        "retrievers": {"r": {"kind": "bm25"}},
        "generators": {"g": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}},
        "targets": {"t": {"retriever": "r", "generator": "g"}},
        "attacks": {"rag_mia": {}},
    }
    with pytest.raises(ConfigError, match="dataset_inference.known_outside: required when"):
        validate_config({**base, "dataset_inference": {"suspect": str(f)}})
    with pytest.raises(ConfigError, match="dataset_inference.known_outside: file .* does not exist"):
        validate_config({**base, "dataset_inference": {"suspect": str(f), "known_outside": str(tmp_path / "no")}})
    with pytest.raises(ConfigError, match="dataset_inference.targets.0: 'x' is not defined"):
        validate_config({**base, "dataset_inference": {"targets": ["x"]}})


def test_too_few_candidates_or_constant_scores_are_uninformative_not_errors(tmp_path):
    """A tiny run (3+3 evaluation candidates) or attacks whose scores are all constant: rows that say why,
    a calibration line that says it could not be done, and a figure, never an exception."""
    from ragmi.report.plots import plot_dataset_inference

    cand = candidates(3, 3)
    flat = scores_of(cand, 0.0, 1, "rag_mia/x").assign(score=0.0)
    sc = {("d", "t", "rag_mia"): scores_of(cand, 2.0, 1, "rag_mia/x"), ("d", "u", "rag_mia"): flat}
    df = dia.dataset_inference_frame(sc, {"d": cand}, [("d", "t"), ("d", "u")], PARAMS, seed=1)
    assert set(df["verdict"]) == {"uninformative"}
    assert df.loc[df["target"] == "u", "reason"].str.contains("constant on the reference").all()
    assert df.loc[df["target"] == "t", "reason"].str.contains("fewer than 2 known-outside").all()
    md = it.dataset_inference_markdown(df, "T")
    assert "- d/t: not calibrated (3 reference non-members; 10 needed per independent split)" in md
    plot_dataset_inference(df, str(tmp_path / "f.png"), "T")
    assert (tmp_path / "f.png").stat().st_size > 1000


def test_text_only_evidence_and_headline_variants_only(scores):
    """evidence text: only the variants that read the answers' text (rag_mia/x here; s2mia/x reads token
    log-probabilities too); an ablation sweep's variant (with '=') never enters the combination; a
    target whose variants are all text gets no second, identical set of rows."""
    cand, sc = scores
    sc = dict(sc)
    sc[("d", "leaky", "dcmi")] = scores_of(cand, 5.0, 99, "dcmi/gamma=0.5")  # an ablation variant
    params = {**PARAMS, "evidence": ["all", "text"]}
    df = dia.dataset_inference_frame(sc, {"d": cand}, [("d", "leaky")], params, seed=3)
    assert set(df["evidence"]) == {"all attacks", "answer text only"}
    variants = df.groupby("evidence")["variants"].first()
    assert variants["all attacks"] == "rag_mia/x,s2mia/x" and variants["answer text only"] == "rag_mia/x"
    only_text = {k: v for k, v in sc.items() if k[2] == "rag_mia"}
    df2 = dia.dataset_inference_frame(only_text, {"d": cand}, [("d", "leaky")], params, seed=3)
    assert set(df2["evidence"]) == {"all attacks"}
    md = it.dataset_inference_markdown(df, "T")
    assert "| leaky | answer text only | raw | members |" in md and "- d/leaky (answer text only): " in md


def test_calibration_words():
    base = {"alpha": 0.01, "calibration_splits": 10, "calibration_rejections": 0, "calibration_lo": 0.0}
    words = it.calibration_words({**base, "calibration_hi": 0.31, "calibration_resolves": False})
    assert words.startswith("0 of 10 independent tests rejected at α = 0.01; 95% interval [0.00, 0.31]")
    assert "cannot resolve α = 0.01" in words
    assert "within sampling error" in it.calibration_words(
        {**base, "calibration_hi": 0.015, "calibration_resolves": True}
    )
    bad = {**base, "calibration_rejections": 6, "calibration_lo": 0.26, "calibration_hi": 0.88}
    assert "not to be trusted" in it.calibration_words(bad)


def test_another_datasets_non_members_are_a_shift_row():
    """Two datasets in one run (make run-real: synthetic and Debian changelogs): the other dataset's
    evaluation non-members, scored by this dataset's combiner, are a suspect set none of which is in this
    database; scores that differ by source make the raw design read "in the database"."""
    c1, c2 = _text_candidates(0), _text_candidates(1)
    sc = {}
    for d, c, offset in (("a", c1, 0.0), ("b", c2, 1.5)):
        for j, a in enumerate(("rag_mia", "s2mia")):
            s = scores_of(c.drop(columns="text"), 1.0, j + len(d), f"{a}/x")
            sc[(d, "t", a)] = s.assign(score=s["score"] + offset)
    df = dia.dataset_inference_frame(sc, {"a": c1, "b": c2}, [("a", "t"), ("b", "t")], PARAMS, seed=3)
    rows = df[df["shift"] == "dataset"].set_index("suspect_set")
    assert set(rows.index) == {"dataset: b vs a", "dataset: a vs b"}
    assert rows.loc["dataset: b vs a", "n_suspect"] == 40 and rows.loc["dataset: b vs a", "n_outside"] == 40
    assert rows.loc["dataset: b vs a", "verdict"] == "in the database"  # the source shift, not membership
    assert rows.loc["dataset: a vs b", "verdict"] == "no evidence"
