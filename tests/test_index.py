import pandas as pd
import pytest

from ragmi.datasets.synthetic import generate
from ragmi.target.index import Retriever, RetrieverSpec, build_index


@pytest.fixture(scope="module")
def docs():
    return generate(n_docs=60, seed=5)[["doc_id", "text"]]


@pytest.mark.parametrize("cfg", [
    {"kind": "dense", "index": "flat_ip"},
    {"kind": "dense", "index": "flat_l2"},
    {"kind": "dense", "index": "hnsw"},
    {"kind": "bm25"},
])
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
    from ragmi.errors import ConfigError

    with pytest.raises(ConfigError, match="retrievers.x.index"):
        RetrieverSpec.from_config("x", {"kind": "dense", "index": "ivf"})
