"""Known-answer tests ("Leakage you can see", item 7): every membership attack end to end (a real
Snakemake run: queries, generation over the OpenAI API, scoring, metrics) against two target models of
known behaviour (tests/known_answer_model.py), served by a stand-in endpoint in this process:

* ``leaky`` answers each attack's prompt from its retrieved context as a capable model would, so every
  attack's headline variant must reach AUC >= 0.9;
* ``blind`` answers from the query alone, never from the context, so every headline variant's AUC
  interval must contain 0.5.

The attacker LLM of the offline query generation (IA, MEntA) is the same endpoint (model
``attacker``); the attacks' local models stay as the pipeline runs them: MBA's proxy LM is the packaged
SmolLM2 (converted to safetensors by the ``smollm2_dir`` fixture), MEntA's similarity scorer and the
retriever use the packaged all-MiniLM-L6-v2, DCMI perturbs with the packaged WordNet antonyms.

Each attack runs on targets with its paper's RAG template (S2MIA and extraction on RAG-MIA's), one
leaky and one blind target per template, all in one Snakemake run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from known_answer_model import KnownAnswerModel
from stand_in import StandIn

pytestmark = pytest.mark.slow

KEY_ENV = "RAGMI_KNOWN_ANSWER_KEY"
KEY = "known-answer-test-key"

# attack -> (RAG template of its targets, its headline variants: the attack comparison's rows)
ATTACKS = {
    "rag_mia": ("rag_mia", ["rag_mia/black/t2", "rag_mia/gray-pyes/t2", "rag_mia/gray/t2"]),
    "dcmi": ("dcmi", ["dcmi/adv1", "dcmi/adv2", "dcmi/adv3"]),
    "s2mia": ("rag_mia", ["s2mia/s", "s2mia/T", "s2mia/M"]),
    "mba": ("mba", ["mba", "mba/gamma"]),
    "ia": ("ia", ["ia/paper"]),
    "menta": ("menta", ["menta/similarity"]),
    "extraction": (
        "rag_mia",
        ["extraction/zeng", "extraction/qi", "extraction/ragthief", "extraction/targeted", "extraction/generic"],
    ),
}
N_EVAL = 10  # per class


def attack_params(proxy_lm: str) -> dict:
    return {
        "rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3},
        "dcmi": {"thetas": [0.06, 0.10]},
        "s2mia": {"cv_folds": 3},
        "mba": {"n_masks": 5, "proxy_lm": proxy_lm},
        "ia": {"n_questions": 3, "budgets": [1, 3], "question_max_tokens": 256, "shadow_max_tokens": 8},
        "menta": {"n_questions": 3, "budgets": [1, 3], "question_max_tokens": 256},
        "extraction": {},
    }


def target_name(model: str, template: str) -> str:
    return f"{model}-{template}"


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_dir):
    model = KnownAnswerModel()
    endpoint = StandIn(model.reply)
    work = tmp_path_factory.mktemp("known-answers")
    templates = sorted({t for t, _ in ATTACKS.values()})
    generators = {
        m: {"backend": "openai", "base_url": f"{endpoint.url}/v1", "model": m, "api_key_env": KEY_ENV}
        for m in ("leaky", "blind", "attacker")
    }
    targets = {
        target_name(m, t): {
            "retriever": "minilm",
            "k": 2,
            "template": t,
            "generator": m,
            "attacks": sorted(a for a, (tt, _) in ATTACKS.items() if tt == t),
        }
        for m in ("leaky", "blind")
        for t in templates
    }
    cfg = {
        "seed": 11,
        "datasets": {"tiny": {"source": "synthetic", "n_docs": 64, "length": "short"}},
        "split": {"member_fraction": 0.5, "n_reference": 6, "n_eval": N_EVAL},
        "retrievers": {"minilm": {"kind": "dense", "index": "flat_ip"}},
        "generators": generators,
        "attacker": {"generator": "attacker"},
        "targets": targets,
        "attacks": attack_params(smollm2_dir),
        "generation": {"threads": 1},
        "metrics": {"n_boot": 200},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    outputs = [
        f"results/metrics/tiny/{target_name(m, t)}/{a}.csv" for a, (t, _) in ATTACKS.items() for m in ("leaky", "blind")
    ]
    t0 = time.perf_counter()
    try:
        proc = run_snakemake(
            work, *outputs, "--configfile", str(work / "config.yaml"), env={**os.environ, KEY_ENV: KEY}
        )
    finally:
        endpoint.close()
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    metrics = pd.concat([pd.read_csv(work / o) for o in outputs], ignore_index=True)
    metrics["model"] = metrics["target"].str.split("-").str[0]
    print(f"\nknown-answer run: {wall:.0f} s, {len(endpoint.requests)} requests")
    for _, r in metrics[~metrics["variant"].str.contains("=")].iterrows():
        print(f"  {r['model']:6s} {r['variant']:24s} AUC {r['auc']:.3f} [{r['auc_lo']:.3f}, {r['auc_hi']:.3f}]")
    return {"work": Path(work), "model": model, "endpoint": endpoint, "metrics": metrics}


def headline(run, attack: str, model: str) -> pd.DataFrame:
    m = run["metrics"]
    rows = m[(m["attack"] == attack) & (m["model"] == model) & ~m["variant"].str.contains("=")].set_index("variant")
    assert sorted(rows.index) == sorted(ATTACKS[attack][1])  # every headline variant was scored
    assert (rows["n_members"] == N_EVAL).all() and (rows["n_nonmembers"] == N_EVAL).all()
    return rows


def test_every_prompt_was_understood(run):
    """Each request was one the known-answer model has a rule for, with the test's API key; each attack
    reached both target models through its template."""
    model, endpoint = run["model"], run["endpoint"]
    assert model.unrecognised == []
    assert {r["headers"].get("Authorization") for r in endpoint.requests} == {f"Bearer {KEY}"}
    seen = {kind for (_, kind) in model.kinds}
    for attack, (template, _) in ATTACKS.items():
        kinds = {"ia": "ia", "menta": "question"}.get(attack, attack)
        for m in ("leaky", "blind"):
            assert any(mm == m and k.startswith(f"{template}:{kinds}") for mm, k in model.kinds), (
                f"{attack} on {m}: {seen}"
            )
    assert model.kinds.get(("attacker", "attacker"), 0) > 0


NOT_MEMBERSHIP_TESTS = ("extraction/generic",)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_leaky_target_is_detected(run, attack):
    rows = headline(run, attack, "leaky")
    # extraction/generic is candidate-independent (the shared pool of leakage prompts): it retrieves
    # by the prompt, not by the candidate, so even a model that copies its context gives chance
    rows = rows.drop(index=[v for v in NOT_MEMBERSHIP_TESTS if v in rows.index])
    low = rows[rows["auc"] < 0.9]
    assert low.empty, low[["auc", "auc_lo", "auc_hi"]].to_string()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_blind_target_is_not(run, attack):
    rows = headline(run, attack, "blind")
    off = rows[(rows["auc_lo"] > 0.5) | (rows["auc_hi"] < 0.5)]
    assert off.empty, off[["auc", "auc_lo", "auc_hi"]].to_string()
