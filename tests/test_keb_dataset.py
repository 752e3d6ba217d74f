"""Source ``keb``: the four knowledge bases of the knowledge-extraction benchmark (Qi et al., KDD 2026),
read from tiny files in the benchmark's own formats.  The expected ids and texts are worked out by hand
from the benchmark's loader (kedatasets/_data_load.py ``load_from_local``, ``load_HealthCareMagic``;
kedatasets/_utils.py ``split_text``, ``index_qas``)."""

from __future__ import annotations

import copy
import csv
import json
import re

import pytest
import yaml

from ragmi.config import validate_config
from ragmi.datasets import keb, load_corpus
from ragmi.errors import ConfigError, DataError

DEFAULT = yaml.safe_load(open("config/config.yaml"))


def _spec(**keys) -> dict:
    """``keys`` as ``datasets.kb`` of the default config, after validation."""
    cfg = copy.deepcopy(DEFAULT)
    cfg["datasets"] = {"kb": {"source": "keb", **keys}}
    return validate_config(cfg)["datasets"]["kb"]


def _csv(path, header, rows):
    path.parent.mkdir(parents=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _stats(n_raw, empty, dup, n):
    return {"n_raw": n_raw, "n_empty_dropped": empty, "n_duplicates_dropped": dup, "n_docs": n}


@pytest.fixture
def hcm(tmp_path):
    entries = [
        "<human>: Hi doctor, I have a dry cough.\n<bot>: Take steam inhalation.",
        "<human>:   My knee hurts.\r\n<bot>:  An X-ray will help.  ",
        "<human>: Hi doctor, I have a dry cough.\n<bot>: A different answer.",  # same query: no new id
        "I feel dizzy when I stand up <bot>: Check your blood pressure.",  # no <human>: split at <bot>:
        "no markers at all",  # unparsed: query ""
        "<human>: MY KNEE HURTS.\n<bot>: Rest.",  # a new query for the benchmark (case differs)
        None,  # ("", ""): query "" again
    ]
    f = tmp_path / "HealthCareMagic" / "HealthCareMagic-100k.json"
    f.parent.mkdir()
    f.write_text(json.dumps(entries), encoding="utf-8")
    return tmp_path


def test_healthcaremagic_index_content_is_the_benchmarks_id2q(hcm):
    assert keb.index_content("kb", _spec(dataset="HealthCareMagic", path=str(hcm))) == {
        "0": "Hi doctor, I have a dry cough.",
        "1": "My knee hurts.",
        "2": "I feel dizzy when I stand up",
        "3": "",
        "4": "MY KNEE HURTS.",
    }


def test_healthcaremagic_corpus_keeps_the_benchmarks_ids(hcm):
    df, stats = load_corpus("kb", _spec(dataset="HealthCareMagic", path=str(hcm)), 0)
    assert df.to_dict("list") == {
        "doc_id": ["0", "1", "2"],
        "text": ["Hi doctor, I have a dry cough.", "My knee hurts.", "I feel dizzy when I stand up"],
        "title": ["", "", ""],
        "human_turn": ["", "", ""],
    }
    # ragmi's normalize drops the empty query "3" and "4" (a case-folded copy of "1")
    assert stats == _stats(5, 1, 1, 3)


def test_max_docs_keeps_the_first_ids(hcm):
    df, stats = load_corpus("kb", _spec(dataset="HealthCareMagic", path=str(hcm), max_docs=2), 0)
    assert df["doc_id"].tolist() == ["0", "1"]
    assert stats == _stats(2, 0, 0, 2)


def test_enron_one_document_per_row(tmp_path):
    messages = [
        'Message-ID: <1.JavaMail>\nFrom: a@enron.com\nSubject: Re: gas\n\nSee you at 3, "Bob".',
        "Message-ID: <2.JavaMail>\nSubject: lunch\n\nThanks!\n",
        "",  # missing cell: NaN for the benchmark
        "Message-ID: <3.JavaMail>\nSubject: x\n\nbody",
    ]
    f = tmp_path / "Enron" / "emails.csv"
    _csv(f, ["file", "message"], [[f"allen-p/{i}.", m] for i, m in enumerate(messages)])
    spec = _spec(dataset="Enron", path=str(tmp_path))
    content = keb.index_content("kb", spec)
    assert list(content) == ["0", "1", "2", "3"]
    assert content["0"] == messages[0] and content["3"] == messages[3]
    df, stats = load_corpus("kb", spec, 0)
    assert df["doc_id"].tolist() == ["0", "1", "3"]
    assert df["text"].tolist() == [messages[0], messages[1].strip(), messages[3]]
    assert stats == _stats(4, 1, 0, 3)


def test_harrypotter_context_per_row(tmp_path):
    contexts = [
        "Harry Potter is a wizard.",
        "Hogwarts, a school of magic.",
        "Harry Potter is a wizard.",  # the same passage for a second question
        "Dobby is a house-elf.",
    ]
    f = tmp_path / "HarryPotter" / "HarryPotterQA-26k.csv"
    _csv(f, ["question", "answer", "context"], [[f"q{i}", f"a{i}", c] for i, c in enumerate(contexts)])
    spec = _spec(dataset="HarryPotter", path=str(tmp_path))
    assert keb.index_content("kb", spec) == {str(i): c for i, c in enumerate(contexts)}
    df, stats = load_corpus("kb", spec, 0)
    assert df["doc_id"].tolist() == ["0", "1", "3"]
    assert df["text"].tolist() == [contexts[0], contexts[1], contexts[3]]
    assert stats == _stats(4, 0, 1, 3)


def test_pokemon_joins_name_types_and_caption(tmp_path):
    rows = [
        ["Bulbasaur", "Grass", "Poison", "A seed Pokemon."],
        ["Charmander", "Fire", "", "A lizard with a flame on its tail."],
        ["Squirtle", "Water", "NA", "A tiny turtle."],  # pandas reads NA as missing: "" after fillna
        ["Pikachu", "Electric", "", "A mouse."],
    ]
    f = tmp_path / "Pokemon" / "Pokemon-1k.csv"
    _csv(f, ["name", "type_1", "type_2", "caption", "image"], [r + [f"img{i}.png"] for i, r in enumerate(rows)])
    df, stats = load_corpus("kb", _spec(dataset="Pokemon", path=str(tmp_path)), 0)
    assert df["doc_id"].tolist() == ["0", "1", "2", "3"]
    assert df["text"].tolist() == [
        "Bulbasaur Grass Poison A seed Pokemon.",
        "Charmander Fire  A lizard with a flame on its tail.",
        "Squirtle Water  A tiny turtle.",
        "Pikachu Electric  A mouse.",
    ]
    assert set(df["title"]) == {""} and set(df["human_turn"]) == {""}
    assert stats == _stats(4, 0, 0, 4)


@pytest.mark.parametrize("dataset, rel", list(keb.FILES.items()))
def test_missing_file_is_one_error_naming_it(tmp_path, dataset, rel):
    with pytest.raises(DataError) as exc:
        load_corpus("kb", _spec(dataset=dataset, path=str(tmp_path)), 0)
    assert re.search(rf"datasets\.kb: file {re.escape(str(tmp_path / rel))} does not exist", str(exc.value))


def test_missing_column_names_it(tmp_path):
    _csv(tmp_path / "Pokemon" / "Pokemon-1k.csv", ["name", "type_1", "caption"], [["A", "B", "C"]])
    with pytest.raises(DataError, match=r"has no column 'type_2'"):
        load_corpus("kb", _spec(dataset="Pokemon", path=str(tmp_path)), 0)


@pytest.mark.parametrize("key", ["dataset", "path"])
def test_required_keys(tmp_path, key):
    spec = {"source": "keb", "dataset": "Enron", "path": str(tmp_path)}
    del spec[key]
    with pytest.raises(ConfigError, match=rf"datasets\.kb\.{key} is required for source 'keb'"):
        load_corpus("kb", _spec(**{k: v for k, v in spec.items() if k != "source"}), 0)


def test_unknown_dataset_is_refused_by_the_schema(tmp_path):
    with pytest.raises(ConfigError, match=r"datasets\.kb\.dataset"):
        _spec(dataset="HarryPotterQAChunk", path=str(tmp_path))
