"""Dataset layer: loaders, normalisation, synthetic generator, error messages (offline, fast)."""

from __future__ import annotations

import inspect
import json
import random
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ragmi.datasets import REGISTRY, SOURCES, hf, load_corpus, normalize, synthetic
from ragmi.errors import ConfigError, DataError

DATA = Path(__file__).parent / "data" / "datasets"
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def _stats(n_raw, empty, dup, n):
    return {"n_raw": n_raw, "n_empty_dropped": empty, "n_duplicates_dropped": dup, "n_docs": n}


def _assert_frame(df):
    assert list(df.columns) == ["doc_id", "text", "title", "human_turn"]
    for col in df.columns:
        assert all(isinstance(v, str) for v in df[col]), col
    assert df["doc_id"].is_unique
    assert list(df.index) == list(range(len(df)))


# --------------------------------------------------------------------------- normalize


def test_normalize_strips_drops_empty_and_casefolded_duplicates():
    raw = pd.DataFrame(
        {
            "doc_id": [1, 2, 3, 4, 5],
            "text": ["  Hello   World ", "", "hello world", None, "Other text"],
            "title": ["t1", None, "t3", "t4", " t5 "],
            "extra": ["x"] * 5,
        }
    )
    df, stats = normalize(raw, "toy")
    _assert_frame(df)
    assert df.to_dict("list") == {
        "doc_id": ["1", "5"],
        "text": ["Hello   World", "Other text"],
        "title": ["t1", "t5"],
        "human_turn": ["", ""],
    }
    assert stats == _stats(5, 2, 1, 2)


def test_normalize_adds_missing_title():
    df, _ = normalize(pd.DataFrame({"doc_id": ["a"], "text": ["x"]}))
    assert df["title"].tolist() == [""]
    assert df["human_turn"].tolist() == [""]  # no dialogue: no human turn


def test_normalize_keeps_the_human_turn_of_the_kept_copy():
    raw = pd.DataFrame(
        {
            "doc_id": ["a", "b", "c"],
            "text": ["Patient: hi\nDoctor: ho", "patient: HI\ndoctor: ho", "Patient: other\nDoctor: x"],
            "human_turn": [" hi ", "HI", None],
        }
    )
    df, stats = normalize(raw, "c")
    assert df.to_dict("list")["human_turn"] == ["hi", ""]
    assert stats["n_duplicates_dropped"] == 1


def test_normalize_colliding_ids_raise_naming_dataset():
    raw = pd.DataFrame({"doc_id": ["a", "a"], "text": ["one", "two"], "title": ["", ""]})
    with pytest.raises(DataError, match=r"datasets\.mycorpus: doc_id values are not unique.*e\.g\. a"):
        normalize(raw, "mycorpus")


def test_normalize_same_id_same_text_is_a_duplicate_not_a_collision():
    raw = pd.DataFrame({"doc_id": ["a", "a"], "text": ["One", "one "], "title": ["", ""]})
    df, stats = normalize(raw, "c")
    assert df["doc_id"].tolist() == ["a"] and stats["n_duplicates_dropped"] == 1


# --------------------------------------------------------------------------- Hub loaders (local copies)


def test_healthcaremagic_fixture():
    df, stats = load_corpus("hcm", {"source": "healthcaremagic", "path": str(DATA / "healthcaremagic.json")}, 0)
    _assert_frame(df)
    assert df["doc_id"].tolist() == ["hcm-000000", "hcm-000001", "hcm-000004"]
    assert df["text"].tolist() == [
        "Patient: Hi doctor, I have had a dry cough for two weeks.\n"
        "Doctor: Hi, thanks for the query. Get a chest X-ray and take steam inhalation.",
        "Patient: My knee hurts when I climb stairs.\n"
        "Doctor: Hello, this may be early osteoarthritis. An X-ray will help.",
        "Patient: I get headaches every morning.\nDoctor: Hello, please check your blood pressure.",
    ]
    assert df["title"].tolist() == ["", "", ""]
    # RAG-MIA §4: "the human part of the dialogue is used as the sample" -- kept apart, unlabelled
    assert df["human_turn"].tolist() == [
        "Hi doctor, I have had a dry cough for two weeks.",
        "My knee hurts when I climb stairs.",
        "I get headaches every morning.",
    ]
    assert stats == _stats(5, 1, 1, 3)


def test_healthcaremagic_max_docs_takes_first_rows():
    spec = {"source": "healthcaremagic", "path": str(DATA / "healthcaremagic.json"), "max_docs": 2}
    df, stats = load_corpus("hcm", spec, 0)
    assert df["doc_id"].tolist() == ["hcm-000000", "hcm-000001"]
    assert stats == _stats(2, 0, 0, 2)


@pytest.mark.parametrize("bad", [0, -3, "10", 2.5, True])
def test_max_docs_must_be_positive_int(bad):
    spec = {"source": "healthcaremagic", "path": str(DATA / "healthcaremagic.json"), "max_docs": bad}
    with pytest.raises(ConfigError, match=r"datasets\.hcm\.max_docs"):
        load_corpus("hcm", spec, 0)


def test_beir_trec_covid_jsonl_fixture():
    df, stats = load_corpus("tc", {"source": "trec-covid", "path": str(DATA / "trec-covid.jsonl")}, 0)
    _assert_frame(df)
    assert df.to_dict("list") == {
        "doc_id": ["ug7v899j", "02tnwd4m", "9785vg6d"],
        "text": [
            "Fever and cough were the most common symptoms.",
            "Inhaled nitric oxide improved oxygenation.",
            "Masks reduce transmission in households.",
        ],
        "title": ["Clinical features of COVID-19", "Nitric oxide in ARDS", ""],
        "human_turn": ["", "", ""],
    }
    assert stats == _stats(5, 1, 1, 3)


def test_beir_nfcorpus_csv_keeps_string_ids_and_empty_title():
    df, stats = load_corpus("nf", {"source": "nfcorpus", "path": str(DATA / "nfcorpus.csv")}, 0)
    _assert_frame(df)
    assert df["doc_id"].tolist() == ["MED-10", "MED-14", "0042"]
    assert df["title"].tolist() == ["Statin use and breast cancer survival", "", "Numeric-looking id"]
    assert df["text"].iloc[0].startswith("Recent studies suggest that statins, used")
    assert stats == _stats(3, 0, 0, 3)


def test_beir_colliding_ids_raise(tmp_path):
    p = tmp_path / "scidocs.jsonl"
    p.write_text("\n".join(json.dumps({"_id": "x1", "title": "", "text": t}) for t in ("first paper", "second paper")))
    with pytest.raises(DataError, match=r"datasets\.sd: doc_id values are not unique"):
        load_corpus("sd", {"source": "scidocs", "path": str(p)}, 0)


def test_enron_keeps_first_1000_characters():
    src = [json.loads(line) for line in (DATA / "enron.jsonl").read_text().splitlines()]
    assert len(src[0]["text"]) > 1000  # the fixture really exercises the cut
    df, stats = load_corpus("en", {"source": "enron", "path": str(DATA / "enron.jsonl")}, 0)
    _assert_frame(df)
    assert df["doc_id"].tolist() == ["enron-000000", "enron-000001"]
    assert df["text"].tolist() == [
        src[0]["text"][:1000].strip(),
        "Message-ID: <2.JavaMail.evans@thyme>\nSubject: lunch\n\nAre we still on for lunch on Friday?",
    ]
    assert len(df["text"].iloc[0]) == 1000
    assert stats == _stats(4, 1, 1, 2)


def test_enron_max_chars_option():
    df, stats = load_corpus("en", {"source": "enron", "path": str(DATA / "enron.jsonl"), "max_chars": 10}, 0)
    assert df.to_dict("list") == {"doc_id": ["enron-000000"], "text": ["Message-ID"], "title": [""], "human_turn": [""]}
    assert stats == _stats(4, 1, 2, 1)  # cut to 10 characters, the three e-mails are duplicates


def test_pubmedqa_jsonl_fixture():
    df, stats = load_corpus("pq", {"source": "pubmedqa", "path": str(DATA / "pubmedqa.jsonl")}, 0)
    _assert_frame(df)
    assert df.to_dict("list") == {
        "doc_id": ["21645374", "17208539"],
        "text": [
            "Programmed cell death is common. Lace plant leaves form holes.",
            "Statins were taken by 300 patients.",
        ],
        "title": [
            "Do mitochondria play a role in remodelling lace plant leaves?",
            "Is statin use associated with fewer fractures?",
        ],
        "human_turn": ["", ""],
    }
    assert stats == _stats(4, 1, 1, 2)


def test_pubmedqa_parquet_struct_column(tmp_path):
    rows = [json.loads(line) for line in (DATA / "pubmedqa.jsonl").read_text().splitlines()]
    p = tmp_path / "pqa_labeled.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    df, stats = load_corpus("pq", {"source": "pubmedqa", "path": str(p)}, 0)
    assert df["doc_id"].tolist() == ["21645374", "17208539"]
    assert df["text"].iloc[0] == "Programmed cell death is common. Lace plant leaves form holes."
    assert stats == _stats(4, 1, 1, 2)


def test_pubmedqa_flat_context_is_a_data_error(tmp_path):
    p = tmp_path / "pqa.csv"
    p.write_text("pubid,question,context\n1,q,some flat text\n")
    with pytest.raises(DataError, match=r"datasets\.pq: file .*pqa\.csv row 0 has no list 'context\.contexts'"):
        load_corpus("pq", {"source": "pubmedqa", "path": str(p)}, 0)


# --------------------------------------------------------------------------- Hub access


def _fake_hub(monkeypatch, behaviour):
    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return behaviour()

    monkeypatch.setattr(hf, "_import_load_dataset", lambda: load_dataset)
    return calls


def test_hub_unreachable_is_a_data_error_pointing_at_path(monkeypatch):
    def offline():
        raise ConnectionError("Couldn't reach 'lavita/ChatDoctor-HealthCareMagic-100k' on the Hub")

    _fake_hub(monkeypatch, offline)
    with pytest.raises(DataError) as exc:
        load_corpus("hcm", {"source": "healthcaremagic"}, 0)
    msg = str(exc.value)
    assert msg.startswith(
        "datasets.hcm: the Hugging Face Hub could not be reached for 'lavita/ChatDoctor-HealthCareMagic-100k'"
    )
    assert "datasets.hcm.path" in msg and "columns input, output" in msg
    assert "ConnectionError" in msg and "\n" not in msg


def test_hub_call_uses_defaults_and_spec_overrides(monkeypatch):
    class FakeDataset:
        def to_pandas(self):
            return pd.DataFrame({"_id": ["d1"], "title": ["T"], "text": ["body"]})

    calls = _fake_hub(monkeypatch, FakeDataset)
    df, _ = load_corpus("sd", {"source": "scidocs"}, 0)
    load_corpus("nf", {"source": "nfcorpus", "revision": "abc123", "hf_id": "me/nf", "split": "test"}, 0)
    assert calls[0] == (("BeIR/scidocs", "corpus"), {"split": "corpus", "revision": "main"})
    assert calls[1] == (("me/nf", "corpus"), {"split": "test", "revision": "abc123"})
    assert df.to_dict("list") == {"doc_id": ["d1"], "text": ["body"], "title": ["T"], "human_turn": [""]}


def test_hub_not_contacted_when_path_given(monkeypatch):
    calls = _fake_hub(monkeypatch, lambda: pytest.fail("the Hub must not be used"))
    load_corpus("tc", {"source": "trec-covid", "path": str(DATA / "trec-covid.jsonl")}, 0)
    assert calls == []


# --------------------------------------------------------------------------- local loader


LOCAL = pd.DataFrame(
    {
        "uid": ["u1", "u2", "u3", "u4"],
        "body": ["First note.", "Second note.", "", "FIRST  note."],
        "subject": ["s1", "s2", "s3", "s4"],
    }
)


def _write(df, path):
    if path.suffix == ".parquet":
        df.to_parquet(path)
    elif path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("ext", [".parquet", ".jsonl", ".csv"])
def test_local_with_id_and_title(tmp_path, ext):
    p = _write(LOCAL, tmp_path / f"notes{ext}")
    spec = {"source": "local", "path": str(p), "text_column": "body", "id_column": "uid", "title_column": "subject"}
    df, stats = load_corpus("mine", spec, 0)
    _assert_frame(df)
    assert df.to_dict("list") == {
        "doc_id": ["u1", "u2"],
        "text": ["First note.", "Second note."],
        "title": ["s1", "s2"],
        "human_turn": ["", ""],
    }
    assert stats == _stats(4, 1, 1, 2)


def test_local_default_ids_and_titles(tmp_path):
    p = _write(LOCAL, tmp_path / "notes.jsonl")
    df, _ = load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)
    assert df.to_dict("list") == {
        "doc_id": ["doc-000000", "doc-000001"],
        "text": ["First note.", "Second note."],
        "title": ["", ""],
        "human_turn": ["", ""],
    }


def test_local_csv_cells_are_read_verbatim(tmp_path):
    p = tmp_path / "codes.csv"
    p.write_text("id,body\n007,NA\n010,null\n")
    spec = {"source": "local", "path": str(p), "text_column": "body", "id_column": "id"}
    df, _ = load_corpus("mine", spec, 0)
    assert df.to_dict("list") == {
        "doc_id": ["007", "010"],
        "text": ["NA", "null"],
        "title": ["", ""],
        "human_turn": ["", ""],
    }


def test_local_json_array(tmp_path):
    p = tmp_path / "notes.json"
    p.write_text(json.dumps([{"body": "a"}, {"body": "b"}]))
    df, _ = load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)
    assert df["text"].tolist() == ["a", "b"]


# --------------------------------------------------------------------------- errors


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.parquet"
    with pytest.raises(DataError, match=rf"datasets\.mine: file {re.escape(str(missing))} does not exist"):
        load_corpus("mine", {"source": "local", "path": str(missing), "text_column": "body"}, 0)
    with pytest.raises(DataError, match=r"datasets\.hcm: file .*nope\.parquet does not exist"):
        load_corpus("hcm", {"source": "healthcaremagic", "path": str(missing)}, 0)


def test_unsupported_extension(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("hello")
    with pytest.raises(DataError, match=r"datasets\.mine: file .*notes\.txt has unsupported extension '\.txt'"):
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)


@pytest.mark.parametrize("fname", ["notes.csv", "notes.jsonl", "notes.json", "notes.parquet"])
@pytest.mark.parametrize("content", [b"", b"\n  \n"])
def test_empty_file_says_it_is_empty(tmp_path, fname, content):
    if fname.endswith(".parquet") and content:
        pytest.skip("a parquet file of blanks is not empty, it is unreadable")
    p = tmp_path / fname
    p.write_bytes(content)
    with pytest.raises(DataError) as e:
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "text"}, 0)
    assert str(e.value) == f"datasets.mine: file {p} is empty."


@pytest.mark.parametrize(
    "fname, content, cols",
    [("h.csv", "uid,body\n", " (columns: uid, body)"), ("a.json", "[]", ""), ("a.json", "[ ]\n", "")],
)
def test_file_without_records(tmp_path, fname, content, cols):
    p = tmp_path / fname
    p.write_text(content)
    with pytest.raises(DataError) as e:
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)
    assert str(e.value) == f"datasets.mine: file {p} holds no records{cols}."
    pq = tmp_path / "zero.parquet"
    pd.DataFrame({"body": pd.Series([], dtype=str)}).to_parquet(pq)
    with pytest.raises(DataError, match=r"zero\.parquet holds no records \(columns: body\)"):
        load_corpus("mine", {"source": "local", "path": str(pq), "text_column": "body"}, 0)


def test_path_that_is_a_folder(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    with pytest.raises(DataError) as e:
        load_corpus("mine", {"source": "local", "path": str(folder), "text_column": "body"}, 0)
    assert str(e.value).startswith(f"datasets.mine: {folder} is a folder; name the corpus file itself")
    # a partitioned parquet dataset (a folder named *.parquet) is read as one table
    part = tmp_path / "docs.parquet"
    part.mkdir()
    pd.DataFrame({"body": ["a", "b"]}).to_parquet(part / "part-0.parquet")
    pd.DataFrame({"body": ["c"]}).to_parquet(part / "part-1.parquet")
    df, _ = load_corpus("mine", {"source": "local", "path": str(part), "text_column": "body"}, 0)
    assert sorted(df["text"]) == ["a", "b", "c"]


def test_only_empty_or_duplicate_texts(tmp_path):
    p = tmp_path / "blank.csv"
    p.write_text('body\n" "\nx\nX\n')
    df, _ = load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)
    assert df["text"].tolist() == ["x"]
    p.write_text('body\n" "\n""\n')
    with pytest.raises(DataError) as e:
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)
    assert str(e.value) == (
        "datasets.mine: no documents left after cleaning: all 2 texts are empty or duplicates (2 empty, 0 duplicates)."
    )


def test_unreadable_file(tmp_path):
    p = tmp_path / "broken.jsonl"
    p.write_text('{"body": "ok"}\n{not json\n')
    with pytest.raises(DataError, match=r"datasets\.mine: file .*broken\.jsonl could not be read as jsonl"):
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body"}, 0)


def test_missing_column_local(tmp_path):
    p = _write(LOCAL, tmp_path / "notes.csv")
    with pytest.raises(
        DataError, match=r"datasets\.mine: file .*notes\.csv has no column 'text' \(found: uid, body, subject\)"
    ):
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "text"}, 0)
    with pytest.raises(DataError, match=r"has no column 'id'"):
        load_corpus("mine", {"source": "local", "path": str(p), "text_column": "body", "id_column": "id"}, 0)


def test_missing_column_hub_format(tmp_path):
    p = tmp_path / "hcm.jsonl"
    p.write_text(json.dumps({"instruction": "i", "question": "q", "output": "o"}) + "\n")
    with pytest.raises(
        DataError,
        match=r"datasets\.hcm: file .*hcm\.jsonl has no column 'input' \(found: instruction, question, output\)",
    ):
        load_corpus("hcm", {"source": "healthcaremagic", "path": str(p)}, 0)


@pytest.mark.parametrize("key", ["path", "text_column"])
def test_local_required_keys(tmp_path, key):
    spec = {"source": "local", "path": str(tmp_path / "x.csv"), "text_column": "body"}
    del spec[key]
    with pytest.raises(ConfigError, match=rf"datasets\.mine\.{key} is required"):
        load_corpus("mine", spec, 0)


def test_unknown_source_lists_allowed_values():
    with pytest.raises(ConfigError) as exc:
        load_corpus("weird", {"source": "wikipedia"}, 0)
    msg = str(exc.value)
    assert "datasets.weird.source" in msg and "'wikipedia'" in msg
    assert all(s in msg for s in SOURCES)
    with pytest.raises(ConfigError, match=r"datasets\.nosrc\.source is None"):
        load_corpus("nosrc", {}, 0)
    with pytest.raises(ConfigError, match=r"datasets\.lst\.source is \['local'\]"):
        load_corpus("lst", {"source": ["local"]}, 0)


def test_every_source_has_one_loader_signature():
    assert SOURCES == tuple(REGISTRY)
    for source, loader in REGISTRY.items():
        assert list(inspect.signature(loader).parameters) == ["name", "spec", "seed"], source


def test_registry_loader_receives_name_spec_and_seed(monkeypatch):
    seen = []

    def fake(name, spec, seed):
        seen.append((name, dict(spec), seed))
        return pd.DataFrame({"doc_id": ["a"], "text": ["x"], "title": [""]})

    monkeypatch.setitem(REGISTRY, "nfcorpus", fake)
    df, _ = load_corpus("nf", {"source": "nfcorpus", "max_docs": 3}, 42)
    # the loader gets the spec with the schema's defaults of its source filled in (revision: main)
    assert seen == [("nf", {"source": "nfcorpus", "max_docs": 3, "revision": "main"}, 42)]
    assert df["doc_id"].tolist() == ["a"]


# --------------------------------------------------------------------------- synthetic


def _tokens(text):
    return set(re.findall(r"\w+", text.lower()))


def _jaccard(a, b):
    return len(a & b) / len(a | b)


def test_synthetic_deterministic_and_seeded():
    a, sa = load_corpus("syn", {"source": "synthetic", "n_docs": 50}, 7)
    b, _ = load_corpus("syn", {"source": "synthetic", "n_docs": 50}, 7)
    c, _ = load_corpus("syn", {"source": "synthetic", "n_docs": 50}, 8)
    d, _ = load_corpus("syn", {"source": "synthetic", "n_docs": 50, "seed": 7}, 123)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, d)  # spec seed overrides the run seed
    assert not set(a["text"]) & set(c["text"])
    assert sa == _stats(50, 0, 0, 50)


def test_synthetic_shape_and_format():
    # its speed is no test's business (a 2-core machine under load took 5.2 s): benchmarks/ times things
    df, stats = load_corpus("syn", {"source": "synthetic"}, 0)
    _assert_frame(df)
    assert stats == _stats(1000, 0, 0, 1000)
    assert df["doc_id"].iloc[0] == "syn-000000" and df["doc_id"].iloc[-1] == "syn-000999"
    assert (df["title"] == "").all()
    # the patient turn is kept apart: it is exactly the text between "Patient: " and "\nDoctor: "
    assert (df["human_turn"] != "").all()
    patient = df["text"].str.extract(r"^Patient: ([^\n]+)\nDoctor: ", expand=False)
    assert patient.tolist() == df["human_turn"].tolist()
    assert df["text"].str.match(r"Patient: [^\n]+\nDoctor: [^\n]+$").all()
    words = df["text"].str.split().str.len()
    assert words.between(70, 130).all(), (words.min(), words.max())


def test_synthetic_personal_details():
    df = synthetic.generate(300, 3)
    has_email = df["text"].map(lambda t: bool(EMAIL.search(t)))
    has_phone = df["text"].str.contains(r"\d{3}\D{0,2}\d{3}\D?\d{4}")
    assert has_email.mean() > 0.5
    assert (has_email | has_phone).all()
    assert df["text"].str.contains(r"\d{2} [A-Z][a-z]+ 20[12]\d").all()  # a date
    patient_names = df["text"].str.extract(r"I am (\w+ \w+),")[0]
    assert patient_names.notna().all() and patient_names.nunique() > 200


def test_synthetic_documents_have_close_neighbours():
    df = synthetic.generate(300, 1)
    toks = [_tokens(t) for t in df["text"]]
    condition = df["text"].str.extract(r"This looks like ([^.]+)\.")[0]
    assert condition.nunique() == len(synthetic.CLUSTERS)
    nn_sim, same_cluster = [], 0
    for i, a in enumerate(toks):
        j = max((k for k in range(len(toks)) if k != i), key=lambda k: _jaccard(a, toks[k]))
        nn_sim.append(_jaccard(a, toks[j]))
        same_cluster += condition[i] == condition[j]
    rng = random.Random(0)
    pairs = [rng.sample(range(len(toks)), 2) for _ in range(2000)]
    random_sim = sum(_jaccard(toks[i], toks[j]) for i, j in pairs) / len(pairs)
    mean_nn = sum(nn_sim) / len(nn_sim)
    assert mean_nn > random_sim + 0.15, (mean_nn, random_sim)
    assert same_cluster / len(toks) > 0.9
    assert max(nn_sim) < 0.95  # close, never copies


@pytest.mark.parametrize("spec", [{"n_docs": 0}, {"n_docs": "10"}, {"seed": "7"}, {"seed": 1.5}, {"n_docs": True}])
def test_synthetic_bad_options(spec):
    key = next(iter(spec))
    with pytest.raises(ConfigError, match=rf"datasets\.syn\.{key} must be an integer"):
        load_corpus("syn", {"source": "synthetic", **spec}, 0)


def test_synthetic_short_length():
    full = synthetic.generate(200, 5)
    short, _ = load_corpus("syn", {"source": "synthetic", "n_docs": 200, "length": "short"}, 5)
    _assert_frame(short)
    assert short["text"].str.match(r"Patient: [^\n]+\nDoctor: [^\n]+$").all()
    patient = short["text"].str.extract(r"^Patient: ([^\n]+)\nDoctor: ", expand=False)
    assert patient.tolist() == short["human_turn"].tolist()
    words = short["text"].str.split().str.len()
    assert words.between(30, 60).all(), (words.min(), words.max())
    assert short["text"].str.len().mean() < 0.55 * full["text"].str.len().mean()
    # the same PII types as the full length: a name in each, an e-mail address or a phone number
    assert short["text"].str.extract(r"I am (\w+ \w+),")[0].notna().all()
    has_email = short["text"].map(lambda t: bool(EMAIL.search(t)))
    has_phone = short["text"].str.contains(r"\d{3}\D{0,2}\d{3}\D?\d{4}")
    assert (has_email | has_phone).all() and has_email.mean() > 0.3
    assert short["text"].str.contains(r"Dr\. [A-Z]\w+$").all()
    condition = short["text"].str.extract(r"this looks like ([^.]+)\.")[0]
    assert condition.notna().all() and condition.nunique() == len(synthetic.CLUSTERS)


def test_synthetic_compact_length_keeps_the_people_and_every_pii_type():
    short = synthetic.generate(200, 5, "short")
    compact, _ = load_corpus("syn", {"source": "synthetic", "n_docs": 200, "length": "compact"}, 5)
    _assert_frame(compact)
    words = compact["text"].str.split().str.len()
    assert words.between(25, 45).all(), (words.min(), words.max())
    assert compact["text"].str.len().mean() < 0.85 * short["text"].str.len().mean()
    # the same draws: each compact document is its short twin without the second symptom and trigger
    who = r"^(Patient: I am \w+ \w+, \d+, from [^.]+\. For \d+ \w+ I have had )"
    for s_text, c_text in zip(short["text"], compact["text"]):
        s_head, c_head = re.match(who, s_text), re.match(who, c_text)
        assert s_head and c_head and s_head.group(1) == c_head.group(1)
        assert s_text.split("\n")[1] == c_text.split("\n")[1]  # the doctor's turn is the same
        assert ", mostly " not in c_text.split("\n")[0] and ", mostly " in s_text.split("\n")[0]
    has_email = compact["text"].map(lambda t: bool(EMAIL.search(t)))
    has_phone = compact["text"].str.contains(r"\d{3}\D{0,2}\d{3}\D?\d{4}")
    assert (has_email | has_phone).all()
    assert compact["human_turn"].tolist() == compact["text"].str.extract(r"^Patient: ([^\n]+)\n", expand=False).tolist()


def test_synthetic_bad_length():
    with pytest.raises(ConfigError, match=r"datasets\.syn\.length"):
        synthetic.load("syn", {"n_docs": 10, "length": "tiny"}, 0)
