"""Utility of the targets: the answer measures, the question set, the per-question scores, the
intervals, the Pareto marks and the two tables built from small recorded files."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import yaml
from report_fixtures import as_the_rules_do

from ragmi.analysis.utility import PRIVACY_UTILITY_COLUMNS, mark_pareto, utility_change
from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.metrics import bootstrap_mean, evaluate, named_rng, paired_mean_difference
from ragmi.report.registry import (
    TABLES,
    analysis_input_files,
    built,
    draw_figure,
    input_files,
    outputs,
    write_table,
)
from ragmi.utility import measures as m
from ragmi.utility import questions as uq
from ragmi.utility.plan import utility_targets
from ragmi.utility.scoring import score_responses

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "datasets"
DEFAULT = yaml.safe_load(open(ROOT / "config" / "config.yaml"))


# --------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------
def test_normalisation_is_squad_and_flashrags():
    assert m.normalize_answer("  The Cat,   sat on a MAT! ") == "cat sat on mat"
    assert m.normalize_answer("An apple's core") == "apples core"
    assert m.normalize_answer("theme and another") == "theme and another"  # whole words only


@pytest.mark.parametrize(
    "answer, refs, em, sub, f1",
    [
        ("The cat.", ["cat"], 1.0, 1.0, 1.0),
        ("It was a black cat", ["black cat"], 0.0, 1.0, 2 * (2 / 4) * 1 / (2 / 4 + 1)),
        ("dog", ["cat", "dog"], 1.0, 1.0, 1.0),  # the best of the references
        ("pregabalin 75 mg", ["pregabalin 75 mg at bedtime"], 0.0, 0.0, 2 * 1 * 0.6 / 1.6),
        ("no", ["yes"], 0.0, 0.0, 0.0),
        ("yes it is", ["yes"], 0.0, 1.0, 0.0),  # FlashRAG: a yes/no reference matches only the same word in F1
        ("", ["cat"], 0.0, 0.0, 0.0),
        ("know", ["no"], 0.0, 1.0, 0.0),  # FlashRAG's substring match is character-wise
    ],
)
def test_reference_measures(answer, refs, em, sub, f1):
    assert m.exact_match(answer, refs) == em
    assert m.substring_match(answer, refs) == sub
    assert m.token_f1(answer, refs) == pytest.approx(f1)


def test_faithfulness_counts_supported_content_tokens():
    docs = ["Patient: I have had a cough for 9 weeks.", "Doctor: take amoxicillin 500 mg."]
    # content tokens: take amoxicillin 500 mg daily -> 4 of 5 occur in the documents
    assert m.faithfulness("Take amoxicillin 500 mg daily.", docs) == pytest.approx(4 / 5)
    assert m.faithfulness("You should take it.", docs) == pytest.approx(1.0)  # 'take' is the one content word
    assert m.faithfulness("Ibuprofen.", docs) == 0.0
    assert math.isnan(m.faithfulness("unanswerable", docs))  # an abstention makes no claim
    assert math.isnan(m.faithfulness("I don't know.", docs))
    assert math.isnan(m.faithfulness("it is the", docs))  # no content word
    assert m.faithfulness("cough cough", docs) == 1.0  # repetitions count
    assert math.isnan(m.score_answer("cough", ["cough"], None)["faithfulness"])  # retrieved texts unknown


# --------------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------------
def test_question_pool_puts_the_members_outside_the_candidates_first():
    members = pd.DataFrame({"doc_id": [f"d{i}" for i in range(10)]})
    candidates = pd.DataFrame({"doc_id": ["d1", "d3", "x9"]})
    pool = uq.question_pool(members, candidates, 7)
    assert sorted(pool) == sorted(members["doc_id"]) and set(pool[-2:]) == {"d1", "d3"}
    assert pool == uq.question_pool(members.iloc[::-1], candidates, 7)  # does not depend on row order
    assert pool != uq.question_pool(members, candidates, 8)


def test_parse_question_answer():
    assert uq.parse_question_answer("Question: How long? ignored\nAnswer: 9 weeks.") == ("How long?", "9 weeks.")
    assert uq.parse_question_answer('**Question:** What drug?\n**Answer:** "pregabalin"') == (
        "What drug?",
        "pregabalin",
    )
    assert uq.parse_question_answer("Question: What drug is given?\nAnswer:") == ("What drug is given?", "")
    assert uq.parse_question_answer("nothing here") == ("", "")
    assert uq.parse_answer("\n  pregabalin 75 mg  \nmore") == "pregabalin 75 mg"
    assert uq.parse_answer("Answer: at bedtime") == "at bedtime"


@pytest.mark.parametrize(
    "question, answer, reason",
    [
        ("What is prescribed for it?", "pregabalin 75 mg", ""),
        ("What?", "pregabalin", "no question parsed"),
        ("What is prescribed for it?", "", "no answer parsed"),
        ("What is prescribed for it?", "ibuprofen 75 mg", "answer not grounded in the document"),
        ("What is prescribed for it?", "pregabalin " * 13, "answer longer than 12 words"),
        ("Is pregabalin prescribed for it?", "pregabalin", "answer given in the question"),
    ],
)
def test_check_pair(question, answer, reason):
    got, _ = uq.check_pair(question, answer, "Take pregabalin 75 mg at bedtime.", 12, 0.8)
    assert got == reason


class FakeTools:
    """The attacker LLM's chat, answering from a table keyed by a word of the document."""

    def __init__(self, replies: dict):
        self.replies = replies
        self.calls: list[list[str]] = []

    def chat(self, prompts, max_tokens, temperature=0.0):
        self.calls.append([p[0]["content"] for p in prompts])
        out = []
        for p in prompts:
            text = p[0]["content"]
            second = text.startswith("Document:")  # ANSWER_PROMPT
            key = next(k for k in self.replies if k in text)
            out.append(
                {
                    "text": self.replies[key][1 if second else 0],
                    "prompt_tokens": 10,
                    "completion_tokens": 5,
                    "model": "fake",
                }
            )
        return out


def test_llm_questions_asks_again_for_a_missing_answer_and_keeps_grounded_pairs():
    docs = {
        "a": ("", "Alpha takes pregabalin 75 mg at bedtime."),
        "b": ("Bravo", "Bravo has had a cough for 9 weeks."),
        "c": ("", "Charlie lives in Lake Town."),
        "d": ("", "Delta takes ibuprofen."),
        "e": ("", "Echo sleeps badly."),
        "f": ("", "Foxtrot has a rash."),
    }
    tools = FakeTools(
        {
            "Alpha": ("Question: What does Alpha take at bedtime?\nAnswer: pregabalin 75 mg", ""),
            "Bravo": ("Question: How long has Bravo had a cough?\nAnswer:", "9 weeks"),
            "Charlie": ("Question: Where does Charlie live?\nAnswer: Paris", ""),
            "Delta": ("Question: What does Delta take?\nAnswer: ibuprofen", ""),
            "Echo": ("Question: How does Echo sleep?\nAnswer: badly", ""),
            "Foxtrot": ("Question: What does Foxtrot have?\nAnswer: a rash", ""),
        }
    )
    params = {"question_max_tokens": 64, "max_answer_words": 12, "min_answer_support": 0.8}
    out = uq.llm_questions(tools, docs, list(docs), 3, params, 0.0, log=lambda *_: None)
    assert list(out.columns) == uq.COLUMNS
    # round 0 asks 1.5 x 3 -> 5 documents: a, b, d kept, c rejected, e a surplus; no second round
    assert out["doc_id"].tolist() == ["a", "b", "c", "d", "e"]
    assert out["valid"].tolist() == [True, True, False, True, False]
    assert out.loc[2, "reject_reason"] == "answer not grounded in the document"
    assert out.loc[4, "reject_reason"] == uq.SURPLUS
    assert out.loc[1, "answer"] == "9 weeks" and out.loc[1, "answer_output"] == "9 weeks"
    assert len(tools.calls) == 2 and len(tools.calls[1]) == 1  # round 0 and its follow-up (b)
    assert "Bravo\nBravo has had" in tools.calls[0][1]  # title and text
    q = uq.utility_queries(out, 32)
    assert q["query_id"].tolist() == ["u00000", "u00001", "u00003"] and (q["max_tokens"] == 32).all()
    assert (q["top_logprobs"] == 0).all() and q["user_prompt"].iloc[0] == "What does Alpha take at bedtime?"
    # two wanted, c and d rejected in round 0 (a, b, c: 1.5 x 2): round 1 asks 2 more (d, e)
    tools.calls.clear()
    tools.replies["Alpha"] = ("Question: What does Alpha take?\nAnswer: aspirin", "")
    out = uq.llm_questions(tools, docs, ["a", "c", "b", "d", "e", "f"], 2, params, 0.0, log=lambda *_: None)
    assert out["round"].tolist() == [0, 0, 0, 1, 1] and out["valid"].tolist() == [False, False, True, True, False]


def test_llm_questions_stop_after_three_documents_per_question():
    docs = {f"d{i}": ("", f"Doc{i} says nothing.") for i in range(20)}
    tools = FakeTools({f"Doc{i} ": ("no format", "") for i in range(20)})
    params = {"question_max_tokens": 64, "max_answer_words": 12, "min_answer_support": 0.8}
    out = uq.llm_questions(tools, docs, sorted(docs), 2, params, 0.0, log=lambda *_: None)
    assert len(out) == 6 and not out["valid"].any()  # 3 asked, then 2 (1.5 x 2, capped at 6), then 1
    assert uq.utility_queries(out, 8).empty


def test_dataset_questions_from_pubmedqa_pairs():
    from ragmi.datasets import load_qa_pairs

    qa = load_qa_pairs("pq", {"source": "pubmedqa", "path": str(DATA / "pubmedqa.jsonl")}, 0)
    assert qa.loc[0, "answer"] == "Yes." and qa.loc[0, "final_decision"] == "yes"
    out = uq.dataset_questions(qa, ["17208539", "nope", "21645374"], 5)
    assert out["doc_id"].tolist() == ["17208539", "21645374"] and out["valid"].all()
    assert out["question"].tolist()[0] == "Is statin use associated with fewer fractures?"
    assert (out["source"] == "dataset").all()


# --------------------------------------------------------------------------------------------
# Scoring, intervals
# --------------------------------------------------------------------------------------------
def _questions():
    return pd.DataFrame(
        {
            "question_id": ["u0", "u1", "u2"],
            "doc_id": ["a", "b", "c"],
            "question": ["q0?", "q1?", "q2?"],
            "answer": ["pregabalin", "9 weeks", "Lake Town"],
            "valid": [True, True, False],
        }
    )


def test_score_responses():
    responses = pd.DataFrame(
        {
            "query_id": ["u1", "u0"],
            "response_text": ["For 9 weeks.", "unanswerable"],
            "retrieved_ids": [["b", "x"], ["x"]],
            "refused": [False, False],
        }
    )
    docs = {"a": "take pregabalin", "b": "a cough for 9 weeks", "x": "other text"}
    out = score_responses(_questions(), responses, docs)
    assert out["question_id"].tolist() == ["u0", "u1"]
    assert out["em"].tolist() == [0.0, 0.0] and out["sub_em"].tolist() == [0.0, 1.0]
    assert out["source_retrieved"].tolist() == [0.0, 1.0] and out["abstained"].tolist() == [True, False]
    assert math.isnan(out.loc[0, "faithfulness"]) and out.loc[1, "faithfulness"] == 1.0
    remote = score_responses(_questions(), responses.assign(retrieved_ids=None), None)
    assert remote["faithfulness"].isna().all() and remote["n_retrieved"].isna().all()
    with pytest.raises(ValueError, match="responses missing"):
        score_responses(_questions(), responses.iloc[:1], docs)


def test_bootstrap_mean_and_paired_difference():
    x = np.array([1.0, 0.0, 1.0, 1.0, np.nan])
    mean, lo, hi, n = bootstrap_mean(x, 500, named_rng(1, "a"))
    assert (mean, n) == (0.75, 4) and 0.0 <= lo <= mean <= hi <= 1.0
    assert bootstrap_mean(x, 500, named_rng(1, "a")) == (mean, lo, hi, n)  # seeded
    assert bootstrap_mean([np.nan], 10, named_rng(1))[3] == 0
    assert paired_mean_difference(x, x, 200, named_rng(0)) == (0.0, 0.0, 0.0, 4)
    a, b = np.ones(30), np.zeros(30)
    assert paired_mean_difference(a, b, 200, named_rng(0)) == (1.0, 1.0, 1.0, 30)
    rng = np.random.default_rng(3)
    u = rng.random(40)
    d, dlo, dhi, n = paired_mean_difference(u + 0.5, u, 300, named_rng(2))
    assert n == 40 and d == pytest.approx(0.5) and dlo == pytest.approx(0.5) and dhi == pytest.approx(0.5)
    d, dlo, dhi, n = paired_mean_difference(rng.random(40), rng.random(40), 300, named_rng(2))
    assert dlo < d < dhi
    with pytest.raises(ValueError):
        paired_mean_difference([1.0], [1.0, 2.0], 10, named_rng(0))
    assert utility_change(-0.3, -0.1) == "lower" and utility_change(0.1, 0.2) == "higher"
    assert utility_change(-0.1, 0.0) == "no detectable change"


def test_pareto_marks():
    df = pd.DataFrame(
        {
            "dataset": "d",
            "base_target": ["base", "base", "base", "base", "other", ""],
            "utility_metric": "f1",
            "target": ["base", "a", "b", "c", "o", "lone"],
            "utility": [0.8, 0.7, 0.6, 0.8, 0.1, 0.5],
            "auc": [0.9, 0.6, 0.7, 0.9, float("nan"), 0.5],
        }
    )
    out = mark_pareto(df).set_index("target")
    assert out.loc["base", "pareto"] and out.loc["c", "pareto"]  # equal on both: neither dominates
    assert out.loc["a", "pareto"] and not out.loc["b", "pareto"]
    assert out.loc["b", "dominated_by"] == "a"
    assert pd.isna(out.loc["o", "pareto"]) and pd.isna(out.loc["lone", "pareto"])


# --------------------------------------------------------------------------------------------
# Config and plan
# --------------------------------------------------------------------------------------------
def test_default_config_enables_utility_on_its_attacked_targets():
    cfg = validate_config(copy.deepcopy(DEFAULT))
    assert cfg["utility"]["enabled"] and cfg["utility"]["n_questions"] == 20
    assert cfg["utility"]["seed"] == cfg["seed"]
    assert utility_targets(cfg) == ["dp-r", "pad", "qwen-rag"]
    off = validate_config({**copy.deepcopy(DEFAULT), "utility": {"enabled": False}})
    assert utility_targets(off) == [] and "results/tables/privacy_utility.md" not in outputs(off)
    assert "results/figures/privacy_utility.png" in outputs(cfg)


def test_utility_targets_add_the_undefended_counterpart():
    cfg = copy.deepcopy(DEFAULT)
    cfg["utility"] = {"enabled": True, "targets": ["pad"]}
    assert utility_targets(validate_config(cfg)) == ["pad", "qwen-rag"]
    cfg["utility"] = {"enabled": True}  # null: the non-control targets that run attacks
    assert utility_targets(validate_config(cfg)) == ["dp-r", "pad", "qwen-rag"]


@pytest.mark.parametrize(
    "block, fragment",
    [
        ({"enabled": True, "targets": ["nope"]}, "utility.targets.0: 'nope' is not defined"),
        (
            {"enabled": True, "headline_variant": "mba/gamma"},
            "utility.headline_variant: 'mba/gamma' names attack 'mba'",
        ),
        ({"enabled": True, "n_questions": 0}, "utility.n_questions"),
        ({"enabled": True, "headline_metric": "bleu"}, "utility.headline_metric"),
        ({"enabled": True, "topk": 1}, "topk"),
    ],
)
def test_bad_utility_values_name_the_key(block, fragment):
    cfg = {**copy.deepcopy(DEFAULT), "utility": block}
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        validate_config(cfg)


# --------------------------------------------------------------------------------------------
# The tables from small recorded files
# --------------------------------------------------------------------------------------------
def _scores_csv(path: Path, f1: list[float], faith: list[float]):
    n = len(f1)
    df = pd.DataFrame(
        {
            "question_id": [f"u{i:05d}" for i in range(n)],
            "doc_id": [f"m{i}" for i in range(n)],
            "question": "q?",
            "reference": "r",
            "response_text": "a",
            "refused": False,
            "abstained": False,
            "n_retrieved": 2,
            "source_retrieved": 1.0,
            "em": [float(x == 1.0) for x in f1],
            "sub_em": [float(x > 0.5) for x in f1],
            "f1": f1,
            "faithfulness": faith,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return str(path)


def _attack_files(tmp: Path, target: str, shift: float, seed: int):
    """A scores parquet and its metrics CSV for one target (rag_mia, two headline variants)."""
    rng = np.random.default_rng(seed)
    parts = []
    for v, s in (("rag_mia/gray/t2", shift), ("rag_mia/black/t2", 0.0)):
        for role, n in (("reference", 10), ("eval", 20)):
            parts.append(
                pd.DataFrame(
                    {
                        "doc_id": [f"{role}{i}" for i in range(2 * n)],
                        "variant": v,
                        "score": np.r_[rng.normal(s, 1, n), rng.normal(0, 1, n)],
                        "label": np.r_[np.ones(n, int), np.zeros(n, int)],
                        "role": role,
                    }
                )
            )
    scores = pd.concat(parts, ignore_index=True)
    sp = tmp / f"results/scores/syn/{target}/rag_mia.parquet"
    sp.parent.mkdir(parents=True, exist_ok=True)
    scores.drop(columns=["label", "role"]).to_parquet(sp)
    met = evaluate(scores, n_boot=50)
    for i, (c, val) in enumerate([("dataset", "syn"), ("target", target), ("attack", "rag_mia")]):
        met.insert(i, c, val)
    mp = tmp / f"results/metrics/syn/{target}/rag_mia.csv"
    mp.parent.mkdir(parents=True, exist_ok=True)
    met.to_csv(mp, index=False)
    cand = scores[scores["variant"] == "rag_mia/gray/t2"][["doc_id", "label", "role"]]
    cp = tmp / "results/split/syn/candidates.parquet"
    cp.parent.mkdir(parents=True, exist_ok=True)
    cand.to_parquet(cp)
    return str(sp), str(mp), str(cp)


def _table_config():
    t = {"kind": "rag", "retriever": "r", "generator": "g", "k": 2, "template": "rag_mia", "control": "none"}
    t |= {"database": "members", "attacks": None, "framework": "standard"}
    return {
        "seed": 3,
        "datasets": {"syn": {"source": "synthetic"}},
        "targets": {"plain": {**t, "defenses": []}, "pad": {**t, "defenses": ["pad"]}},
        "attacks": {"rag_mia": {}},
        "defenses": {"pad": {"kind": "pad"}},
        "metrics": {"n_boot": 200},
        "utility": {"enabled": True, "targets": None, "seed": 3, "headline_variant": None, "headline_metric": "f1"},
        "audit": {"canary_targets": ["plain", "pad"], "canary_seeds": [101], "canary_dataset": None, "mi_attack": None},
        "controls": {},
    }


def test_privacy_utility_and_utility_tables_from_recorded_files(tmp_path):
    cfg = _table_config()
    rng = np.random.default_rng(0)
    base_f1 = rng.random(30).round(2).tolist()
    files = {
        "utility": [
            _scores_csv(tmp_path / "results/utility/syn/pad/scores.csv", [x * 0.5 for x in base_f1], [1.0] * 30),
            _scores_csv(tmp_path / "results/utility/syn/plain/scores.csv", base_f1, [1.0] * 29 + [float("nan")]),
        ],
        "metrics": [],
        "scores": [],
    }
    for target, shift, seed in (("pad", 0.0, 1), ("plain", 2.5, 2)):
        sp, mp, cp = _attack_files(tmp_path, target, shift, seed)
        files["scores"].append(sp)
        files["metrics"].append(mp)
        files["candidates"] = [cp]
    canaries = []
    for target, k in (("pad", 0), ("plain", 12)):
        p = tmp_path / f"results/audit/canaries/{target}/101.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"target": target, "seed": 101, "n_leaked": k, "n_canaries": 50, "n_leaked_raw": k}))
        canaries.append(str(p))
    files["canaries"] = canaries
    leak = tmp_path / "leak.csv"
    pd.DataFrame(
        {
            "dataset": "syn",
            "target": ["plain", "plain", "pad"],
            "run": ["extraction/targeted", "extraction/generic", "extraction/targeted"],
            "strict": [10, 6, 2],
            "outputs_digest": ["x", "y", "z"],
        }
    ).to_csv(leak, index=False)
    files["leakage"] = [str(leak)]
    assert set(analysis_input_files("privacy_utility", cfg)) >= {"utility", "metrics", "scores"}
    assert input_files("privacy_utility", cfg) == {"analysis": ["results/analysis/privacy_utility.parquet"]}

    table = TABLES["privacy_utility"]
    raw, files = files, as_the_rules_do("privacy_utility", files, cfg, tmp_path)
    df = write_table(table, files, cfg, tmp_path / "pu.csv", tmp_path / "pu.md")
    csv = pd.read_csv(tmp_path / "pu.csv")
    required = (
        "dataset, target, base_target, defenses, utility_metric, utility, utility_lo, utility_hi, n, delta_utility, "
        "delta_utility_lo, delta_utility_hi, attack, variant, auc, auc_lo, auc_hi, delta_auc, delta_auc_lo, "
        "delta_auc_hi, tpr_low_fpr, canaries_recovered, canaries_planted, nel_per_run, pareto"
    ).split(", ")
    assert set(required) <= set(csv.columns) and list(csv.columns) == PRIVACY_UTILITY_COLUMNS
    assert len(df) == 2 * 4  # target × measure
    rows = df.set_index(["target", "utility_metric"])
    pad, plain = rows.loc[("pad", "f1")], rows.loc[("plain", "f1")]
    assert pad["base_target"] == "plain" and plain["base_target"] == "plain" and pad["defenses"] == "pad"
    assert pad["delta_utility"] == pytest.approx(-0.5 * np.mean(base_f1))
    assert pad["delta_utility_hi"] < 0 and pad["utility_change"] == "lower"
    assert pd.isna(plain["delta_utility"]) and plain["n"] == 30
    assert rows.loc[("plain", "faithfulness"), "n"] == 29  # the NaN left out
    assert rows.loc[("pad", "faithfulness"), "n_paired"] == 29
    assert rows.loc[("pad", "faithfulness"), "utility_change"] == "no detectable change"  # [0, 0]
    # the headline variant: the highest AUC lower bound on the undefended target
    assert pad["variant"] == "rag_mia/gray/t2" and pad["attack"] == "rag_mia"
    assert pad["delta_auc"] == pytest.approx(pad["auc"] - plain["auc"])
    assert pad["delta_auc_hi"] < 0 and pad["leakage_change"] == "lower" and plain["leakage_change"] == "baseline"
    assert (pad["canaries_recovered"], pad["canaries_planted"], plain["canaries_recovered"]) == (0, 50, 12)
    assert pad["canary_fisher_p"] < 0.001
    assert plain["nel_per_run"] == 8.0 and pad["delta_nel_per_run"] == -6.0 and plain["nel_runs"] == 2
    # both on the front: pad trades utility for privacy
    assert bool(pad["pareto"]) and bool(plain["pareto"])
    assert rows["headline_metric"].groupby(level=1).all().to_dict() == {
        "em": False,
        "f1": True,
        "faithfulness": False,
        "sub_em": False,
    }
    md = (tmp_path / "pu.md").read_text()
    assert md.startswith(f"# {table.title}\n") and "| Pareto |" in md and "lower" in md
    assert "ΔAUC −" in md and "0/50 (p = " in md

    png = tmp_path / "fig.png"
    draw_figure(table, "privacy_utility", files, cfg, str(png))
    assert matplotlib.image.imread(png).shape[0] > 300

    u_files = as_the_rules_do("utility", {"utility": raw["utility"]}, cfg, tmp_path)
    u = write_table(TABLES["utility"], u_files, cfg, tmp_path / "u.csv", tmp_path / "u.md")
    assert len(u) == 8 and "baseline" in (tmp_path / "u.md").read_text()
    assert u.set_index(["target", "utility_metric"]).loc[("pad", "f1"), "delta_utility"] == pytest.approx(
        pad["delta_utility"]
    )


def test_a_remote_target_has_no_faithfulness_and_a_fixed_variant_is_used(tmp_path):
    cfg = _table_config()
    cfg["targets"]["plain"] = {**cfg["targets"]["plain"], "kind": "remote"}
    cfg["utility"]["headline_variant"] = "rag_mia/black/t2"
    files = {
        "utility": [
            _scores_csv(tmp_path / "results/utility/syn/plain/scores.csv", [1.0, 0.0, 1.0], [float("nan")] * 3),
        ]
    }
    sp, mp, cp = _attack_files(tmp_path, "plain", 1.0, 4)
    files |= {"metrics": [mp], "scores": [sp], "candidates": [cp]}
    files = as_the_rules_do("privacy_utility", files, cfg, tmp_path)
    df = write_table(TABLES["privacy_utility"], files, cfg, tmp_path / "pu.csv", tmp_path / "pu.md")
    row = df.set_index("utility_metric").loc["faithfulness"]
    assert row["n"] == 0 and "remote" in row["note"] and pd.isna(row["pareto"])
    assert (df["variant"] == "rag_mia/black/t2").all()
    assert "n/a: a remote or python target" in (tmp_path / "pu.md").read_text()


def test_the_tables_are_not_built_without_utility():
    cfg = _table_config()
    cfg["utility"]["enabled"] = False
    assert not built(TABLES["privacy_utility"], cfg) and not built(TABLES["utility"], cfg)
    minimal = {"datasets": {"a": {}}, "targets": {}, "attacks": {}}  # no utility block at all
    assert not built(TABLES["privacy_utility"], minimal)


def _pu_frames(fpr_defended: float, fpr_base: float, n_nonmembers: int = 20):
    """A utility frame of an undefended and a defended target (f1 only) and the metrics of one headline
    variant on each, at the reference threshold for 5% FPR, with the eval FPR each threshold realised."""
    from ragmi.analysis.utility import UTILITY_COLUMNS
    from ragmi.metrics import clopper_pearson, metric_columns

    urows, mrows = [], []
    for target, tpr, fpr in (("plain", 0.5, fpr_base), ("pad", 0.6, fpr_defended)):
        u = dict.fromkeys(UTILITY_COLUMNS, float("nan"))
        u.update(dataset="syn", target=target, base_target="plain", defenses="pad" if target == "pad" else "")
        u.update(utility_metric="f1", utility=0.5, utility_lo=0.4, utility_hi=0.6, n=30, n_questions=30)
        u.update(n_paired=pd.NA, utility_change="", note="")
        urows.append(u)
        m = dict.fromkeys(metric_columns(), float("nan"))
        fp = round(fpr * n_nonmembers)
        lo, hi = clopper_pearson(fp, n_nonmembers)
        m.update(dataset="syn", target=target, attack="rag_mia", variant="rag_mia/gray/t2", auc=0.8, auc_lo=0.7)
        m.update(auc_hi=0.9, n_members=20, n_nonmembers=n_nonmembers, n_ref_members=20, n_ref_nonmembers=20)
        m.update(tpr_at_fpr_5=tpr, tpr_at_fpr_5_lo=tpr - 0.2, tpr_at_fpr_5_hi=tpr + 0.2, threshold_fpr_5=1.0)
        m.update(fpr_realized_5=fp / n_nonmembers, fpr_realized_5_lo=lo, fpr_realized_5_hi=hi)
        mrows.append(m)
    return pd.DataFrame(urows, columns=UTILITY_COLUMNS), pd.DataFrame(mrows)


def _pu(fpr_defended, fpr_base):
    from ragmi.analysis.utility import privacy_utility_frame

    u, met = _pu_frames(fpr_defended, fpr_base)
    return privacy_utility_frame(u, met, {}, None, None, None, "f1", 50, 0, channels_of=lambda a, v: ("text",))


def test_privacy_utility_tpr_carries_its_realised_fpr_and_a_mixed_delta_tpr_says_so():
    """A ΔTPR between a target whose reference threshold realised eval FPR 0.15 and one that realised 0.00 is
    not a like-for-like change: the cell says both realised FPRs and so; every TPR cell carries its own."""
    from ragmi.report.utility_tables import privacy_utility_markdown

    df = _pu(0.15, 0.0).set_index("target")
    pad, plain = df.loc["pad"], df.loc["plain"]
    assert pad["tpr_fpr_realized"] == pytest.approx(0.15) and pad["base_tpr_fpr_realized"] == 0.0
    assert pad["tpr_n_nonmembers"] == 20 and pad["delta_tpr_low_fpr"] == pytest.approx(0.1)
    assert pad["delta_tpr_note"].startswith("not like for like")
    md = privacy_utility_markdown(df.reset_index(), "t")
    assert "0.60 [0.40, 0.80] at the ref. threshold for 5% FPR (eval FPR 0.15 [0.03, 0.38], n = 20)" in md
    assert "0.50 [0.30, 0.70] at the ref. threshold for 5% FPR (eval FPR 0.00 [0.00, 0.17], n = 20)" in md
    assert (
        "ΔTPR at the ref. threshold for 5% FPR +0.10 (eval FPR 0.15 [0.03, 0.38], n = 20 vs undefended "
        "eval FPR 0.00 [0.00, 0.17], n = 20): not like for like"
    ) in md
    assert "ΔTPR at 5% FPR" not in md and "TPR@5%FPR" not in md
    # the same realised FPR on both targets: like for like
    same = _pu(0.05, 0.05).set_index("target").loc["pad"]
    assert same["delta_tpr_note"] == "like for like: both realised eval FPR 0.05"
    assert plain["delta_tpr_note"] == ""  # the baseline has no ΔTPR


def _copies(rows):
    """Campaign results as ragmi.analysis.coverage.final_shares gives them: (target, variant, baseline, copied per seed)."""
    return pd.DataFrame(
        [
            {
                "dataset": "syn",
                "target": t,
                "attack": v.split("/")[0],
                "variant": v,
                "baseline": b,
                "seed": s,
                "budget": 10,
                "copied": c,
                "kb_size": 100,
            }
            for t, v, b, copied in rows
            for s, c in zip((1, 2, 3), copied, strict=True)
        ]
    )


def test_the_change_in_what_a_campaign_copied_is_read_against_the_wider_of_two_intervals():
    from ragmi.analysis.coverage import difference_interval

    c = _copies([("pad", "dgea/white", False, [2, 2, 2]), ("plain", "dgea/white", False, [8, 10, 12])])
    d, lo, hi = difference_interval(c[c.target == "pad"], c[c.target == "plain"])
    # Welch over the seeds (0.02 ± 0, 0.10 ± sd 0.02 / sqrt 3, 2 df) is the wider here: -0.08 ± 4.303 x 0.01155
    assert d == pytest.approx(-0.08)
    assert (lo, hi) == (pytest.approx(-0.12969, abs=1e-4), pytest.approx(-0.03031, abs=1e-4))
    # seeds that agree: Welch has zero width, the pooled counts' exact intervals do not
    same = _copies([("pad", "dgea/white", False, [5, 5, 5]), ("plain", "dgea/white", False, [5, 5, 5])])
    d, lo, hi = difference_interval(same[same.target == "pad"], same[same.target == "plain"])
    assert d == 0 and lo < -0.02 and hi > 0.02


def test_privacy_utility_says_what_the_defense_changed_in_what_the_campaign_copied():
    from ragmi.analysis.utility import _campaign_cells

    copies = _copies(
        [
            ("plain", "dgea/white", False, [8, 10, 12]),
            ("plain", "copybreak", False, [0, 0, 30]),  # as much on average, but no sure copy: not chosen
            ("plain", "random_token", True, [20, 20, 20]),  # a random baseline is a floor, never the attack
            ("pad", "dgea/white", False, [2, 2, 2]),
            ("pad", "copybreak", False, [0, 0, 0]),
        ]
    )
    pad = _campaign_cells(copies, "syn", "pad", "plain")
    assert pad["copy_variant"] == "dgea/white" and (pad["copy_budget"], pad["copy_seeds"]) == (10, 3)
    assert pad["copied"] == pytest.approx(0.02) and pad["base_copied"] == pytest.approx(0.10)
    assert pad["delta_copied"] == pytest.approx(-0.08) and pad["copied_change"] == "lower"
    plain = _campaign_cells(copies, "syn", "plain", "plain")
    assert plain["copied"] == pytest.approx(0.10) and pd.isna(plain["delta_copied"]) and plain["copied_change"] == ""
    assert _campaign_cells(copies, "other", "pad", "plain")["copy_variant"] == ""  # no campaign on that dataset
    assert _campaign_cells(None, "syn", "pad", "plain")["copied_change"] == ""


def test_privacy_utility_markdown_shows_the_copied_share_and_its_change():
    from ragmi.analysis.utility import privacy_utility_frame
    from ragmi.report.utility_tables import privacy_utility_markdown

    u, met = _pu_frames(0.05, 0.05)
    copies = _copies([("plain", "dgea/white", False, [8, 10, 12]), ("pad", "dgea/white", False, [2, 2, 2])])
    df = privacy_utility_frame(
        u, met, {}, None, None, None, "f1", 50, 0, channels_of=lambda a, v: ("text",), copies=copies
    )
    md = privacy_utility_markdown(df, "t")
    assert "## Copied by an adaptive extraction campaign, per target (dgea/white, 10 queries, 3 seeds)" in md
    assert "| 10.0% [" in md and "| baseline |" in md
    assert "| 2.0% [0.7%, 4.3%] | −8.0% [−13.0%, −3.0%] (lower) |" in md
    # without campaigns the column is not there
    assert "copied verbatim" not in privacy_utility_markdown(_pu(0.05, 0.05), "t")
