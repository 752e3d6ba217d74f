"""Bad input stops the run with one message naming the problem, and leaves no partial output."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def snakemake(workdir, *args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(workdir),
            "--cores",
            "1",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=workdir,
    )


def write_config(tmp_path, **changes):
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg.update(changes)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "c.yaml"


def test_bad_config_value(tmp_path):
    cfg = write_config(
        tmp_path, targets={"smollm2-rag": {"retriever": "minilm-cosine", "generator": "smollm2", "k": 0}}
    )
    out = snakemake(tmp_path, "--configfile", str(cfg), "-n")
    assert out.returncode != 0
    assert "ragmi: config key targets.smollm2-rag.k: 0 is less than the minimum of 1" in out.stderr
    assert not (tmp_path / "results").exists()


def test_missing_local_dataset_file(tmp_path):
    missing = tmp_path / "nope.parquet"
    cfg = write_config(tmp_path, datasets={"mine": {"source": "local", "path": str(missing), "text_column": "t"}})
    out = snakemake(tmp_path, "results/corpus/mine.parquet", "--configfile", str(cfg))
    assert out.returncode != 0
    assert "ragmi: " in out.stderr and str(missing) in out.stderr
    assert not list(tmp_path.glob("results/corpus/*"))


def test_local_file_with_wrong_column(tmp_path):
    import pandas as pd

    f = tmp_path / "docs.csv"
    pd.DataFrame({"body": ["a", "b"]}).to_csv(f, index=False)
    cfg = write_config(tmp_path, datasets={"mine": {"source": "local", "path": str(f), "text_column": "text"}})
    out = snakemake(tmp_path, "results/corpus/mine.parquet", "--configfile", str(cfg))
    assert out.returncode != 0
    assert "'text'" in out.stderr and "body" in out.stderr
    assert not list(tmp_path.glob("results/corpus/*"))
