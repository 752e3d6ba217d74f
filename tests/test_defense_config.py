"""Bad defense configurations: one ConfigError naming the key (the workflow prints it as one
`ragmi: …` line and writes nothing)."""

import copy

import pytest
import yaml

from ragmi.config import validate_config
from ragmi.errors import ConfigError

BASE = yaml.safe_load(open("config/config.yaml"))


def cfg_with(defenses, target_defenses, retriever=None):
    c = copy.deepcopy(BASE)
    c["defenses"] = defenses
    c["targets"] = {
        "plain": dict(BASE["targets"]["qwen-rag"]),
        "d": {**BASE["targets"]["qwen-rag"], "defenses": target_defenses},
    }
    if retriever:
        c["retrievers"] = {"minilm-cosine": retriever}
    c["audit"].pop("canary_targets")
    c.pop("campaigns")  # like the canary targets, they name the default's targets
    return c


@pytest.mark.parametrize(
    "defenses, used, retriever, fragment",
    [
        ({"x": {"kind": "nope"}}, ["x"], None, "unknown defense kind 'nope'"),
        ({}, ["missing"], None, "targets.d.defenses.0: 'missing' is not defined under 'defenses'"),
        ({"x": {"kind": "pad", "hooks": ["retrieval"]}}, ["x"], None, "defenses.x.hooks: pad acts on output only"),
        ({"x": {"kind": "dp_retrieval", "epsilon": 0}}, ["x"], None, "defenses.x.epsilon"),
        ({"x": {"kind": "exp_mechanism", "epsilon": -1}}, ["x"], None, "defenses.x.epsilon"),
        ({"x": {"kind": "mirabel", "rho": 1.5}}, ["x"], None, "defenses.x.rho"),
        ({"x": {"kind": "mirabel"}}, ["x"], {"kind": "bm25"}, "needs the scores of the whole database"),
        (
            {"x": {"kind": "mirabel"}},
            ["x"],
            {"kind": "dense", "index": "hnsw"},
            "needs the scores of the whole database",
        ),
        ({"x": {"kind": "lprag", "bogus": 1}}, ["x"], None, "defenses.x"),
    ],
)
def test_bad_defense_config(defenses, used, retriever, fragment):
    with pytest.raises(ConfigError, match=None) as e:
        validate_config(cfg_with(defenses, used, retriever))
    assert fragment in str(e.value)


def test_canary_colliding_with_a_defense_vocabulary():
    from ragmi.defenses import REGISTRY  # noqa: F401  (the schema lists lprag's parameters)

    c = cfg_with({"x": {"kind": "lprag", "domains": ["acmetest-internal.canary"]}}, ["x"])
    with pytest.raises(ConfigError, match="canary"):
        validate_config(c)


def test_hooks_subset_and_defaults():
    c = validate_config(cfg_with({"x": {"kind": "lprag", "hooks": ["content"]}}, ["x"]))
    assert c["defenses"]["x"]["hooks"] == ["content"]
    assert c["defender"]["generator"] == "qwen"
    assert c["targets"]["plain"]["defenses"] == [] and c["targets"]["plain"]["attacks"] is None


def test_a_validated_defense_entry_builds_the_same_defense_unchecked():
    """Later steps build defenses from the validated entries without checking them again
    (``build_defense(..., validated=True)``): the same defense, hooks and record as the checked build."""
    from pathlib import Path

    import yaml

    from ragmi.config import validate_config
    from ragmi.defenses import build_defense

    root = Path(__file__).resolve().parents[1]
    raw = yaml.safe_load((root / "config" / "paper" / "mind_the_hook.yaml").read_text())
    raw["defenses"]["lprag-content"] = {"kind": "lprag", "hooks": ["content"]}
    cfg = validate_config(raw)
    assert len(cfg["defenses"]) >= 5
    for name, entry in cfg["defenses"].items():
        checked = build_defense(name, raw["defenses"][name])
        fast = build_defense(name, entry, validated=True)
        assert type(fast) is type(checked) and fast.hooks == checked.hooks
        assert fast.record() == checked.record(), name
