"""The shared Yes / No / IDK answer parsers, on hand-made answers."""

from __future__ import annotations

import math

import pytest

from ragmi.attacks.answers import IDK_RE, parse_yes_no, parse_yes_no_idk, yes_no_probabilities


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Yes", 1),
        (" Yes", 1),
        ("yes, it does.", 1),
        ("No.", 0),
        ("no.", 0),
        ("NO", 0),
        ("Yes and no", 1),
        ("No, yes", 0),  # first occurrence wins
        ("unanswerable", None),
        ("Nothing here", None),
        ("Yesterday", None),
        ("I know", None),
        ("I don't know", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_yes_no_word_boundaries(text, expected):
    assert parse_yes_no(text) == expected


@pytest.mark.parametrize(
    "text, label",
    [
        ("Yes.", "yes"),
        (" Yes", "yes"),
        ("yes, it is", "yes"),
        ("No", "no"),
        ("no.", "no"),
        ("NO!", "no"),
        ("I don't know", "idk"),
        ("I don't know.", "idk"),
        ("I do not know", "idk"),
        ("I don\u2019t know", "idk"),
        ("i cant know that", "idk"),
        ("I'm not sure.", "idk"),
        ("There is no information about this.", "idk"),  # IDK phrase and "no" start together -> idk
        ("No information is given", "idk"),
        ("No, I don't know", "no"),
        ("Yes. I don't know more.", "yes"),  # earliest match wins
        ("I don't know, yes", "idk"),
        ("Unanswerable", "idk"),
        ("Not enough information.", "idk"),
        ("Insufficient information", "idk"),
        ("I know nothing", "other"),  # "know" / "nothing" are not "no"
        ("Maybe", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_parse_yes_no_idk(text, label):
    assert parse_yes_no_idk(text) == label


def test_idk_regex_needs_word_boundaries():
    assert IDK_RE.search("I dont know") and IDK_RE.search("UNANSWERABLE.")
    assert IDK_RE.search("unanswerables") is None and IDK_RE.search("not surely") is None


def lp(token, p):
    return {"token": token, "logprob": math.log(p)}


def test_yes_no_probabilities_sum_variants_and_floor():
    py, pn = yes_no_probabilities([lp("Yes", 0.5), lp(" yes", 0.1), lp("The", 0.05)])
    assert py == pytest.approx(0.6)  # "Yes" and " yes" both count
    assert pn == pytest.approx(0.05)  # absent: the smallest listed probability (an upper bound)
    py, pn = yes_no_probabilities([lp("NO", 0.7), lp("no.", 0.2), lp("Yes", 0.1)])
    assert (py, pn) == (pytest.approx(0.1), pytest.approx(0.7))  # "no." is not the token "no"


def test_yes_no_probabilities_without_top_list():
    for top in (None, []):
        py, pn = yes_no_probabilities(top)
        assert math.isnan(py) and math.isnan(pn)
