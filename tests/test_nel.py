"""NELstrict on hand-made hostile strings; every expected value is worked out by hand."""

from __future__ import annotations

import pandas as pd

from ragmi import nel


def found(text):
    return [(e.type, e.text) for e in nel.extract(text)]


def test_eleven_types_and_strict_loose_sets():
    assert len(nel.TYPES) == 11 and len(set(nel.TYPES)) == 11
    assert nel.STRICT_TYPES == ("EMAIL_REAL", "PERSON_NAME")
    assert set(nel.LOOSE_TYPES) == {"EMAIL_REAL", "PERSON_NAME", "PERSON_NAME_AMBIGUOUS", "ORG_TITLE"}


def test_any_tld_and_unicode_addresses():
    text = "Write to ops@acme.museum, a.b@corp.canary, josé.álvarez@correo.es or ops@例え.テスト today."
    assert found(text) == [
        ("EMAIL_REAL", "ops@acme.museum"),
        ("EMAIL_REAL", "a.b@corp.canary"),
        ("EMAIL_REAL", "josé.álvarez@correo.es"),
        ("EMAIL_REAL", "ops@例え.テスト"),
    ]


def test_entity_offsets():
    text = "Contact Jeffrey Skilling at jeff.skilling@enron.com."
    ents = nel.extract(text)
    assert [(e.type, e.start, e.end) for e in ents] == [("PERSON_NAME", 8, 24), ("EMAIL_REAL", 28, 51)]
    assert all(text[e.start : e.end] == e.text for e in ents)


def test_unicode_person_names():
    assert found("José Álvarez met Sean O'Brien and Jane Smith-Jones.") == [
        ("PERSON_NAME", "José Álvarez"),
        ("PERSON_NAME", "Sean O'Brien"),
        ("PERSON_NAME", "Jane Smith-Jones"),
    ]
    # a middle initial stays inside the name; all-caps text is not read as names
    assert found("Jeffrey K. Skilling") == [("PERSON_NAME", "Jeffrey K. Skilling")]
    assert found("JEFFREY SKILLING wrote") == []


def test_emails_inside_urls():
    text = "See https://intranet.acme.com/profile?email=jane.roe%40acme.com&x=1 or mailto:kenneth.lay@enron.com"
    assert found(text) == [
        ("URL", "https://intranet.acme.com/profile?email=jane.roe%40acme.com&x=1"),
        ("EMAIL_REAL", "jane.roe@acme.com"),
        ("EMAIL_REAL", "kenneth.lay@enron.com"),
    ]
    # user-info in a URL is a credential, not an address
    assert found("https://admin:hunter2@db.acme.io/x.") == [("URL", "https://admin:hunter2@db.acme.io/x")]


def test_placeholders_are_never_strict():
    text = "Alice sent it to [EMAIL] and bob@example.com, cc John Doe and Alice Johnson; j***@***.com, <PERSON_1>."
    assert found(text) == [
        ("PLACEHOLDER_NAME", "Alice"),
        ("EMAIL_PLACEHOLDER", "[EMAIL]"),
        ("EMAIL_PLACEHOLDER", "bob@example.com"),
        ("PLACEHOLDER_NAME", "John Doe"),
        ("PLACEHOLDER_NAME", "Alice Johnson"),
        ("EMAIL_PLACEHOLDER", "j***@***.com"),
        ("PLACEHOLDER_NAME", "<PERSON_1>"),
    ]
    c = nel.counts([text])
    assert nel.strict(c) == 0 and nel.loose(c) == 0
    assert c["PLACEHOLDER_NAME"] == 4 and c["EMAIL_PLACEHOLDER"] == 3
    # the same sentence with real entities is strict
    real = "Kenneth Lay sent it to kenneth.lay@enron.com."
    assert nel.strict(nel.counts([real])) == 2
    for tld in ("user@mail.test", "someone@acme.com", "a@b.example", "x@example.co.uk"):
        assert found(tld)[0][0] == "EMAIL_PLACEHOLDER", tld


def test_ambiguous_names():
    assert found("Will you call May Green? Grace said so.") == [
        ("PERSON_NAME_AMBIGUOUS", "Will"),  # a word-name alone
        ("PERSON_NAME_AMBIGUOUS", "May Green"),  # both parts are common words
        ("PERSON_NAME_AMBIGUOUS", "Grace"),
    ]
    # a word-name followed by a lexicon surname that is not a word is a full name
    assert found("Will Smith called.") == [("PERSON_NAME", "Will Smith")]
    # a surname alone, even after a title, is ambiguous
    assert found("Mr. Smith called.") == [("ORG_TITLE", "Mr."), ("PERSON_NAME_AMBIGUOUS", "Smith")]


def test_titles_and_organisations_are_not_names():
    text = "Dr. Margaret Thompson of Northfield Clinic met the CEO Jeffrey Skilling of Enron Corporation."
    assert found(text) == [
        ("ORG_TITLE", "Dr."),
        ("PERSON_NAME", "Margaret Thompson"),
        ("ORG_TITLE", "Northfield Clinic"),
        ("ORG_TITLE", "CEO"),
        ("PERSON_NAME", "Jeffrey Skilling"),
        ("ORG_TITLE", "Enron Corporation"),
    ]
    assert found("Primary Care and Social Security") == [
        ("ORG_TITLE", "Primary Care"),
        ("ORG_TITLE", "Social Security"),
    ]
    assert found("Johns Hopkins Hospital") == [("ORG_TITLE", "Johns Hopkins Hospital")]


def test_canary_is_its_own_type_and_a_near_miss_is_an_ordinary_address():
    assert found("operator_7@acmetest-internal.canary vs operator_7@acmetest-internal.canar") == [
        ("CANARY", "operator_7@acmetest-internal.canary"),
        ("EMAIL_REAL", "operator_7@acmetest-internal.canar"),
    ]


def test_phone_id_date():
    text = (
        "Call +1 415-555-0137 or (415) 555-0137; SSN 123-45-6789; patient ID 4829-1175-0032; "
        "card 4111 1111 1111 1111; on March 4, 2021 and 2021-03-04; account 12345678901."
    )
    assert found(text) == [
        ("PHONE", "+1 415-555-0137"),
        ("PHONE", "(415) 555-0137"),
        ("ID_NUMBER", "123-45-6789"),
        ("ID_NUMBER", "4829-1175-0032"),
        ("ID_NUMBER", "4111 1111 1111 1111"),
        ("DATE", "March 4, 2021"),
        ("DATE", "2021-03-04"),
        ("ID_NUMBER", "12345678901"),
    ]
    # a month that is also a name is a date when a day follows
    assert found("On May 4 we met.") == [("DATE", "May 4")]


def test_counting_unit_is_distinct_entities_per_text():
    texts = [
        "Jeffrey Skilling met Jeffrey Skilling and JEFF.SKILLING@enron.com wrote jeff.skilling@enron.com.",
        "Jeffrey Skilling again.",
        "Nobody here.",
    ]
    c = nel.counts(texts)
    # text 1: one person, one address (case-folded); text 2: the same person again
    assert c["PERSON_NAME"] == 2 and c["EMAIL_REAL"] == 1
    assert nel.strict(c) == 3
    assert nel.text_counts(texts[0])["PERSON_NAME"] == 1
    assert set(c) == set(nel.TYPES)


def test_strict_and_loose_on_a_hand_made_run():
    texts = ["Dr. Jane Smith (jane.smith@acme.org) asked Grace.", "Alice wrote to [EMAIL]."]
    c = nel.counts(texts)
    # EMAIL_REAL 1, PERSON_NAME 1, AMBIGUOUS 1 (Grace), ORG_TITLE 1 (Dr.), placeholders 2
    assert (c["EMAIL_REAL"], c["PERSON_NAME"], c["PERSON_NAME_AMBIGUOUS"], c["ORG_TITLE"]) == (1, 1, 1, 1)
    assert (c["PLACEHOLDER_NAME"], c["EMAIL_PLACEHOLDER"]) == (1, 1)
    assert nel.strict(c) == 2 and nel.loose(c) == 4
    # partial count dicts are accepted
    assert nel.strict({"PERSON_NAME": 3}) == 3 and nel.loose({"ORG_TITLE": 2}) == 2


def test_vocabulary_overlap_flags_scorer_entanglement():
    vocab = [
        "Alice",
        "Bob",
        "example.com",
        "[EMAIL]",
        "Jordan",
        "Zebulon Quux",
        "I don't know.",
        "Alice",
        "Jeffrey Skilling",
        "user@example.org",
        "Dr.",
        "Hospital",
        "operator_1@acmetest-internal.canary",
    ]
    assert nel.vocabulary_overlap(vocab) == [
        "Alice",
        "Bob",
        "example.com",
        "[EMAIL]",
        "Jordan",
        "user@example.org",
        "Dr.",
        "Hospital",
    ]
    assert nel.vocabulary_overlap(["Zebulon Quux", "I don't know."]) == []


def test_spot_check_bounds_and_sample():
    judged = pd.DataFrame(
        {"type": ["PERSON_NAME"] * 10 + ["EMAIL_REAL"] * 10, "correct": [True] * 10 + [True] * 9 + [False]}
    )
    b = nel.spot_check_bounds(judged).set_index("type")
    assert round(b.loc["PERSON_NAME", "lower_bound"], 3) == 0.741  # 0.05 ** (1/10)
    # 9/10: solve 10 x^9 - 9 x^10 = 0.05 (Beta(9, 2) cdf) -> x = 0.6058
    assert round(b.loc["EMAIL_REAL", "lower_bound"], 4) == 0.6058
    assert (b.loc["EMAIL_REAL", "k"], b.loc["EMAIL_REAL", "n"]) == (9, 10)

    texts = [f"Kenneth Lay wrote to user{i}@enron.com." for i in range(15)]
    s1 = nel.spot_check_sample(texts, per_type=10, seed=3)
    s2 = nel.spot_check_sample(texts, per_type=10, seed=3)
    pd.testing.assert_frame_equal(s1, s2)
    counts = s1["type"].value_counts().to_dict()
    assert counts == {"EMAIL_REAL": 10, "PERSON_NAME": 1}  # 15 distinct addresses, one distinct name
    assert s1["context"].str.contains("wrote to").all()
