"""Every registry and config/schema.yaml agree, key for key: adding a plug-in is one module, one
registry line and one schema entry, and neither side can drift."""

from ragmi.attacks import REGISTRY as ATTACKS
from ragmi.attacks.menta import SCORERS
from ragmi.attacks.perturb import PERTURBERS
from ragmi.config import load_schema
from ragmi.datasets import REGISTRY as DATASETS
from ragmi.defenses import REGISTRY as DEFENSES
from ragmi.report.registry import TABLES
from ragmi.target.templates import TEMPLATES

SCHEMA = load_schema()
P = SCHEMA["properties"]


def test_attacks_registry_matches_the_schema():
    assert set(ATTACKS) == set(P["attacks"]["properties"])


def test_dataset_sources_match_the_schema():
    assert list(DATASETS) == P["datasets"]["additionalProperties"]["properties"]["source"]["enum"]


def test_templates_match_the_schema():
    assert set(TEMPLATES) == set(P["targets"]["additionalProperties"]["properties"]["template"]["enum"])


def test_defenses_registry_matches_the_schema():
    assert set(DEFENSES) == set(SCHEMA["$defs"]["defenses"])


def test_perturbers_and_scorers_match_the_schema():
    attacks = P["attacks"]["properties"]
    assert set(PERTURBERS) == set(attacks["dcmi"]["properties"]["perturber"]["enum"])
    assert set(SCORERS) == set(attacks["menta"]["properties"]["scorer"]["enum"])


def test_every_table_has_a_title_and_notes():
    for name, t in TABLES.items():
        assert t.name == name and t.title and t.notes
