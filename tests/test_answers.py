"""The shared Yes / No / IDK answer parsers, on hand-made answers."""

from __future__ import annotations

import math

import pytest

from ragmi.attacks.answers import (
    IDK_RE,
    parse_yes_no,
    parse_yes_no_idk,
    yes_no_at_first_position,
    yes_no_probabilities,
)


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


# ------------------------------------------------------------------ P(Yes) at the first Yes/No position


def _pos(*alternatives):
    """One generated position: its top-K alternatives as (token, probability) pairs."""
    return [{"token": t, "logprob": math.log(p)} for t, p in alternatives]


def test_yes_no_read_where_the_answer_says_it_not_at_token_zero():
    # " Yes": the answer's first token already is Yes
    space_yes = [_pos((" Yes", 0.7), (" No", 0.2), (" The", 0.1)), _pos((".", 0.9), ("!", 0.1))]
    assert yes_no_at_first_position(space_yes) == (pytest.approx(0.7), pytest.approx(0.2), 0)
    # "Sure, yes": token 0 is "Sure" (neither Yes nor No among its top tokens), then ",", then " yes"
    sure_yes = [
        _pos(("Sure", 0.8), ("Based", 0.15), ("I", 0.05)),
        _pos((",", 0.95), ("!", 0.05)),
        _pos((" yes", 0.6), (" no", 0.3), (" it", 0.1)),
    ]
    assert yes_no_at_first_position(sure_yes) == (pytest.approx(0.6), pytest.approx(0.3), 2)
    # "**Yes**": markdown bold first; "Yes" (and "**No" with its markup) come at token 1
    bold_yes = [
        _pos(("**", 0.9), ("The", 0.1)),
        _pos(("Yes", 0.55), ("**No", 0.4), ("Maybe", 0.05)),
        _pos(("**", 0.99), ("*", 0.01)),
    ]
    assert yes_no_at_first_position(bold_yes) == (pytest.approx(0.55), pytest.approx(0.4), 1)
    # the first token alone (what the attacks read before) gives the floor for both
    assert yes_no_probabilities(bold_yes[0]) == (pytest.approx(0.1), pytest.approx(0.1))


def test_yes_no_absent_at_every_position_is_flagged():
    answer = [_pos(("Based", 0.6), ("The", 0.4)), _pos((" on", 0.9), (" the", 0.1))]
    py, pn, pos = yes_no_at_first_position(answer)
    assert pos == -1  # flagged: no Yes/No among the top tokens of any position
    assert (py, pn) == (pytest.approx(0.4), pytest.approx(0.4))  # the floor of token 0, as before
    assert math.isnan(yes_no_at_first_position([])[0]) and yes_no_at_first_position([])[2] == -1
    # words that only start like Yes/No never count
    assert yes_no_at_first_position([_pos(("Nothing", 0.5), ("Yesterday", 0.5))])[2] == -1


def test_p_yes_is_read_at_the_first_generated_yes_no_token_as_dcmi_code_does():
    """An opener ("Sure") whose low-ranked alternatives list "No" must not decide P(Yes): DCMI's code
    reads it at the first generated token that is a Yes/No token."""
    import math

    from ragmi.attacks.answers import PYES_READINGS, yes_no_at_first_generated, yes_no_at_first_position

    lp = math.log
    tops = [
        [
            {"token": "Sure", "logprob": lp(0.6)},
            {"token": "Yes", "logprob": lp(0.1)},
            {"token": "No", "logprob": lp(0.2)},
        ],
        [{"token": ",", "logprob": lp(0.9)}, {"token": ".", "logprob": lp(0.05)}],
        [{"token": " Yes", "logprob": lp(0.95)}, {"token": " No", "logprob": lp(0.04)}],
    ]
    py, pn, pos = yes_no_at_first_generated(tops)
    assert pos == 2 and py == pytest.approx(0.95) and pn == pytest.approx(0.04)
    py_topk, _, pos_topk = yes_no_at_first_position(tops)
    assert pos_topk == 0 and py_topk == pytest.approx(0.1)  # the named variant "first-topk"
    assert PYES_READINGS["first-generated"] is yes_no_at_first_generated
    # the generated token is matched by its log-probability when the response gives it
    assert yes_no_at_first_generated(tops, [lp(0.1), lp(0.9), lp(0.95)])[2] == 0
    assert yes_no_at_first_generated([tops[1]])[2] == -1
