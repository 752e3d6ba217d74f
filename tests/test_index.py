from dataclasses import asdict

import pytest

from ragmi.config import load_schema
from ragmi.datasets.synthetic import generate
from ragmi.errors import ConfigError
from ragmi.target.index import Retriever, RetrieverSpec, build_index


@pytest.fixture(scope="module")
def docs():
    return generate(n_docs=60, seed=5)[["doc_id", "text"]]


@pytest.mark.parametrize(
    "cfg",
    [
        {"kind": "dense", "index": "flat_ip"},
        {"kind": "dense", "index": "flat_l2"},
        {"kind": "dense", "index": "hnsw"},
        {"kind": "bm25"},
    ],
)
def test_a_document_retrieves_itself_first(tmp_path, docs, cfg):
    spec = RetrieverSpec.from_config("r", cfg)
    meta = build_index(docs, spec, tmp_path / "idx", log=lambda m: None)
    assert meta["n"] == 60
    r = Retriever(tmp_path / "idx", spec)
    ids, scores = r.search(docs["text"].tolist()[:10], k=4)
    assert [row[0] for row in ids] == docs["doc_id"].tolist()[:10]
    assert all(len(row) == 4 for row in ids)
    assert all(s[0] >= s[-1] for s in scores)  # best first, whatever the metric


def test_unknown_index_kind_names_the_key():
    with pytest.raises(ConfigError, match="retrievers.x.index"):
        RetrieverSpec.from_config("x", {"kind": "dense", "index": "ivf"})
    with pytest.raises(ConfigError, match="retrievers.x.kind"):
        RetrieverSpec.from_config("x", {"kind": "sparse"})
    with pytest.raises(ConfigError, match="retrievers.x.*hnsw_M"):
        RetrieverSpec.from_config("x", {"hnsw_M": 8})


def test_spec_defaults_are_the_schemas():
    schema = load_schema()["properties"]["retrievers"]["additionalProperties"]["properties"]
    spec = RetrieverSpec.from_config("x", {})
    assert asdict(spec) == {k: v["default"] for k, v in schema.items()}
    assert RetrieverSpec.from_config("y", {"kind": "bm25", "max_seq_length": 64}).max_seq_length == 64


def test_rebuilding_replaces_the_index_and_leaves_no_temp(tmp_path, docs):
    spec = RetrieverSpec.from_config("r", {"kind": "bm25"})
    build_index(docs, spec, tmp_path / "idx", log=lambda m: None)
    build_index(docs.iloc[:20], spec, tmp_path / "idx", log=lambda m: None)
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    assert len(Retriever(tmp_path / "idx", spec).ids) == 20
