"""The paper configs and the SLURM profile are valid and give a DAG (dry runs, offline)."""

from pathlib import Path

import pytest
from conftest import run_snakemake

from ragmi.config import load_config
from ragmi.report.registry import outputs

ROOT = Path(__file__).resolve().parents[1]
PAPERS = sorted((ROOT / "config" / "paper").glob("*.yaml"))


def dry_run(tmp_path, *args):
    return run_snakemake(tmp_path, "-n", *args, cores=4)


def test_there_is_a_config_per_seed_paper():
    assert {p.stem for p in PAPERS} >= {"rag_mia", "dcmi", "menta"}


@pytest.mark.parametrize("path", PAPERS, ids=lambda p: p.stem)
def test_paper_config_validates_and_dry_runs(tmp_path, path):
    cfg = load_config(path)
    default = load_config(ROOT / "config" / "config.yaml")
    assert cfg["split"]["n_eval"] > default["split"]["n_eval"]  # the paper's sizes, not the embedded default's
    out = dry_run(tmp_path, "--configfile", str(path))
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    for ds in cfg["datasets"]:
        assert f"results/corpus/{ds}.parquet" in text
    assert "queries" in text  # the checkpoint that writes every attack's queries
    tables = outputs(cfg)
    assert "results/tables/attack_comparison.md" in tables
    for path in tables:  # the registry's tables (and figures) of this config are default targets
        assert path in text, path


def test_slurm_profile_dry_run_asks_for_a_gpu(tmp_path):
    import yaml

    cfg = yaml.safe_load((ROOT / "config" / "paper" / "rag_mia.yaml").read_text())
    cfg["attacks"]["mba"] = {}  # its offline step runs the attacker LLM (local vLLM here): a GPU job
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    out = dry_run(tmp_path, "--profile", str(ROOT / "profiles" / "slurm"), "--configfile", str(tmp_path / "c.yaml"))
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    prepare = text[text.index("rule prepare:") :]
    prepare = prepare[: prepare.index("\n\n")]
    assert "gpu=1" in prepare and "slurm_partition=gpu" in prepare


RUN_CONFIGS = sorted(p for p in (ROOT / "config").glob("*.yaml") if p.stem not in {"schema", "published"})


def test_the_run_configs_are_the_documented_ones():
    assert {p.stem for p in RUN_CONFIGS} >= {"config", "all_attacks", "all_attacks_1.5b", "powered_1.5b"}


@pytest.mark.parametrize("path", [p for p in RUN_CONFIGS if p.stem != "config"], ids=lambda p: p.stem)
def test_run_config_validates_and_dry_runs_offline(tmp_path, path):
    """The configs beside the default (config/README.md) run offline: packaged models only, and a DAG."""
    from ragmi.models import PACKAGED_GGUF

    cfg = load_config(path)
    for name, gen in cfg["generators"].items():
        assert gen["model"] in PACKAGED_GGUF, (name, gen["model"])
    out = dry_run(tmp_path, "--configfile", str(path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "results/tables/summary.md" in out.stdout + out.stderr
