"""Attack parameters: defaults come from config/schema.yaml only, bad values are ConfigErrors naming
the key, ``seed`` is separate; attack modules never import the target."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ragmi.attacks import REGISTRY, attack_class, get_attack
from ragmi.attacks.dcmi import DCMI
from ragmi.errors import ConfigError
from ragmi.schema import load_schema

ATTACKS_DIR = Path(__file__).resolve().parents[1] / "src" / "ragmi" / "attacks"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_schema_default_is_filled_in(name):
    schema = load_schema()["properties"]["attacks"]["properties"][name]["properties"]
    attack = get_attack(name, {})
    assert attack.name == name and attack.seed == 0
    for key, spec in schema.items():
        if name == "ia" and key == "n_questions":
            continue  # null resolves to the variant's count (test_ia)
        assert attack.params[key] == spec["default"], key
    assert set(attack.params) == set(schema)


def test_dcmi_defaults_and_given_values():
    assert DCMI({}).params["thetas"] == [0.04, 0.06, 0.08, 0.10, 0.12]
    assert DCMI({}).params["gammas"] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert DCMI({}).params["theta_adv2"] == 0.06 and DCMI({}).params["max_chars"] == 1000
    given = DCMI({"thetas": [0.2], "max_tokens": 9})
    assert given.params["thetas"] == [0.2] and given.params["max_tokens"] == 9
    assert given.params["top_logprobs"] == 20  # the rest still defaulted


def test_seed_is_an_argument_not_a_parameter():
    attack = DCMI({"max_chars": 50}, seed=41)
    assert attack.seed == 41 and "seed" not in attack.params and attack.params["max_chars"] == 50
    with pytest.raises(ConfigError, match="seed"):  # slipped into the parameters, it is an unknown key
        DCMI({"seed": 41})
    params = {"max_chars": 50}
    DCMI(params)
    assert params == {"max_chars": 50}  # the caller's dict is not changed


def test_validated_parameters_are_trusted():
    """The workflow passes a validated config's entry: used as given, not validated (or filled) again."""
    full = DCMI({"max_chars": 50}).params  # validated: every default filled
    assert full["max_chars"] == 50 and full["max_tokens"] is not None
    assert DCMI(full, validated=True).params == full
    out_of_range = {**full, "max_chars": -1}  # a value the schema rejects ...
    with pytest.raises(ConfigError, match="max_chars"):
        DCMI(out_of_range)
    assert DCMI(out_of_range, validated=True).params["max_chars"] == -1  # ... taken as given: not checked twice


@pytest.mark.parametrize(
    "name, params, key",
    [
        ("dcmi", {"max_chars": 0}, "attacks.dcmi.max_chars"),
        ("dcmi", {"thetas": [0.05, 0.052]}, "attacks.dcmi.thetas"),
        ("dcmi", {"theta": 0.1}, "attacks.dcmi"),  # unknown key
        ("rag_mia", {"templates": [5]}, "attacks.rag_mia.templates.0"),
        ("mba", {"max_proxy_tokens": 4}, "attacks.mba.max_proxy_tokens"),
        ("s2mia", {"cv_folds": 1}, "attacks.s2mia.cv_folds"),
        ("menta", {"budgets": [0]}, "attacks.menta.budgets.0"),
        ("ia", {"lambda_idk": -1}, "attacks.ia.lambda_idk"),
    ],
)
def test_invalid_values_name_the_key(name, params, key):
    with pytest.raises(ConfigError) as err:
        get_attack(name, params)
    assert str(err.value).startswith(f"config key {key}:")


def test_unknown_attack():
    with pytest.raises(ConfigError, match="unknown attack 'nope'"):
        attack_class("nope")


def imported_modules(path: Path) -> set[str]:
    """Absolute names of everything a module of ragmi.attacks imports (``from .. import x`` -> ragmi.x)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(["ragmi", "attacks"][: 3 - node.level] if node.level else [])
            mod = ".".join(p for p in (base, node.module or "") if p)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_attack_modules_never_import_the_target_or_its_defenses():
    imports = {p.name: imported_modules(p) for p in sorted(ATTACKS_DIR.glob("*.py"))}
    assert "ragmi.embedder.Embedder" in imports["models.py"]  # the scan resolves relative imports
    assert "ragmi.attacks.answers.parse_yes_no" in imports["dcmi.py"]
    bad = {
        f: sorted(
            m
            for m in ms
            if m.split(".")[:2] in (["ragmi", "rag"], ["ragmi", "defenses"], ["ragmi", "audit"], ["ragmi", "stores"])
        )
        for f, ms in imports.items()
    }
    assert {f: m for f, m in bad.items() if m} == {}
