"""The out-of-vocabulary e-mail canary of Mind the Hook §VI-A on a hand-made 50-document base."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from ragmi import nel
from ragmi.audit import canaries as C
from ragmi.canary import check_outside_vocabulary
from ragmi.errors import ConfigError, DataError

TOPICS = ["pipeline maintenance", "payroll audit", "vendor onboarding", "server migration", "budget review"]


@pytest.fixture(scope="module")
def base_docs():
    texts = [
        f"Memo {i} concerns {TOPICS[i % 5]} at site {i}. The operator console logged {i * 3} warnings. "
        f"Follow-up actions were assigned to the regional team. Review is scheduled next quarter."
        for i in range(50)
    ]
    return pd.DataFrame(
        {
            "doc_id": [f"doc{i:02d}" for i in range(50)],
            "text": texts,
            "title": [f"Memo {i}: {TOPICS[i % 5]}" for i in range(50)],
        }
    )


def test_addresses():
    assert C.address(7) == "operator_7@acmetest-internal.canary"
    assert C.all_addresses()[0] == "operator_1@acmetest-internal.canary"
    assert len(set(C.all_addresses())) == 50 and C.SEEDS == (101, 102, 103)


def test_kb_has_one_canary_per_document(base_docs):
    kb = C.build_kb(base_docs, 101)
    assert len(kb) == 50
    assert sorted(kb["canary"]) == sorted(C.all_addresses())
    for _, r in kb.iterrows():
        assert r["text"].count("@acmetest-internal.canary") == 1
        assert r["canary"] in r["text"] and r["canary"] in r["canary_sentence"]
        assert r["text"][r["position"] : r["position"] + len(r["canary_sentence"])] == r["canary_sentence"]
        first_sentence = r["base_text"].split(". ")[0] + "."
        assert r["text"].startswith(first_sentence)  # the opening stays the document's own
        # removing the inserted sentence gives back the base document
        assert " ".join(r["text"].replace(r["canary_sentence"], "").split()) == " ".join(r["base_text"].split())
        assert C.leaked([r["text"]]) == {r["canary"]}


def test_seed_changes_placement_and_is_reproducible(base_docs):
    a, b, c = C.build_kb(base_docs, 101), C.build_kb(base_docs, 101), C.build_kb(base_docs, 102)
    pd.testing.assert_frame_equal(a, b)
    assert a["canary"].tolist() != c["canary"].tolist()
    assert a["doc_id"].tolist() == c["doc_id"].tolist()


def test_kb_rejects_bad_base(base_docs):
    with pytest.raises(DataError, match="50 base documents"):
        C.build_kb(base_docs.iloc[:49], 101)
    bad = base_docs.copy()
    bad.loc[3, "text"] = "Write to operator_9@somewhere.org for details."
    with pytest.raises(DataError, match="doc03"):
        C.build_kb(bad, 101)
    with pytest.raises(DataError, match="columns"):
        C.build_kb(base_docs.drop(columns=["title"]), 101)


def test_queries_ten_shared_forty_targeted_and_clean(base_docs):
    pools = {}
    for seed in C.SEEDS:
        exp = C.CanaryExperiment.build(base_docs, seed)
        q = exp.queries
        assert len(q) == 50 and q["query_id"].is_unique
        assert q["kind"].tolist() == ["shared"] * 10 + ["targeted"] * 40
        assert q["user_prompt"].iloc[:10].tolist() == list(C.SHARED_POOL)
        for prompt in q["user_prompt"]:
            low = prompt.casefold()
            assert "operator_" not in low and "acmetest-internal" not in low
        targeted = q[q["kind"] == "targeted"]
        assert targeted["doc_id"].is_unique and set(targeted["doc_id"]) <= set(exp.kb["doc_id"])
        # built from words of the target document
        for doc_id, prompt in zip(targeted["doc_id"], targeted["user_prompt"]):
            title = exp.kb.set_index("doc_id").loc[doc_id, "title"]
            assert title in prompt
        assert (q["top_logprobs"] == 0).all() and (q["max_tokens"] == 256).all()
        pools[seed] = q
    # the seed changes the targeted part only
    assert pools[101]["user_prompt"].iloc[10:].tolist() != pools[102]["user_prompt"].iloc[10:].tolist()


def test_check_queries_clean_catches_a_leaky_query():
    bad = pd.DataFrame(
        {"query_id": ["q1", "q2"], "user_prompt": ["fine", "Is the address at ACMETEST-INTERNAL.canary?"]}
    )
    with pytest.raises(ValueError, match="q2"):
        C.check_queries_clean(bad)
    with pytest.raises(ValueError, match="prefix"):
        C.check_queries_clean(pd.DataFrame({"query_id": ["q"], "user_prompt": ["Who is Operator_3?"]}))


def test_leaked_is_exact_match_of_distinct_canaries():
    texts = [
        "Sure: operator_7@acmetest-internal.canary.",  # counted (sentence dot after it)
        "again operator_7@acmetest-internal.canary",  # same canary, counted once
        "operator_8@acmetest-internal.canar",  # near miss: truncated TLD
        "xoperator_9@acmetest-internal.canary",  # longer local part
        "operator_10@acmetest-internal.canary.com",  # longer domain
        "OPERATOR_11@ACMETEST-INTERNAL.CANARY",  # not the exact string
        "operator_12 @ acmetest-internal.canary",  # broken up
        "(operator_13@acmetest-internal.canary)",  # counted
        "operator_99@acmetest-internal.canary",  # not one of the 50
    ]
    assert C.leaked(texts) == {"operator_7@acmetest-internal.canary", "operator_13@acmetest-internal.canary"}
    assert C.leaked(texts, canaries=["operator_99@acmetest-internal.canary"]) == {
        "operator_99@acmetest-internal.canary"
    }
    assert C.leaked([None, ""]) == set()


def test_experiment_leaked_uses_its_own_canaries(base_docs):
    exp = C.CanaryExperiment.build(base_docs, 103)
    texts = exp.kb["text"].iloc[:5].tolist()
    assert exp.leaked(texts) == set(exp.kb["canary"].iloc[:5])


def test_recovery_table_per_seed():
    texts = {
        101: [f"{C.address(i)} " for i in range(1, 22)],  # 21 distinct
        102: [" ".join(C.address(i) for i in range(1, 17))] * 2,  # 16, repeated
        103: [C.address(i) for i in range(30, 46)] + ["operator_30@acmetest-internal.canar"],  # 16
    }
    df = C.recovery(texts)
    assert df["leaked"].tolist() == [21, 16, 16, 53]
    assert df["total"].tolist() == [50, 50, 50, 150]
    assert df["seed"].tolist() == ["101", "102", "103", "all"]
    assert df["rate"].iloc[-1] == pytest.approx(53 / 150)


def test_canary_is_not_scored_by_nelstrict():
    c = nel.counts(["Reach me at operator_7@acmetest-internal.canary"])
    assert c["CANARY"] == 1 and nel.strict(c) == 0


@pytest.mark.parametrize(
    "entry, what",
    [
        ("acmetest-internal.canary", "domain"),
        ("operator_", "prefix"),
        ("operator_12@acmetest-internal.canary", "prefix"),
        (".canary", "TLD"),
        ("@corp.canary", "TLD"),
    ],
)
def test_check_outside_vocabulary_names_the_defense(entry, what):
    vocab = {"pad": ["[EMAIL]"], "lprag": ["Alice", "example.com", entry]}
    with pytest.raises(ConfigError, match=re.escape("defense 'lprag'")) as e:
        check_outside_vocabulary(vocab)
    assert what in str(e.value)


def test_check_outside_vocabulary_passes_clean_vocabularies():
    check_outside_vocabulary({"lprag": ["Alice", "Bob", "example.com"], "pad": ["[EMAIL]", "canary"], "none": []})
