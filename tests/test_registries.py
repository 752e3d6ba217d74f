"""Every registry and config/schema.yaml agree, key for key: adding a plug-in is one module, one
registry line and one schema entry, and neither side can drift."""

from ragmi.attacks import REGISTRY as ATTACKS
from ragmi.attacks.menta import SCORERS
from ragmi.attacks.perturb import PERTURBERS
from ragmi.datasets import REGISTRY as DATASETS
from ragmi.defenses import REGISTRY as DEFENSES
from ragmi.rag.templates import TEMPLATES
from ragmi.report.registry import TABLES
from ragmi.schema import load_schema
from ragmi.targets import REGISTRY as TARGET_KINDS

SCHEMA = load_schema()
P = SCHEMA["properties"]


def test_attacks_registry_matches_the_schema():
    assert set(ATTACKS) == set(P["attacks"]["properties"])


def test_dataset_sources_match_the_schema():
    assert list(DATASETS) == P["datasets"]["additionalProperties"]["properties"]["source"]["enum"]


def test_templates_match_the_schema():
    assert set(TEMPLATES) == set(P["targets"]["additionalProperties"]["properties"]["template"]["enum"])


def test_target_kinds_match_the_schema():
    """Each registered target kind is in the schema's enum, and each kind's block of own keys is a
    property of a target (and nothing else is a block)."""
    from ragmi.targets import kind_class

    target = P["targets"]["additionalProperties"]["properties"]
    assert set(TARGET_KINDS) == set(target["kind"]["enum"])
    blocks = {kind_class(k).block for k in TARGET_KINDS} - {None}
    assert blocks == {"remote", "python"} and blocks <= set(target)


def test_defenses_registry_matches_the_schema():
    assert set(DEFENSES) == set(SCHEMA["$defs"]["defenses"])


def test_perturbers_and_scorers_match_the_schema():
    attacks = P["attacks"]["properties"]
    assert set(PERTURBERS) == set(attacks["dcmi"]["properties"]["perturber"]["enum"])
    assert set(SCORERS) == set(attacks["menta"]["properties"]["scorer"]["enum"])


def test_every_table_has_a_title_and_notes():
    for name, t in TABLES.items():
        assert t.name == name and t.title and t.notes


def test_the_readme_dataset_example_works(tmp_path, monkeypatch):
    """The worked example of adding a dataset in docs/architecture.md: its loader code, registered, loads a
    file through the normal corpus path."""
    import json
    import re
    import sys
    import types
    from pathlib import Path

    from ragmi import datasets

    readme = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    code = re.search(r"```python\n# src/ragmi/datasets/tickets.py\n(.*?)```", readme, re.S).group(1)
    mod = types.ModuleType("ragmi.datasets.tickets")
    mod.__package__ = "ragmi.datasets"
    monkeypatch.setitem(sys.modules, "ragmi.datasets.tickets", mod)
    exec(compile(code, "README tickets.py", "exec"), mod.__dict__)
    monkeypatch.setitem(datasets.REGISTRY, "tickets", mod.load)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"ticket": i, "body": f"printer {i} is broken"}) + "\n" for i in range(3)))
    df, stats = datasets.load_corpus("support", {"source": "tickets", "path": str(path)}, 0)
    assert df["doc_id"].tolist() == ["tk-0", "tk-1", "tk-2"] and stats["n_docs"] == 3


def test_attack_code_imports_neither_the_audit_nor_the_target():
    """An attack sees only its queries and the responses: no module of ragmi.attacks imports the audit,
    the defenses or the target's retriever/index, directly or through what it imports."""
    import subprocess
    import sys

    code = (
        "import importlib, pkgutil, sys, ragmi.attacks as A\n"
        "for m in pkgutil.iter_modules(A.__path__): importlib.import_module(f'ragmi.attacks.{m.name}')\n"
        "bad = sorted(n for n in sys.modules if n.startswith(('ragmi.audit', 'ragmi.defenses', 'ragmi.rag')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
