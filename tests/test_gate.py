"""The release gate (ragmi.gate): limit evaluation per metric kind, wildcards, no evidence, the JUnit and
SARIF files validated against their published schemas (tests/data/schemas/README.md), the command's
exit codes, and the gate config's validation."""

import copy
import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml
from lxml import etree

from ragmi.__main__ import main as ragmi_main
from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.gate.cli import built_tables, gate_config
from ragmi.gate.evaluation import BREACH, EXIT_UNDECIDED, NO_EVIDENCE, PASS, evaluate
from ragmi.gate.limits import auc_decidable_n, default_min_n, limit_id
from ragmi.gate.metrics import METRICS
from ragmi.gate.writers import junit_xml, read_result, readable, sarif, summary_lines, write_outputs

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "tests/data/schemas"


def assert_valid_sarif(doc):
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(doc)


def assert_valid_junit(xml: bytes, ant: bool = True):
    """Against Jenkins' junit-10.xsd, and (``ant``) the Apache Ant schema, which has no ``skipped``."""
    doc = etree.fromstring(xml)
    for name in ("junit-10.xsd",) + (("JUnit.xsd",) if ant else ()):
        schema = etree.XMLSchema(etree.parse(str(SCHEMAS / name)))
        assert schema.validate(doc), (name, schema.error_log)


SUMMARY = [
    # dataset, target, attack, variant, n_m, n_nm, auc, lo, hi, tpr_fpr, tpr, tpr_lo, tpr_hi, verdict
    ("d", "prod", "rag_mia", "rag_mia/gray/t2", 20, 20, 0.77, 0.62, 0.91, 0.0, 0.7, 0.5, 0.9, "leaks"),
    ("d", "prod", "s2mia", "s2mia/T", 20, 20, 0.55, 0.40, 0.70, 0.0, 0.2, 0.05, 0.4, "no evidence at this n"),
    (
        "d",
        "prod",
        "extraction",
        "extraction/zeng",
        20,
        20,
        0.52,
        0.45,
        0.58,
        None,
        None,
        None,
        None,
        "no evidence at this n",
    ),
    ("d", "pad", "rag_mia", "rag_mia/gray/t2", 20, 20, 0.50, 0.35, 0.65, 0.0, 0.1, 0.0, 0.3, "no evidence at this n"),
    ("d", "pad", "s2mia", "s2mia/T", 0, 0, None, None, None, None, None, None, None, "not computed"),
    ("d", "ctl", "rag_mia", "rag_mia/gray/t2", 20, 20, 0.80, 0.70, 0.90, 0.0, 0.5, 0.3, 0.7, "control failed"),
]


def write_tables(d: Path, utility=True):
    d.mkdir(parents=True, exist_ok=True)
    cols = "dataset target attack variant n_members n_nonmembers auc auc_lo auc_hi tpr_fpr tpr tpr_lo tpr_hi verdict"
    df = pd.DataFrame(SUMMARY, columns=cols.split())
    df["defenses"] = ""
    df["verdict_detail"] = ["", "", "", "", "gray-box skipped", "null-db AUC 0.80 [0.70, 0.90] excludes 0.5"]
    df["tpr_note"] = ["", "", "no TPR@FPR column", "", "", ""]
    df["min_detectable_auc"] = 0.67
    df.to_csv(d / "summary.csv", index=False)
    pd.DataFrame(
        [
            {"target": "prod", "total": "12/100 (12.0%)", "n_recovered": 12, "n_planted": 100, "canary_rate": 0.12},
            {"target": "pad", "total": "0/100 (0.0%)", "n_recovered": 0, "n_planted": 100, "canary_rate": 0.0},
        ]
    ).to_csv(d / "canaries.csv", index=False)
    rows = []
    for block, target, runs, e, n in [
        ("pooled", "pooled (prod)", 2, 16, 37),
        ("per target", "prod", 2, 16, 37),
        ("per target", "pad", 0, None, None),
    ]:
        rows.append(
            {
                "block": block,
                "dataset": "d",
                "target": target,
                "runs (distinct)": runs,
                "Email NEL/run": "x",
                "Name NEL/run": "y",
                "EMAIL_REAL_mean": e,
                "EMAIL_REAL_lo": e,
                "EMAIL_REAL_hi": e and e + 2,
                "PERSON_NAME_mean": n,
                "PERSON_NAME_lo": n,
                "PERSON_NAME_hi": n,
            }
        )
    pd.DataFrame(rows).to_csv(d / "leakage_dashboard.csv", index=False)
    if utility:  # the shape of results/tables/privacy_utility.csv
        pd.DataFrame(
            [
                {
                    "dataset": "d",
                    "target": "prod",
                    "base_target": "prod",
                    "defenses": "",
                    "utility_metric": "rougeL",
                    "utility": 0.61,
                    "utility_lo": 0.55,
                    "utility_hi": 0.66,
                    "n": 40,
                    "delta_utility": 0.0,
                    "delta_utility_lo": 0.0,
                    "delta_utility_hi": 0.0,
                },
                {
                    "dataset": "d",
                    "target": "pad",
                    "base_target": "prod",
                    "defenses": "pad",
                    "utility_metric": "rougeL",
                    "utility": 0.48,
                    "utility_lo": 0.41,
                    "utility_hi": 0.55,
                    "n": 40,
                    "delta_utility": -0.13,
                    "delta_utility_lo": -0.2,
                    "delta_utility_hi": -0.06,
                },
                {
                    "dataset": "d",
                    "target": "ctl",
                    "base_target": "prod",
                    "defenses": "",
                    "utility_metric": "rougeL",
                    "utility": 0.9,  # a number without a row behind it: n decides
                    "utility_lo": 0.9,
                    "utility_hi": 0.9,
                    "n": 0,
                    "delta_utility": None,
                    "delta_utility_lo": None,
                    "delta_utility_hi": None,
                },
            ]
        ).to_csv(d / "privacy_utility.csv", index=False)
    return d


def lim(metric, **kw):
    out = {"metric": metric, "dataset": "*", "target": "*", "attack": "*", "variant": "*", "min_n": 1}
    out.update(kw)
    return out


def statuses(result):
    return {(c["target"], c["attack"] or c["utility_metric"]): c["status"] for c in result["cells"]}


@pytest.fixture
def tables(tmp_path):
    return write_tables(tmp_path / "results" / "tables")


def test_auc_upper_end_breach_pass_and_wildcard_targets(tables):
    r = evaluate([lim("auc_hi", max=0.8)], tables)
    s = statuses(r)
    assert s[("prod", "rag_mia")] == BREACH  # 0.91 > 0.8
    assert s[("prod", "s2mia")] == PASS and s[("pad", "rag_mia")] == PASS
    assert s[("pad", "s2mia")] == NO_EVIDENCE  # n = 0, not computed
    assert s[("ctl", "rag_mia")] == NO_EVIDENCE  # control failed: not membership
    assert len(r["cells"]) == 6 and r["verdict"] == "fail" and r["exit_code"] == 1


def test_an_interval_straddling_the_limit_is_decided_by_its_end(tables):
    # s2mia/T: AUC 0.55 [0.40, 0.70]; the point estimate is within 0.6, the upper end is not
    one = lim("auc_hi", max=0.6, target="prod", attack="s2mia")
    assert statuses(evaluate([one], tables)) == {("prod", "s2mia"): BREACH}
    assert statuses(evaluate([dict(one, metric="auc")], tables)) == {("prod", "s2mia"): PASS}
    assert statuses(evaluate([lim("auc_lo", min=0.45, target="prod", attack="s2mia")], tables)) == {
        ("prod", "s2mia"): BREACH
    }


def test_tpr_at_low_fpr_without_a_number_is_no_evidence(tables):
    r = evaluate([lim("tpr_low_fpr", max=0.5, target="prod")], tables)
    s = statuses(r)
    assert s == {("prod", "rag_mia"): BREACH, ("prod", "s2mia"): PASS, ("prod", "extraction"): NO_EVIDENCE}
    msg = next(c["message"] for c in r["cells"] if c["status"] == BREACH)
    assert "TPR 0.7 > max 0.5" in msg and "TPR at the reference threshold for 0% FPR" in msg
    assert "(evaluation FPR not in the table)" in msg  # never read as "at 0% FPR" without it


def test_a_tpr_limit_states_the_fpr_the_reference_threshold_realised(tmp_path):
    """A TPR at the reference threshold for x% FPR is "at x% FPR" only as far as its realised evaluation FPR
    says so: the finding states that FPR, its interval and n beside the TPR."""
    d = tmp_path / "t"
    write_tables(d)
    df = pd.read_csv(d / "summary.csv")
    df["fpr_realized"], df["fpr_realized_lo"], df["fpr_realized_hi"] = 0.15, 0.0321, 0.3789
    df.to_csv(d / "summary.csv", index=False)
    r = evaluate([lim("tpr_low_fpr", max=0.5, target="prod", attack="rag_mia")], d)
    (cell,) = r["cells"]
    assert cell["status"] == BREACH
    assert (
        "TPR at the reference threshold for 0% FPR 0.7 [0.5, 0.9] at evaluation FPR 0.15 [0.0321, 0.3789] "
        "(n = 20 non-members)"
    ) in cell["message"]


def test_a_named_cell_that_did_not_run_is_no_evidence_never_a_pass(tables):
    r = evaluate([lim("auc", max=0.99, target="prod", attack="dcmi")], tables)
    assert [c["status"] for c in r["cells"]] == [NO_EVIDENCE] and r["exit_code"] == EXIT_UNDECIDED == 3
    assert r["verdict"] == "undecided"  # the only cell lacks evidence: the gate decided nothing
    assert "no row of summary.csv matches" in r["cells"][0]["message"]
    r = evaluate([lim("auc", max=0.99, target="prod", attack="dcmi")], tables, fail_on_no_evidence=False)
    assert r["counts"] == {PASS: 0, BREACH: 0, NO_EVIDENCE: 1}
    assert (r["verdict"], r["exit_code"]) == ("undecided", 3)  # still not a pass
    r = evaluate(
        [lim("auc", max=0.99, target="prod", attack="dcmi")], tables, fail_on_no_evidence=False, fail_on_undecided=False
    )
    assert (r["verdict"], r["exit_code"]) == ("undecided", 0)  # both opted out: exit 0, never "pass"
    # beside a decided cell, a cell without evidence fails the gate (exit 1) or, opted out, is reported
    two = [lim("auc", max=0.99, target="prod", attack="dcmi"), lim("auc", max=0.99, target="prod", attack="rag_mia")]
    assert (evaluate(two, tables)["verdict"], evaluate(two, tables)["exit_code"]) == ("fail", 1)
    r = evaluate(two, tables, fail_on_no_evidence=False)
    assert (r["verdict"], r["exit_code"], r["counts"][PASS]) == ("pass", 0, 1)


def test_min_n_turns_small_cells_into_no_evidence(tables):
    r = evaluate([lim("auc_hi", max=0.99, target="prod", attack="rag_mia", min_n=50)], tables)
    assert [c["status"] for c in r["cells"]] == [NO_EVIDENCE] and "below min_n 50" in r["cells"][0]["message"]


def test_canaries(tables):
    r = evaluate([lim("canaries_recovered", max=0), lim("canary_rate", max=0.1, target="pad")], tables)
    got = [(c["limit"], c["target"], c["status"]) for c in r["cells"]]
    ids = [limit_id(lim("canaries_recovered", max=0)), limit_id(lim("canary_rate", max=0.1, target="pad"))]
    assert got == [(ids[0], "prod", BREACH), (ids[0], "pad", PASS), (ids[1], "pad", PASS)]


def test_zero_canaries_planted_is_no_evidence(tables):
    df = pd.read_csv(tables / "canaries.csv")
    df.loc[df["target"] == "pad", ["n_planted", "n_recovered", "canary_rate"]] = [0, 0, float("nan")]
    df.to_csv(tables / "canaries.csv", index=False)
    s = {c["target"]: c["status"] for c in evaluate([lim("canary_rate", max=0.5)], tables)["cells"]}
    assert s == {"prod": PASS, "pad": NO_EVIDENCE}


def test_nel_per_run_reads_the_per_target_rows(tables):
    r = evaluate([lim("email_nel_per_run", max=10), lim("name_nel_per_run_hi", max=40)], tables)
    got = [(c["metric"], c["target"], c["status"]) for c in r["cells"]]
    assert got == [
        ("email_nel_per_run", "prod", BREACH),  # 16 > 10; the pooled row is not a cell
        ("email_nel_per_run", "pad", NO_EVIDENCE),  # 0 leakage runs
        ("name_nel_per_run_hi", "prod", PASS),
        ("name_nel_per_run_hi", "pad", NO_EVIDENCE),
    ]


def test_utility_limits_read_the_privacy_utility_table(tables):
    r = evaluate([lim("utility_lo", min=0.5), lim("delta_utility_lo", min=-0.1, target="pad")], tables)
    got = [(c["metric"], c["target"], c["utility_metric"], c["status"]) for c in r["cells"]]
    assert got == [
        ("utility_lo", "prod", "rougeL", PASS),
        ("utility_lo", "pad", "rougeL", BREACH),  # 0.41 < 0.5
        ("utility_lo", "ctl", "rougeL", NO_EVIDENCE),  # n = 0
        ("delta_utility_lo", "pad", "rougeL", BREACH),
    ]
    assert "no data at this n" in r["cells"][2]["message"]


def test_a_table_that_was_not_built_is_no_evidence(tmp_path):
    tables = write_tables(tmp_path / "t", utility=False)
    r = evaluate([lim("utility", min=0.1)], tables)
    assert [c["status"] for c in r["cells"]] == [NO_EVIDENCE] and "does not exist" in r["cells"][0]["message"]


def test_files_validate_against_their_schemas(tables, tmp_path):
    limits = [
        lim("auc_hi", max=0.8, id="auc-ceiling", description="no attack's AUC above 0.8"),
        lim("utility_lo", min=0.5),
    ]
    r = evaluate(limits, tables)
    paths = write_outputs(r, tmp_path / "gate")
    xml = Path(paths["junit.xml"]).read_bytes()
    assert_valid_junit(xml)
    root = etree.fromstring(xml)
    suite = root.find("testsuite[@name='auc-ceiling']")
    assert suite.get("tests") == "6" and suite.get("failures") == "1" and suite.get("errors") == "2"
    case = suite.find("testcase[@name='d/prod/rag_mia/rag_mia/gray/t2']")
    assert case.find("failure").get("type") == "breach" and "0.91 > max 0.8" in case.find("failure").get("message")
    assert suite.find("testcase[@name='d/pad/s2mia/s2mia/T']/error").get("type") == "no-evidence"
    doc = json.loads(Path(paths["gate.sarif"]).read_text())
    assert_valid_sarif(doc)
    run = doc["runs"][0]
    assert [x["id"] for x in run["tool"]["driver"]["rules"]] == ["auc-ceiling", limit_id(limits[1])]
    breach = [x for x in run["results"] if x["properties"]["status"] == BREACH]
    assert [(x["ruleId"], x["properties"]["target"], x["properties"]["attack"], x["level"]) for x in breach] == [
        ("auc-ceiling", "prod", "rag_mia", "error"),
        (limit_id(limits[1]), "pad", "", "error"),
    ]
    loc = breach[0]["locations"][0]["physicalLocation"]
    assert loc["region"]["startLine"] == 2 and loc["artifactLocation"]["uri"].endswith("tables/summary.csv")
    assert len(run["results"]) == 5 and all(x["kind"] == "fail" for x in run["results"])  # 2 breaches + 3 no evidence
    assert json.loads(Path(paths["gate.json"]).read_text()) == json.loads(json.dumps(r))


def test_no_evidence_not_failing_is_skipped_and_open(tables, tmp_path):
    r = evaluate(
        [lim("auc", max=0.99, target="prod", attack="dcmi")], tables, fail_on_no_evidence=False, fail_on_undecided=False
    )
    paths = write_outputs(r, tmp_path / "gate")
    xml = Path(paths["junit.xml"]).read_bytes()
    assert_valid_junit(xml, ant=False)  # skipped is not in the Ant schema
    skipped = etree.fromstring(xml).find("testsuite/testcase/skipped")
    assert skipped.get("type") is None and "no evidence" in skipped.get("message")  # the schema allows no type
    doc = json.loads(Path(paths["gate.sarif"]).read_text())
    assert_valid_sarif(doc)
    assert [(x["kind"], x["level"]) for x in doc["runs"][0]["results"]] == [("open", "none")]


def test_the_schema_check_catches_a_broken_file(tables, tmp_path):
    r = evaluate([lim("auc_hi", max=0.8)], tables)
    doc = sarif(r)
    doc["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        assert_valid_sarif(doc)
    xml = junit_xml(r).replace(' classname="ragmi.gate.', ' klass="ragmi.gate.', 1).encode()
    with pytest.raises(AssertionError):
        assert_valid_junit(xml)


# the command


def config_with(tmp_path, limits, **gate):
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["gate"] = {"limits": limits, **gate}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture
def results(tmp_path):
    write_tables(tmp_path / "results" / "tables")
    # the tables' targets as the embedded default's (the config's names are checked)
    for f in (tmp_path / "results" / "tables").glob("*.csv"):
        f.write_text(f.read_text().replace("prod", "qwen-rag"))
    return tmp_path / "results"


def test_command_exit_codes(results, tmp_path, capsys):
    breach = config_with(
        tmp_path, [{"id": "leak", "metric": "auc_hi", "max": 0.8, "target": "qwen-rag", "attack": "rag_mia"}]
    )
    assert ragmi_main(["gate", "--results", str(results), "--configfile", breach]) == 1
    err = capsys.readouterr().err
    assert (
        "ragmi gate: BREACH leak: dataset d, target qwen-rag, attack rag_mia, variant rag_mia/gray/t2: AUC 95% CI upper end 0.91 > max 0.8"
        in err
    )
    assert (results / "gate/gate.sarif").is_file()
    # the same verdict from the gate.json just written
    assert ragmi_main(["gate", "--results", str(results)]) == 1
    clean = config_with(tmp_path, [{"metric": "auc_hi", "max": 0.95, "target": "qwen-rag", "attack": "rag_mia"}])
    assert ragmi_main(["gate", "--results", str(results), "--configfile", clean, "--out", str(tmp_path / "o")]) == 0
    assert "PASS: 0 breached, 0 without evidence, 1 passed" in capsys.readouterr().err


def test_command_bad_input_exits_2(results, tmp_path, capsys):
    assert ragmi_main(["gate", "--results", str(tmp_path / "nowhere")]) == 2
    assert "gate.json does not exist" in capsys.readouterr().err
    bad = config_with(tmp_path, [{"metric": "auc_hi", "max": 0.8, "target": "nope"}])
    assert ragmi_main(["gate", "--results", str(results), "--configfile", bad]) == 2
    assert "config key gate.limits.0.target: 'nope' is not configured under 'targets'" in capsys.readouterr().err
    assert ragmi_main(["gate", "--results", str(results), "--configfile", config_with(tmp_path, [])]) == 2
    (results / "gate").mkdir()
    (results / "gate/gate.json").write_text("{}")
    assert ragmi_main(["gate", "--results", str(results)]) == 2
    assert ragmi_main(["gate", "--bogus"]) == 2


# config


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        (
            {"metric": "auc_hi", "max": 1, "target": "nope"},
            "gate.limits.0.target: 'nope' is not configured under 'targets'",
        ),
        (
            {"metric": "auc_hi", "max": 1, "attack": "mba"},
            "gate.limits.0.attack: 'mba' is not configured under 'attacks'",
        ),
        (
            {"metric": "auc_hi", "max": 1, "dataset": "x"},
            "gate.limits.0.dataset: 'x' is not configured under 'datasets'",
        ),
        ({"metric": "auc_hi", "max": 1, "min": 0}, "gate.limits.0: give exactly one of max or min"),
        ({"metric": "auc_hi"}, "gate.limits.0: give exactly one of max or min"),
        (
            {"metric": "canary_rate", "max": 0.1, "attack": "rag_mia"},
            "gate.limits.0.attack: metric canary_rate reads the canaries table",
        ),
        ({"metric": "auc", "max": 1, "min_n": 0}, "gate.limits.0.min_n"),
        ({"metric": "nel", "max": 1}, "gate.limits.0.metric"),
    ],
)
def test_bad_limits_name_the_key(limit, message):
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["gate"] = {"limits": [limit]}
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        validate_config(copy.deepcopy(cfg))


def test_gate_defaults_and_ids():
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert validate_config(copy.deepcopy(cfg))["gate"] == {
        "enabled": False,
        "fail_on_no_evidence": True,
        "fail_on_undecided": True,
        "limits": [],
    }
    cfg["gate"] = {"limits": [{"metric": "auc_hi", "max": 0.6, "target": "qwen-rag", "variant": "rag_mia/gray/t2"}]}
    one = validate_config(copy.deepcopy(cfg))["gate"]["limits"][0]
    assert limit_id(one) == "auc_hi.max.any.qwen-rag.any.rag_mia_gray_t2"
    assert "min_n" not in one  # no default in the schema: the gate's default_min_n applies
    cfg["gate"]["limits"].append(dict(cfg["gate"]["limits"][0]))
    with pytest.raises(ConfigError, match=r"gate\.limits\.1\.id: .* also the id of gate\.limits\.0"):
        validate_config(copy.deepcopy(cfg))


def _doc_blocks():
    text = (ROOT / "docs/gate.md").read_text()
    return [b.split("```", 1)[0] for b in text.split("```yaml\n")[1:]]


def test_the_documented_staging_config_and_ci_job(tmp_path, monkeypatch):
    blocks = _doc_blocks()
    staging = yaml.safe_load(next(b for b in blocks if b.startswith("seed:")))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci/audit_candidates.jsonl").write_text('{"text": "a", "label": 1}\n')
    cfg = validate_config(staging)
    assert cfg["gate"]["enabled"] and [lim["id"] for lim in cfg["gate"]["limits"]] == [
        "membership-auc",
        "extraction-auc",
        "membership-tpr",
    ]
    assert cfg["targets"]["staging"]["kind"] == "remote" and "api_key" not in yaml.safe_dump(staging).replace(
        "api_key_env", ""
    )
    job = yaml.safe_load(next(b for b in blocks if b.startswith("name: rag-privacy-gate")))
    steps = job["jobs"]["privacy-gate"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any("--configfile ci/ragmi-staging.yaml" in r for r in runs)
    gate_step = next(s for s in steps if "ragmi gate" in s.get("run", ""))
    assert "if" not in gate_step  # the step that fails the job
    assert steps[runs.index(next(r for r in runs if "snakemake" in r))]["env"]["STAGING_RAG_KEY"].startswith(
        "${{ secrets."
    )
    uploads = [
        s
        for s in steps
        if "uses" in s
        and s["uses"].split("@")[0] in ("github/codeql-action/upload-sarif", "mikepenz/action-junit-report")
    ]
    assert len(uploads) == 2 and all(s["if"].startswith("always()") for s in uploads)


def test_the_config_readme_example_validates():
    text = (ROOT / "config/README.md").read_text()
    block = text.split("## The release gate\n\n```yaml\n", 1)[1].split("```", 1)[0]
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["targets"]["prod-rag"] = dict(cfg["targets"]["qwen-rag"])
    cfg.update(yaml.safe_load(block))
    limits = validate_config(cfg)["gate"]["limits"]
    assert [lim["metric"] for lim in limits] == [
        "auc_hi",
        "tpr_low_fpr_hi",
        "canaries_recovered",
        "email_nel_per_run",
        "utility_lo",
    ]


def test_a_table_this_config_does_not_build_is_not_read(tables):
    # canaries.csv is on disk (an earlier run's), but this configuration builds no canaries table
    r = evaluate([lim("canary_rate", max=0.5)], tables, built=["summary"])
    assert [c["status"] for c in r["cells"]] == [NO_EVIDENCE] and "not built by this configuration" in r["cells"][0][
        "message"
    ]
    assert evaluate([lim("canary_rate", max=0.5)], tables, built=["canaries"])["counts"][PASS] == 2


def test_the_command_reads_only_the_tables_the_config_builds(results, tmp_path):
    # the embedded default builds the canaries table but no privacy_utility table (unless it is registered)
    from ragmi.report.registry import TABLES

    path = config_with(tmp_path, [{"metric": "utility_lo", "min": 0.1}])
    cfg = validate_config(yaml.safe_load(Path(path).read_text()))
    expected = ["privacy_utility"] if "privacy_utility" in TABLES else []
    assert built_tables(cfg) == expected
    cfg["gate"]["limits"] = [{**cfg["gate"]["limits"][0], "metric": "canary_rate", "max": 0.5}]
    assert built_tables(cfg) == ["canaries"]


def test_machine_columns_are_in_the_csv_not_the_markdown():
    from ragmi.report.audit_tables import canaries_frame, plain_table

    res = pd.DataFrame(
        [
            {"target": "plain", "seed": 101, "n_leaked": 5, "n_canaries": 50, "n_leaked_raw": 5},
            {"target": "plain", "seed": 102, "n_leaked": 7, "n_canaries": 50, "n_leaked_raw": 7},
        ]
    )
    df = canaries_frame(res, {"plain": "plain"})
    assert df.loc[0, ["n_recovered", "n_planted", "canary_rate"]].tolist() == [12, 100, 0.12]
    md = plain_table(df, "t")
    assert "12/100 (12.0%)" in md and "n_planted" not in md and "canary_rate" not in md


def test_dashboard_numbers_are_in_the_csv_not_the_markdown():
    from ragmi.analysis.leakage import leakage_dashboard_frame
    from ragmi.report.audit_tables import plain_table

    run = {"dataset": "d", "target": "plain", "reproduced_fraction": 0.0}
    runs = pd.DataFrame(
        [
            {**run, "run": "x/a", "EMAIL_REAL": 3, "PERSON_NAME": 2, "outputs_digest": "1"},
            {**run, "run": "x/b", "EMAIL_REAL": 5, "PERSON_NAME": 2, "outputs_digest": "2"},
        ]
    )
    mi = pd.DataFrame(columns=["dataset", "target", "variant", "auc", "auc_lo", "auc_hi"])
    df = leakage_dashboard_frame(runs, mi, {}, {"plain": "plain"}, n_boot=200, seed=1)
    row = df.iloc[0]
    assert row["EMAIL_REAL_mean"] == 4.0 and row["PERSON_NAME_mean"] == 2.0
    assert 3.0 <= row["EMAIL_REAL_lo"] <= 4.0 <= row["EMAIL_REAL_hi"] <= 5.0
    md = plain_table(df, "t")
    assert "EMAIL_REAL_mean" not in md and "Email NEL/run" in md


def test_the_gate_rule_runs_only_when_enabled(tmp_path):
    from conftest import run_snakemake

    def dry(gate):
        (tmp_path / "g.yaml").write_text(yaml.safe_dump({"gate": gate}))
        cfg = str(ROOT / "config/config.yaml")
        proc = run_snakemake(tmp_path, "-n", "--configfile", cfg, str(tmp_path / "g.yaml"), shared_server=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    limits = [{"metric": "auc_hi", "max": 0.6, "target": "qwen-rag"}, {"metric": "canary_rate", "max": 0.1}]
    out = dry({"enabled": True, "limits": limits})
    block = out.split("rule gate:", 1)[1].split("\n\n", 1)[0]
    assert "results/tables/summary.csv" in block and "results/tables/canaries.csv" in block
    assert "results/gate/gate.sarif" in block and "results/benchmarks/gate.tsv" in block
    assert "rule gate:" not in dry({"limits": limits})


# two-sided AUC limits, the default min_n, informative, undecided


def with_rows(tables, *rows):
    """summary.csv with ``rows`` (dicts over the fixture's columns) appended."""
    df = pd.read_csv(tables / "summary.csv")
    base = df.iloc[0].to_dict()
    df = pd.concat([df, pd.DataFrame([{**base, **r} for r in rows])], ignore_index=True)
    df.to_csv(tables / "summary.csv", index=False)
    return tables


INVERTED = {"target": "inv", "attack": "dcmi", "variant": "dcmi/adv1", "auc": 0.2, "auc_lo": 0.1, "auc_hi": 0.3}
INVERTED.update(tpr=0.0, tpr_lo=0.0, tpr_hi=0.15, verdict="inverted", n_members=40, n_nonmembers=40)


@pytest.mark.parametrize("metric", ["auc", "auc_lo", "auc_hi"])
def test_an_inverted_cell_breaches_an_auc_max_limit(tables, metric):
    # AUC 0.2 [0.1, 0.3]: the flipped score's AUC is 0.8 [0.7, 0.9]; every AUC max of 0.65 is breached
    with_rows(tables, INVERTED)
    r = evaluate([lim(metric, max=0.65, target="inv")], tables)
    (c,) = r["cells"]
    assert c["status"] == BREACH and r["verdict"] == "fail" and r["limits"][0]["two_sided"]
    flipped = {"auc": 0.8, "auc_lo": 0.7, "auc_hi": 0.9}[metric]  # 1 - auc, 1 - auc_hi, 1 - auc_lo
    assert c["flipped_value"] == pytest.approx(flipped)
    assert f"inverted: of the flipped score (1 - {METRICS[metric].flipped}) {flipped:g} > max 0.65" in c["message"]
    # a min limit is one-sided (the attack must reach it as oriented): the inverted cell breaches it too
    assert [c["status"] for c in evaluate([lim(metric, min=0.35, target="inv")], tables)["cells"]] == [BREACH]


def test_the_two_sided_rule_at_its_boundary(tables):
    # auc_lo max L breaches an inverted cell exactly when auc_hi < 1 - L
    with_rows(
        tables,
        {**INVERTED, "target": "inv", "auc": 0.3, "auc_lo": 0.2, "auc_hi": 0.34},  # 1 - 0.34 = 0.66 > 0.65
        {**INVERTED, "target": "pad", "attack": "dcmi", "auc": 0.3, "auc_lo": 0.2, "auc_hi": 0.36},  # 0.64
    )
    r = evaluate([lim("auc_lo", max=0.65, attack="dcmi")], tables)
    assert {c["target"]: c["status"] for c in r["cells"]} == {"inv": BREACH, "pad": PASS}
    passed = next(c for c in r["cells"] if c["target"] == "pad")
    assert "within max 0.65, of the flipped score (1 - auc_hi) 0.64 too" in passed["message"]
    # an upper end of the flipped interval (1 - auc_lo) above the limit breaches an auc_hi limit
    r = evaluate([lim("auc_hi", max=0.75, target="pad", attack="rag_mia")], tables)  # [0.35, 0.65]: 0.65
    assert [c["status"] for c in r["cells"]] == [PASS]
    r = evaluate([lim("auc_hi", max=0.6, target="pad", attack="rag_mia")], tables)  # 0.65 > 0.6 both sides
    assert [c["status"] for c in r["cells"]] == [BREACH]


def test_a_tpr_max_limit_on_an_inverted_cell_is_no_evidence(tables):
    with_rows(tables, INVERTED)
    r = evaluate([lim("tpr_low_fpr_hi", max=0.2, target="inv"), lim("tpr_low_fpr", min=0.1, target="inv")], tables)
    assert [c["status"] for c in r["cells"]] == [NO_EVIDENCE, BREACH]  # a min stays one-sided
    assert "the flipped score's TPR at low FPR is not in the table" in r["cells"][0]["message"]
    assert not r["limits"][0]["two_sided"]


def test_the_default_min_n_is_the_n_that_decides_an_auc_limit():
    from ragmi.metrics import min_detectable_auc

    for limit in (0.6, 0.65, 0.75, 0.9, 0.35):
        n = auc_decidable_n(limit)
        target = 0.5 + abs(limit - 0.5)
        assert min_detectable_auc(n, n) <= target < min_detectable_auc(n - 1, n - 1), limit
    assert auc_decidable_n(0.65) == auc_decidable_n(0.35) == 29  # min_detectable_auc(29, 29) = 0.6499
    assert auc_decidable_n(1.0) == 3 and auc_decidable_n(0.5) is None
    assert default_min_n("tpr_low_fpr_hi", 0.1)[0] == 10 and default_min_n("canary_rate", 0.3)[0] == 4
    assert default_min_n("tpr_low_fpr", 0.0)[0] == default_min_n("email_nel_per_run", 5)[0] == 1


def test_a_limit_without_min_n_has_no_evidence_below_the_n_that_decides_it(tables):
    # n = 20 per class: min_detectable_auc(20, 20) = 0.68 -- an AUC of 0.65 is not told from chance
    bare = {"metric": "auc_hi", "max": 0.65, "target": "prod", "attack": "rag_mia"}  # 0.91 > 0.65
    r = evaluate([bare], tables)
    (c,) = r["cells"]
    assert c["status"] == NO_EVIDENCE and r["verdict"] == "undecided" and r["exit_code"] == 3
    assert "no evidence at this n: below the default min_n 29" in c["message"] and c["min_n"] == 29
    assert r["limits"][0]["min_n_source"] == "default" and "min_detectable_auc(29, 29)" in r["limits"][0]["min_n_rule"]
    # a limit the n can decide (0.75: n 11) is decided; an explicit min_n wins
    assert [c["status"] for c in evaluate([dict(bare, max=0.75)], tables)["cells"]] == [BREACH]
    assert [c["status"] for c in evaluate([dict(bare, min_n=1)], tables)["cells"]] == [BREACH]
    # a limit at chance: no n tells 0.5 from chance
    r = evaluate([dict(bare, max=0.5)], tables)
    assert r["cells"][0]["status"] == NO_EVIDENCE and "no n tells an AUC at 0.5 from chance" in r["cells"][0]["message"]
    assert r["limits"][0]["min_n"] is None


def test_a_row_marked_not_informative_is_no_evidence(tables):
    df = pd.read_csv(tables / "summary.csv")
    df["informative"] = [False, True, True, "", True, True]
    df["uninformative_reason"] = ["every score tied", "", "", "", "", ""]
    df.to_csv(tables / "summary.csv", index=False)
    r = evaluate([lim("auc_hi", max=0.95, target="prod")], tables)
    s = statuses(r)
    assert s == {("prod", "rag_mia"): NO_EVIDENCE, ("prod", "s2mia"): PASS, ("prod", "extraction"): PASS}
    assert "the row is not informative (every score tied)" in r["cells"][0]["message"]


def test_undecided_files_and_lines(tables, tmp_path):
    # fail_on_no_evidence false, but nothing decided: the cells fail the gate (JUnit error, SARIF fail)
    r = evaluate([lim("auc", max=0.99, target="prod", attack="dcmi")], tables, fail_on_no_evidence=False)
    paths = write_outputs(r, tmp_path / "gate")
    xml = Path(paths["junit.xml"]).read_bytes()
    assert_valid_junit(xml)
    assert etree.fromstring(xml).find("testsuite/testcase/error").get("type") == "no-evidence"
    doc = json.loads(Path(paths["gate.sarif"]).read_text())
    assert_valid_sarif(doc)
    assert [(x["kind"], x["level"]) for x in doc["runs"][0]["results"]] == [("fail", "error")]
    assert doc["runs"][0]["invocations"][0]["exitCode"] == 3
    lines = summary_lines(r)
    assert lines[0].startswith("ragmi gate: NO EVIDENCE ")
    assert lines[-1].startswith("ragmi gate: UNDECIDED: 0 breached, 1 without evidence, 0 passed")
    assert read_result(paths["gate.json"])["exit_code"] == 3


def test_command_exits_3_when_undecided(results, tmp_path, capsys):
    none = config_with(tmp_path, [{"metric": "auc", "max": 0.99, "target": "qwen-rag", "attack": "s2mia"}])
    cfg = yaml.safe_load(Path(none).read_text())
    cfg["gate"]["limits"][0]["variant"] = "nothing"  # no row matches
    Path(none).write_text(yaml.safe_dump(cfg))
    assert ragmi_main(["gate", "--results", str(results), "--configfile", none]) == 3
    assert "UNDECIDED: 0 breached, 1 without evidence, 0 passed" in capsys.readouterr().err
    assert ragmi_main(["gate", "--results", str(results)]) == 3  # from the gate.json just written
    cfg["gate"].update(fail_on_no_evidence=False, fail_on_undecided=False)
    Path(none).write_text(yaml.safe_dump(cfg))
    assert ragmi_main(["gate", "--results", str(results), "--configfile", none]) == 0
    assert "UNDECIDED" in capsys.readouterr().err


# the command: config layering, readable console lines


def test_console_lines_are_rounded_and_gate_json_keeps_full_precision(results, tmp_path, capsys):
    summary = results / "tables/summary.csv"
    summary.write_text(summary.read_text().replace(",0.62,0.91,", ",0.6212345,0.91346789,", 1))
    breach = config_with(
        tmp_path, [{"id": "leak", "metric": "auc_hi", "max": 0.8, "target": "qwen-rag", "attack": "rag_mia"}]
    )
    assert ragmi_main(["gate", "--results", str(results), "--configfile", breach]) == 1
    err = capsys.readouterr().err
    assert "AUC 95% CI upper end 0.913 > max 0.8 (n = 20+20); AUC 0.77 [0.621, 0.913]" in err
    (cell,) = [c for c in json.loads((results / "gate/gate.json").read_text())["cells"] if c["limit"] == "leak"]
    assert cell["value"] == 0.91346789 and "0.9135" in cell["message"]  # the JSON as evaluated


def test_readable_rounds_measured_numbers_only():
    r = readable
    assert r("AUC 0.91346 [0.05123, 12.3456] of 123.4567") == "AUC 0.913 [0.0512, 12.3] of 123"
    assert r("AUC 0.913 [0.05, 0.1] n = 20+20, 5% FPR, 12/100 (12.0%)") == (
        "AUC 0.913 [0.05, 0.1] n = 20+20, 5% FPR, 12/100 (12.0%)"
    )  # 3 decimal places or fewer, integers: as they are
    assert r("1.2345e-05") == "1.23e-05"
    assert r("target qwen2.5-1.5b, variant v1.23456/x, ragmi 1.2.3456") == (
        "target qwen2.5-1.5b, variant v1.23456/x, ragmi 1.2.3456"
    )  # names and versions
    assert r("AUC 0.81234 within max 0.8125") == "AUC 0.812 within max 0.8125"  # the limit as configured
    # a number compared with the limit keeps the digits that show the comparison
    assert r("AUC 0.80004 > max 0.8") == "AUC 0.80004 > max 0.8"
    assert r("AUC 0.79996 < min 0.8") == "AUC 0.79996 < min 0.8"
    assert r("(1 - auc_lo) 0.800123 > max 0.8; AUC 0.7654") == "(1 - auc_lo) 0.8001 > max 0.8; AUC 0.765"


def _yaml(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_gate_config_layers_a_partial_file_on_the_default(tmp_path):
    default = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    lim = [{"metric": "auc_hi", "max": 0.8}]
    only_gate = _yaml(tmp_path, "gate.yaml", {"gate": {"limits": lim}})
    assert gate_config([only_gate], None) == {**default, "gate": {"limits": lim}}
    assert gate_config(None, only_gate) == {**default, "gate": {"limits": lim}}
    # a file that defines a run stands alone, as snakemake --configfile uses it (rules/common.smk)
    run = {k: v for k, v in default.items() if k not in ("utility", "audit")}
    run_file = _yaml(tmp_path, "run.yaml", run)
    assert gate_config([run_file], None) == run
    # --limits on top of --configfile: its gate section replaces the limits, other gate keys merged
    with_gate = _yaml(tmp_path, "run_gate.yaml", {**run, "gate": {"limits": [], "fail_on_undecided": False}})
    assert gate_config([with_gate], only_gate) == {**run, "gate": {"limits": lim, "fail_on_undecided": False}}
    validate_config(gate_config(None, only_gate))


def test_gate_limits_alone_in_process(results, tmp_path, capsys):
    lim = _yaml(
        tmp_path,
        "l.yaml",
        {"gate": {"limits": [{"metric": "auc_hi", "max": 0.95, "target": "qwen-rag", "attack": "rag_mia"}]}},
    )
    assert ragmi_main(["gate", "--results", str(results), "--limits", lim]) == 0
    assert "PASS: 0 breached, 0 without evidence, 1 passed" in capsys.readouterr().err
    bad = _yaml(tmp_path, "b.yaml", {"limits": []})
    assert ragmi_main(["gate", "--results", str(results), "--limits", bad]) == 2
    assert "must hold a gate: section only" in capsys.readouterr().err
    assert ragmi_main(["gate", "--help"]) == 0
    assert "--limits FILE" in capsys.readouterr().out
