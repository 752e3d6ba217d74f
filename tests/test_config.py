import copy

import pytest
import yaml

from ragmi.config import load_config, validate_config
from ragmi.errors import ConfigError

DEFAULT = yaml.safe_load(open("config/config.yaml"))


def test_default_config_validates_and_fills_defaults():
    cfg = load_config("config/config.yaml")
    assert cfg["targets"]["qwen-rag"]["k"] == 2
    assert cfg["retrievers"]["minilm-cosine"]["hnsw_m"] == 32  # filled default
    assert cfg["generation"]["cache_dir"] == "results/cache/responses"
    assert cfg["attacker"]["generator"] == "qwen"  # defaults to the first target's generator
    assert cfg["metrics"]["fprs"] == [0.0, 0.005, 0.01, 0.05]


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("targets", "qwen-rag", "k"), -1, "targets.qwen-rag.k"),
        (("retrievers", "minilm-cosine", "index"), "ivf", "retrievers.minilm-cosine.index"),
        (("datasets", "synthetic", "source"), "hub", "datasets.synthetic.source"),
        (("split", "member_fraction"), 1.5, "split.member_fraction"),
        (("attacks", "rag_mia", "templates"), [7], "attacks.rag_mia.templates.0"),
        (("generation", "shard_size"), 0, "generation.shard_size"),
    ],
)
def test_bad_values_name_the_key(path, value, fragment):
    cfg = copy.deepcopy(DEFAULT)
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    assert fragment in str(e.value)


def test_unknown_key_is_rejected():
    cfg = copy.deepcopy(DEFAULT)
    cfg["targets"]["qwen-rag"]["topk"] = 3
    with pytest.raises(ConfigError, match="topk"):
        validate_config(cfg)


def test_dangling_references():
    cfg = copy.deepcopy(DEFAULT)
    cfg["targets"]["qwen-rag"]["retriever"] = "nope"
    with pytest.raises(ConfigError, match="targets.qwen-rag.retriever: 'nope' is not defined"):
        validate_config(cfg)
    cfg = copy.deepcopy(DEFAULT)
    cfg["generators"]["ext"] = {"backend": "openai", "model": "m"}
    with pytest.raises(ConfigError, match="generators.ext.base_url: required"):
        validate_config(cfg)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "none.yaml")


def test_reference_set_smaller_than_the_cv_folds_is_refused_before_any_job():
    cfg = copy.deepcopy(DEFAULT)
    cfg["split"]["n_reference"] = 3
    cfg["attacks"]["dcmi"]["cv_folds"] = 2  # DCMI's choices are in-fold too
    cfg["attacks"]["rag_mia"]["cv_folds"] = 4
    with pytest.raises(ConfigError, match=r"split.n_reference: 3 .* attacks.rag_mia.cv_folds is 4"):
        validate_config(cfg)
    cfg["attacks"]["rag_mia"]["cv_folds"] = 3
    cfg["attacks"]["s2mia"]["cv_folds"] = 5
    with pytest.raises(ConfigError, match=r"attacks.s2mia.cv_folds is 5"):
        validate_config(cfg)
    for t in cfg["targets"].values():  # no target runs S2MIA: nothing to refuse
        t["attacks"] = [a for a in t.get("attacks", list(cfg["attacks"])) if a != "s2mia"]
    validate_config(cfg)


def test_min_reference_is_the_largest_cv_folds_of_the_attacks_run_on_the_dataset():
    from ragmi.plan import min_reference

    cfg = copy.deepcopy(DEFAULT)
    cfg["attacks"]["rag_mia"]["cv_folds"] = 4
    cfg["attacks"]["s2mia"]["cv_folds"] = 3
    cfg["attacks"]["dcmi"]["cv_folds"] = 2  # DCMI's choices are in-fold too
    cfg["split"]["n_reference"] = 4
    validate_config(cfg)
    assert min_reference(cfg, "synthetic") == (4, "attacks.rag_mia.cv_folds")
    for t in cfg["targets"].values():  # no target runs RAG-MIA: S2MIA's folds are the floor
        t["attacks"] = [a for a in t.get("attacks", list(cfg["attacks"])) if a != "rag_mia"]
    cfg.pop("controls", None)
    assert min_reference(cfg, "synthetic") == (3, "attacks.s2mia.cv_folds")
    for t in cfg["targets"].values():
        t["attacks"] = ["mba"]
    assert min_reference(cfg, "synthetic") == (0, "")


def test_the_schema_parses_to_the_same_mapping_with_libyaml():
    from pathlib import Path

    from ragmi.schema import SCHEMA_PATH, load_schema

    assert load_schema() == yaml.safe_load(Path(SCHEMA_PATH).read_text())
