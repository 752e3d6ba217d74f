"""A realistic results tree for the embedded default (config/config.yaml), written without running it.

Every file the report tables and figures of the default read, with the shapes the pipeline's rules write
and numbers shaped like a user's first run of it: 20+20 evaluation and 20+20 reference candidates, the
default FPR levels (0, 0.5, 1 and 5%: the low ones are n/e at this n), RAG-MIA, S2MIA, extraction and
DCMI (with its θ and γ sweeps) on the undefended target, on PAD and on both negative controls; PAD acts on
the answer text only (an output hook that keeps the log-probabilities), so every log-probability variant
scores PAD's answers exactly as the undefended target's, while the text variants lose their signal; the
undefended target leaks 26 canaries over two seeds and 23 e-mail addresses per extraction run, PAD none;
the adaptive extraction campaigns (DGEA and RandomToken, three seeds each) copy one or two documents.

:func:`write_results` writes the tree and returns the validated config and, per table of the registry,
its input files (absolute paths): ``build_table(name)`` and ``draw(name, figure)`` build from them as the
``table`` and ``figure_<name>`` rules do.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ragmi.config import validate_config
from ragmi.metrics import evaluate, retrieved_tpr

ROOT = Path(__file__).resolve().parents[1]
DATASET = "synthetic"
N = 20  # per class, evaluation and reference
UNDEFENDED, PAD, NULL_DB, NO_RETR = "qwen-rag", "pad", "qwen-rag--null-db", "qwen-rag--no-retrieval"

# per attack: {variant: (member shift on the undefended target, decision rule?, channel)}; "lp" variants read
# log-probabilities (PAD leaves them alone), "text" variants read the answer text (PAD rewrites it)
VARIANTS = {
    "rag_mia": {
        "rag_mia/black/t2": (1.2, "binary", "text"),
        "rag_mia/gray/t2": (3.2, "rule", "lp"),
        "rag_mia/gray-pyes/t2": (1.3, None, "lp"),
        "rag_mia/gray-pyes/t2/reading=first-topk": (1.2, None, "lp"),
    },
    "s2mia": {
        "s2mia/s": (1.6, None, "text"),
        "s2mia/T": (1.2, "rule", "text"),
        "s2mia/M": (1.3, "rule", "text"),
    },
    "extraction": {
        "extraction/zeng": (2.2, None, "text"),
        "extraction/targeted": (0.5, None, "text"),
    },
    "dcmi": {
        "dcmi/adv1": (0.1, "rule", "lp"),
        "dcmi/adv2": (0.1, "rule", "lp"),
        "dcmi/adv3": (0.0, "binary", "text"),
        "dcmi/calibration=none": (0.2, None, "lp"),
        **{f"dcmi/theta={t:.2f}": (0.1 + t, "rule", "lp") for t in (0.06, 0.12)},
        **{f"dcmi/gamma={g:.1f}": (0.1, "rule", "lp") for g in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)},
    },
}
COSTS = {
    "rag_mia": {"queries_per_candidate": 1.0, "prompt_tokens_per_candidate": 412.6, "output_tokens_per_candidate": 3.9},
    "s2mia": {"queries_per_candidate": 1.0, "prompt_tokens_per_candidate": 388.1, "output_tokens_per_candidate": 61.2},
    "extraction": {
        "queries_per_candidate": 1.0,
        "prompt_tokens_per_candidate": 377.5,
        "output_tokens_per_candidate": 47.3,
    },
    "dcmi": {
        "queries_per_candidate": 3.0,
        "prompt_tokens_per_candidate": 1230.0,
        "output_tokens_per_candidate": 6.0,
        "attacker_llm_tokens_per_candidate": 0.0,
    },
}


def default_config() -> dict:
    """The embedded default without its DP-retrieval target (dp-r): the tree below writes the undefended
    target, PAD and the two controls; tests/test_inference_tables.py covers a DP-defended target."""
    raw = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    raw["targets"].pop("dp-r")
    return validate_config(raw)


def _ids(role: str) -> list[str]:
    return [f"{role[:3]}-m{i:02d}" for i in range(N)] + [f"{role[:3]}-n{i:02d}" for i in range(N)]


def candidates() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doc_id": _ids("reference") + _ids("eval"),
            "label": np.tile(np.r_[np.ones(N, int), np.zeros(N, int)], 2),
            "role": ["reference"] * (2 * N) + ["eval"] * (2 * N),
        }
    )


def _variant_scores(variant: str, shift: float, rule, rng) -> pd.DataFrame:
    cand = candidates()
    label = cand["label"].to_numpy()
    score = rng.normal(0, 1, len(cand)) + shift * label
    decision = np.full(len(cand), np.nan)
    if rule == "binary":  # a Yes/No answer: the score is the decision
        score = (score > 0.6).astype(float)
        decision = score.copy()
    elif rule == "rule":
        decision = (score > 0.5).astype(float)
    return pd.DataFrame({"doc_id": cand["doc_id"], "variant": variant, "score": score, "decision": decision})


def attack_scores(target: str, attack: str) -> pd.DataFrame:
    """The score file of (target, attack): PAD's log-probability variants are the undefended target's
    scores (same generations, logprobs kept); its text variants and the controls carry no signal."""
    parts = []
    for i, (v, (shift, rule, channel)) in enumerate(VARIANTS[attack].items()):
        seed = 100 * i + sum(map(ord, attack))
        if target == PAD and channel == "text":
            s = shift * (0.45 if v.startswith(("rag_mia/", "s2mia/")) else 0.0)
            parts.append(_variant_scores(v, s, rule, np.random.default_rng(seed + 7)))
        elif target in (NULL_DB, NO_RETR):
            parts.append(_variant_scores(v, 0.0, rule, np.random.default_rng(seed + len(target))))
        else:  # the undefended target, and PAD's log-probability variants: the same answers
            parts.append(_variant_scores(v, shift, rule, np.random.default_rng(seed)))
    return pd.concat(parts, ignore_index=True)


def attack_metrics(scores: pd.DataFrame, target: str, attack: str) -> pd.DataFrame:
    df = scores.merge(candidates(), on="doc_id")
    costs = dict(COSTS[attack])
    if attack in ("rag_mia", "dcmi"):
        costs["no_yes_no_rate"] = 0.0
    costs["candidate_retrieved_rate"] = 0.0 if target in (NULL_DB, NO_RETR) else 0.925
    costs["no_answer_rate"] = 0.05 if attack == "rag_mia" else np.nan
    per_variant = {v: dict(costs) for v in df["variant"].unique()}
    out = evaluate(df, fprs=[0.0, 0.005, 0.01, 0.05], n_boot=1000, costs=per_variant)
    ev = df[(df["role"] == "eval") & (df["label"] == 1)]
    retrieved = None if target == NO_RETR else {d: i % 10 != 0 for i, d in enumerate(ev["doc_id"].unique())}
    flags = dict.fromkeys(out["variant"], retrieved)
    out = pd.concat([out, retrieved_tpr(df, out, flags, [0.0, 0.005, 0.01, 0.05])], axis=1)
    for i, (col, val) in enumerate([("dataset", DATASET), ("target", target), ("attack", attack)]):
        out.insert(i, col, val)
    out["dataset_source"] = "synthetic"
    out["generator_model"] = "qwen2.5-coder-0.5b-instruct"
    return out


def _hooks(target: str) -> pd.DataFrame:
    if target == PAD:
        rows = [("pad", "pad", "output", 1.0, 0.42, 380, "pattern-limited", "pattern-limited", '{"text": 0.42}')]
    else:  # the probes target: every other defense, audited on its trigger probes only
        rows = [
            (
                "instruction",
                "instruction_rag_mia",
                "template",
                1.0,
                np.nan,
                0,
                "active",
                "prompt-only",
                '{"prompt": 1.0}',
            ),
            ("mirabel", "mirabel", "query", 0.5, np.nan, 0, "active", "retrieval-only", '{"refusal": 0.5}'),
            ("lprag", "lprag", "content", 1.0, np.nan, 0, "active", "retrieval-only", '{"context": 1.0}'),
            ("rerank", "rerank", "retrieval", 0.9, np.nan, 0, "active", "retrieval-only", '{"order": 0.9}'),
            ("dp-output", "dp_output", "output", 1.0, np.nan, 0, "active", "output-only", '{"text": 1.0}'),
        ]
    return pd.DataFrame(
        [
            {
                "dataset": DATASET,
                "target": target,
                "defense": d,
                "kind": k,
                "hook": h,
                "probe_fire_rate": p,
                "attack_fire_rate": a,
                "attack_n": n,
                "status": s,
                "defense_status": ds,
                "probe_channels": ch,
                "attack_channels": ch if n else "",
                "logprobs": "keep",
            }
            for d, k, h, p, a, n, s, ds, ch in rows
        ]
    )


# NELstrict entities per extraction run (the targeted prompt), and the canaries per seed (recovered, raw)
LEAKAGE = {UNDEFENDED: (23, 9), PAD: (0, 9), NULL_DB: (1, 4), NO_RETR: (0, 2)}
CANARIES = {UNDEFENDED: {101: (14, 14), 102: (12, 12)}, PAD: {101: (0, 14), 102: (0, 12)}}


def _utility_scores(target: str) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    f1 = rng.uniform(0.2, 0.9, 20)
    if target == PAD:
        f1 = f1 - rng.uniform(0.0, 0.08, 20)
    return pd.DataFrame(
        {
            "question_id": [f"q{i:02d}" for i in range(20)],
            "doc_id": [f"mem{i:02d}" for i in range(20)],
            "em": (f1 > 0.8).astype(float),
            "sub_em": (f1 > 0.5).astype(float),
            "f1": f1,
            "faithfulness": np.clip(f1 + 0.1, 0, 1),
        }
    )


def coverage_curves(target: str, attack: str, seed: int, budget: int) -> pd.DataFrame:
    """One campaign's curves as rule campaign_coverage writes them (ragmi.analysis.coverage), shaped like the
    default's on the 0.5B model: about 14% of 120 documents retrieved in 10 queries, one or two copied."""
    from ragmi.analysis.coverage import CURVE_COLUMNS

    rng = np.random.default_rng([seed, len(target), len(attack)])
    q = np.arange(1, budget + 1)
    copied = np.minimum(q // 5, 2 if attack == "dgea" and target == UNDEFENDED else 1)
    curves = {c: np.zeros(budget, dtype=int) for c in CURVE_COLUMNS}
    curves.update(
        queries=q,
        retrieved=np.minimum(120, np.cumsum(rng.integers(1, 3, budget))),
        extracted_rouge=copied,
        extracted_semantic=copied + (q > 6),
        chance_semantic=(q > 8).astype(int),
        pii_found=copied * 2,
        prompt_tokens=200 * q,
        completion_tokens=50 * q,
    )
    out = pd.DataFrame(curves)[CURVE_COLUMNS]
    last = int(copied[-1])
    ids = {
        "extracted_rouge_ids": [f"m{seed}-{i}" for i in range(last)],
        "extracted_semantic_ids": [f"m{seed}-{i}" for i in range(last + 1)],
        "chance_rouge_ids": [],
        "chance_semantic_ids": ["n1"],
    }
    for k, v in ids.items():
        out[k] = [v] * budget
    key = {
        "dataset": DATASET,
        "target": target,
        "attack": attack,
        "variant": "dgea/white" if attack == "dgea" else attack,
    }
    key.update(baseline=attack != "dgea", seed=seed, k=2, retrieval_known=True)
    meta = {"kb_size": 120, "n_chance": 80, "pii_total": 174, "pii_chance_total": 110, "canaries_total": 0}
    return out.assign(**key, **meta)


def write_results(root: Path) -> tuple[dict, dict]:
    """Write the tree under ``root``; return ``(config, {table: {input name: [absolute paths]}})`` for the
    tables the default builds."""
    from ragmi.report.registry import PUBLISHED, TABLES, analysis_input_files, built, input_files

    cfg = default_config()
    root = Path(root)

    def put(rel: str, write) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        write(p)

    put(f"results/split/{DATASET}/candidates.parquet", lambda p: candidates().to_parquet(p))
    for target in (UNDEFENDED, PAD, NULL_DB, NO_RETR):
        for attack in VARIANTS:
            scores = attack_scores(target, attack)
            put(f"results/scores/{DATASET}/{target}/{attack}.parquet", lambda p, s=scores: s.to_parquet(p))
            m = attack_metrics(scores, target, attack)
            put(f"results/metrics/{DATASET}/{target}/{attack}.csv", lambda p, m=m: m.to_csv(p, index=False))
        e, n = LEAKAGE[target]
        runs = pd.DataFrame(
            [
                {
                    "dataset": DATASET,
                    "target": target,
                    "run": "extraction/targeted",
                    "n_queries": 40,
                    "EMAIL_REAL": e,
                    "PERSON_NAME": n,
                    "strict": e + n,
                    "loose": e + n + 3,
                    "reproduced_fraction": 0.35 if target == UNDEFENDED else 0.1,
                    "outputs_digest": f"digest-{target}",
                }
            ]
        )
        put(f"results/audit/{DATASET}/{target}/leakage/extraction.csv", lambda p, r=runs: r.to_csv(p, index=False))
    for target in (PAD, "probes"):
        h = _hooks(target)
        put(f"results/audit/{DATASET}/{target}/hooks.csv", lambda p, h=h: h.to_csv(p, index=False))
    for target, seeds in CANARIES.items():
        for seed, (k, raw) in seeds.items():
            row = {"target": target, "seed": seed, "n_leaked": k, "n_canaries": 50, "n_leaked_raw": raw}
            put(f"results/audit/canaries/{target}/{seed}.json", lambda p, r=row: p.write_text(json.dumps(r)))
    for target in (UNDEFENDED, PAD):
        u = _utility_scores(target)
        put(f"results/utility/{DATASET}/{target}/scores.csv", lambda p, u=u: u.to_csv(p, index=False))
    from ragmi.plan import campaign_runs

    for d, t, a, seed in campaign_runs(cfg):
        c = coverage_curves(t, a, seed, int(cfg["campaigns"]["budget"]))
        put(f"results/coverage/{d}/{t}/{a}/seed{seed}.parquet", lambda p, c=c: c.to_parquet(p))

    files = {}
    for name, table in TABLES.items():
        if built(table, cfg):
            raw = analysis_input_files(name, cfg) if table.analysis is not None else input_files(name, cfg)
            raw = {k: [p if Path(p).is_absolute() else str(root / p) for p in v] for k, v in raw.items()}
            if table.published and table.analysis is not None:
                raw["published"] = [PUBLISHED]
            files[name] = as_the_rules_do(name, raw, cfg, root / "results/analysis")
    return cfg, files


def as_the_rules_do(name: str, files: dict, cfg: dict, out_dir) -> dict:
    """The files the ``table`` and figure rules read for table ``name``: for a table that declares an
    analysis, rule ``analysis`` runs first on ``files`` (into ``out_dir/<name>.parquet``) and the table
    reads that (with ``published`` where the table compares)."""
    from ragmi.report.registry import TABLES, run_analysis

    table = TABLES[name]
    if table.analysis is None:
        return files
    out = Path(out_dir) / f"{name}.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    run_analysis(table, files, cfg, str(out))
    return {"analysis": [str(out)], **({"published": files["published"]} if "published" in files else {})}


def build_table(root: Path, cfg: dict, files: dict, name: str) -> tuple[pd.DataFrame, str]:
    """Table ``name`` as the ``table`` rule writes it: ``(frame, Markdown text)``."""
    from ragmi.report.registry import TABLES, write_table

    out = Path(root) / "results/tables"
    df = write_table(TABLES[name], files[name], cfg, out / f"{name}.csv", out / f"{name}.md")
    return df, (out / f"{name}.md").read_text()


def draw(root: Path, cfg: dict, files: dict, table: str, figure: str) -> Path:
    """Figure ``figure`` of ``table`` as its ``figure_<name>`` rule draws it; the PNG's path."""
    from ragmi.report.registry import TABLES, draw_figure

    png = Path(root) / f"results/figures/{figure}.png"
    draw_figure(TABLES[table], figure, files[table], cfg, str(png))
    return png


def md_tables(md: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every Markdown table of ``md``: ``(the heading above it, "" for none; header cells; rows of cells)``,
    cells split on unescaped ``|`` and stripped."""
    import re

    def cells(line: str) -> list[str]:
        return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]

    out, heading, cur = [], "", None
    for line in md.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if line.startswith("|"):
            if cur is None:
                cur = (heading, cells(line), [])
                out.append(cur)
            elif not set(line) <= set("|-"):
                cur[2].append(cells(line))
        else:
            cur = None
    return out


def records(table: tuple[str, list[str], list[list[str]]]) -> list[dict]:
    """The rows of one :func:`md_tables` table as {header: cell}."""
    _, header, rows = table
    return [dict(zip(header, r)) for r in rows]
