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
leaky and one blind target per template, all in one Snakemake run (the tests marked slow).

The blind model's yes/no answers vary from query to query (P(Yes) a hash of the query text), so the
blind tests can fail: the unit tests at the end score blind answers taken from the model's answer
function directly (no server, no Snakemake) and check that a RAG-MIA scorer that fits its ensemble on
the evaluation labels is caught by them, while the real scorer is not, and that a model with one
constant answer (the earlier blind model) hides that leak.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from known_answer_model import BLIND_P_YES, KnownAnswerModel, blind_answer, blind_p_yes, yes_no_answer
from stand_in import StandIn

from ragmi.attacks.answers import parse_yes_no, yes_no_at_first_generated
from ragmi.attacks.dcmi import QUERY_TEMPLATE as DCMI_TEMPLATE
from ragmi.attacks.rag_mia import RagMIA, ensemble_scores
from ragmi.metrics import evaluate
from ragmi.rag.templates import TEMPLATES

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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_leaky_target_is_detected(run, attack):
    rows = headline(run, attack, "leaky")
    # extraction/generic is candidate-independent (the shared pool of leakage prompts): it retrieves
    # by the prompt, not by the candidate, so even a model that copies its context gives chance
    rows = rows.drop(index=[v for v in NOT_MEMBERSHIP_TESTS if v in rows.index])
    low = rows[rows["auc"] < 0.9]
    assert low.empty, low[["auc", "auc_lo", "auc_hi"]].to_string()


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_blind_target_is_not(run, attack):
    rows = headline(run, attack, "blind")
    off = rows[(rows["auc_lo"] > 0.5) | (rows["auc_hi"] < 0.5)]
    assert off.empty, off[["auc", "auc_lo", "auc_hi"]].to_string()


# ----------------------------------------------------------------------- without a server: a leaky scorer


def rag_messages(template: str, docs: list[str], question: str) -> list[dict]:
    """The target's chat messages for ``question`` over the retrieved ``docs`` (ragmi.rag.templates)."""
    t = TEMPLATES[template]
    fill = {"context": t.doc_separator.join(docs), "question": question}
    return ([{"role": "system", "content": t.system.format(**fill)}] if t.system else []) + [
        {"role": "user", "content": t.user.format(**fill)}
    ]


def candidate_text(i: int) -> str:
    return f"Patient: I have had pain number {i} in my {('knee', 'back', 'head')[i % 3]} for {i % 9 + 1} days."


def test_blind_yes_no_answers_vary_by_query_and_ignore_the_context():
    model = KnownAnswerModel()
    attack = RagMIA({"templates": [2]})
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(60)], "text": [candidate_text(i) for i in range(60)]})
    pys = []
    for q in attack.build_queries(docs).itertuples():
        answers = [
            model.answer(
                {"model": "blind", "messages": rag_messages("rag_mia", ctx, q.user_prompt), "top_logprobs": 20}
            )
            for ctx in ([], [q.user_prompt], ["an unrelated document", "another one"])
        ]
        assert all(a == answers[0] for a in answers)  # the context never changes the answer
        text, lps = answers[0]
        py, pn, pos = yes_no_at_first_generated([t["top_logprobs"] for t in lps])
        assert pos == 0 and py / (py + pn) == pytest.approx(blind_p_yes(q.user_prompt))
        assert parse_yes_no(text) == (1 if py > pn else 0)  # the text follows P(Yes)
        pys.append(py / (py + pn))
    assert model.unrecognised == []
    assert BLIND_P_YES[0] <= min(pys) < 0.3 and 0.7 < max(pys) < BLIND_P_YES[1]
    assert 0.3 < np.mean(np.array(pys) >= 0.5) < 0.7  # both answers are common
    # DCMI's original and perturbed queries get P(Yes)s of their own; IA's text answer follows the hash
    orig, pert = (DCMI_TEMPLATE.format(sample=f"The {w} cough came back.") for w in ("dry", "wet"))
    assert blind_p_yes(orig) != blind_p_yes(pert)
    for q in (orig, pert):
        py, pn, _ = yes_no_at_first_generated([t["top_logprobs"] for t in blind_answer(q, 6, 20)[1]])
        assert py / (py + pn) == pytest.approx(blind_p_yes(q))
    ia = {f"Is it stated that {i}? Please answer with 'Yes,' 'No,' or 'I don't know'" for i in range(40)}
    assert {q: blind_answer(q, 8, 0)[0] for q in ia} == {q: "Yes." if blind_p_yes(q) >= 0.5 else "No." for q in ia}
    assert {blind_answer(q, 8, 0)[0] for q in ia} == {"Yes.", "No."}


class EvalLabelRagMIA(RagMIA):
    """RAG-MIA with the leak a review looks for: its gray-box ensemble is fitted on the evaluation
    candidates' labels as well as the reference ones and scores them in-sample."""

    def __init__(self, params, eval_labels, **kwargs):
        super().__init__(params, **kwargs)
        self.eval_labels = dict(eval_labels)

    def _crossfit(self, doc_ids, feats, reference_labels, template):
        labels = {**reference_labels, **self.eval_labels}
        y = np.array([labels[d] for d in doc_ids], dtype=int)
        scores = ensemble_scores(feats, y, feats, int(self.params["ensemble_size"]), self.seed + template)
        return scores, np.zeros(len(doc_ids), dtype=int)


N_REF_UNIT, N_EVAL_UNIT = 10, 20  # per class


def gray_box_interval(answer, leak: bool = False) -> tuple[float, float, float]:
    """AUC, lower and upper end of ``rag_mia/gray/t2`` on ``answer``'s responses, as rule metrics
    computes them (ragmi.metrics.evaluate), scored by RAG-MIA (``leak``: by :class:`EvalLabelRagMIA`)."""
    n = 2 * (N_REF_UNIT + N_EVAL_UNIT)
    cands = pd.DataFrame(
        {
            "doc_id": [f"d{i:03d}" for i in range(n)],
            "text": [candidate_text(i) for i in range(n)],
            "title": "",
            "label": [i % 2 for i in range(n)],
            "role": ["reference" if i < 2 * N_REF_UNIT else "eval" for i in range(n)],
        }
    )
    labels = dict(zip(cands["doc_id"], cands["label"]))
    ref = {d: y for d, y, r in zip(cands["doc_id"], cands["label"], cands["role"]) if r == "reference"}
    params = {"templates": [2], "ensemble_size": 5, "cv_folds": 3}
    attack = (
        EvalLabelRagMIA(params, {d: y for d, y in labels.items() if d not in ref}, seed=11)
        if leak
        else RagMIA(params, seed=11)
    )
    queries = attack.build_queries(cands[["doc_id", "text", "title"]])
    rows = []
    for q in queries.itertuples():
        text, lps = answer(q.user_prompt, int(q.max_tokens), int(q.top_logprobs))
        tops = [[{"token": a["token"], "logprob": a["logprob"]} for a in t["top_logprobs"]] for t in lps]
        rows.append(
            {
                "query_id": q.query_id,
                "response_text": text,
                "first_token_logprobs": tops[0],
                "token_logprobs": [t["logprob"] for t in lps],
                "token_top_logprobs": tops,
                "prompt_tokens": 1,
                "completion_tokens": 1,
            }
        )
    scores = attack.score(queries, pd.DataFrame(rows), ref)
    gray = scores[scores["variant"] == "rag_mia/gray/t2"].merge(cands[["doc_id", "label", "role"]], on="doc_id")
    row = evaluate(gray, n_boot=200).iloc[0]
    assert (row["n_members"], row["n_nonmembers"]) == (N_EVAL_UNIT, N_EVAL_UNIT)
    return row["auc"], row["auc_lo"], row["auc_hi"]


def test_a_scorer_fitted_on_evaluation_labels_is_caught_by_the_blind_model():
    """On the blind model (answers that carry nothing about membership), the real gray-box RAG-MIA
    scorer's AUC interval contains 0.5; the same scorer with the evaluation labels in its ensemble's
    training set reaches an interval above 0.5 -- what test_blind_target_is_not would report."""
    auc, lo, hi = gray_box_interval(blind_answer)
    assert lo <= 0.5 <= hi, (auc, lo, hi)
    auc, lo, hi = gray_box_interval(blind_answer, leak=True)
    assert lo > 0.5, (auc, lo, hi)


def test_a_constant_blind_model_hides_the_leak():
    """The earlier blind model (Yes with P(Yes) 0.8 to every question) gives every candidate the same
    features, so every score ties and even the leaky scorer's AUC is exactly 0.5: the blind tests
    could not fail."""

    def constant(question, max_tokens, k):
        return yes_no_answer(True, 0.8, k)

    for leak in (False, True):
        auc, lo, hi = gray_box_interval(constant, leak=leak)
        assert auc == 0.5 and lo <= 0.5 <= hi, (leak, auc, lo, hi)  # every score tied
