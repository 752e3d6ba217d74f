"""DCMI's WordNet perturber perturbs the body of a document and leaves its role labels alone
("Patient:", "Doctor:" in HealthCareMagic-style dialogues); tools/show_perturbations.py shows it."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

import pytest

from ragmi.attacks.perturb import WordNetPerturber, label_spans, replace_count
from ragmi.datasets.synthetic import generate

ROOT = Path(__file__).resolve().parent.parent

# Every role label here is itself a WordNet candidate ("patient" -> "impatient", "good" -> "bad").
DIALOGUE = "Patient: I feel good.\nDoctor: The result is bad.\n  Patient: It was easy.\n\tGood: a short answer."

# A dialogue whose body has more candidates than θ = 0.12 asks for (41 words after the labels).
BODY = (
    "Patient: The new pain was sharp and sudden, but the old ache was dull and slow. A happy week felt "
    "short, while an unhappy night was long and difficult; the early signs were clear and the late ones "
    "were dangerous and hard to bear.\n"
    "Doctor: The results look good and the test was easy. Work quietly and carefully in a warm and "
    "bright room; the outside air is cold and wet. The large dose is simple and safe."
)


@pytest.fixture(scope="module")
def wn():
    return WordNetPerturber(seed=11)


def labels(text: str) -> list[str]:
    return [text[a:b] for a, b in sorted(label_spans(text))]


def line_labels(text: str) -> list[str]:
    """Each line's leading "Word:" (or "" when the line has none)."""
    return [(re.match(r"[ \t]*[A-Za-z'\u2019-]*:", line) or [""])[0] for line in text.split("\n")]


def test_label_spans_is_a_word_that_starts_the_text_or_a_line_right_before_a_colon():
    assert labels(DIALOGUE) == ["Patient", "Doctor", "Patient", "Good"]
    assert labels("Follow-up: in two weeks") == ["Follow-up"]
    assert labels("\n\nDoctor: hi") == ["Doctor"]
    assert labels("Patient: hi\r\nDoctor: hi") == ["Patient", "Doctor"]  # Windows line ends too
    # a ':' that does not follow the first word of a line makes no label
    for text in (
        "two days: a bad idea",
        "Dr. Lee: rest",
        "Patient : a space before the colon",
        "at 10:30 it was good",
        "1st: good",
        "Good news: it is easy",
    ):
        assert label_spans(text) == set(), text


def test_role_labels_never_change(wn):
    # θ = 1 asks for more swaps than there are candidates: every candidate outside the labels is swapped
    p = wn.perturb(DIALOGUE, 1.0, "d")
    assert (
        p.text
        == "Patient: I feel bad.\nDoctor: The result is good.\n  Patient: It was difficult.\n\tGood: a long answer."
    )
    assert p.swaps == [("good", "bad"), ("bad", "good"), ("easy", "difficult"), ("short", "long")]
    assert "Patient" not in {a for a, _ in p.swaps} and p.n_swapped == 4


@pytest.mark.parametrize("length", ["compact", "full"])
def test_role_labels_never_change_on_the_synthetic_corpus(wn, length):
    df = generate(60, seed=5, length=length)
    for doc_id, text in zip(df["doc_id"], df["text"]):
        assert labels(text) == ["Patient", "Doctor"]
        for theta in (0.04, 0.06, 0.12, 1.0):
            p = wn.perturb(text, theta, doc_id)
            assert line_labels(p.text) == line_labels(text) == ["Patient:", "Doctor:"], (doc_id, theta, p.text)
            assert all(a not in ("Patient", "Doctor") for a, _ in p.swaps)


@pytest.mark.parametrize("theta", [0.04, 0.06, 0.08, 0.10, 0.12])
def test_body_words_change_at_the_requested_rate(wn, theta):
    n_words = len(BODY.split())
    p = wn.perturb(BODY, theta, "doc-body")
    # the authors' count over the whole text (labels included), all of it spent on the body
    assert p.n_requested == replace_count(BODY, theta) == max(1, int(theta * n_words + 1e-9))
    assert p.n_swapped == p.n_requested
    before, after = BODY.split(), p.text.split()
    assert len(before) == len(after)  # one-word antonyms here
    changed = [(x, y) for x, y in zip(before, after) if x != y]
    articles = [(x, y) for x, y in changed if x.lower() in ("a", "an")]  # "A happy" -> "An unhappy"
    assert len(changed) - len(articles) == p.n_requested
    assert line_labels(p.text) == ["Patient:", "Doctor:"]


def test_body_swaps_on_the_synthetic_corpus_are_as_many_as_asked_or_all_candidates(wn):
    """Each document gets min(requested, candidates in its body) swaps: θ = 1 counts the candidates."""
    df = generate(40, seed=9, length="full")
    total = {0.06: 0, 0.12: 0}
    for doc_id, text in zip(df["doc_id"], df["text"]):
        n_cand = wn.perturb(text, 1.0, doc_id).n_swapped
        assert n_cand >= 1
        for theta in total:
            p = wn.perturb(text, theta, doc_id)
            assert p.n_swapped == min(p.n_requested, n_cand)
            diff = difflib.SequenceMatcher(a=text.split(), b=p.text.split(), autojunk=False)
            assert any(tag != "equal" for tag, *_ in diff.get_opcodes())  # the body did change
            total[theta] += p.n_swapped
    assert 0 < total[0.06] < total[0.12]


def test_labels_keep_the_perturber_deterministic_and_nested():
    a = WordNetPerturber(seed=3).perturb(BODY, 0.06, "x")
    assert a.text == WordNetPerturber(seed=3).perturb(BODY, 0.06, "x").text
    assert set(a.swaps) < set(WordNetPerturber(seed=3).perturb(BODY, 0.12, "x").swaps)


# ---------------------------------------------------------------------- tools/show_perturbations.py


@pytest.fixture(scope="module")
def show():
    spec = importlib.util.spec_from_file_location("show_perturbations", ROOT / "tools" / "show_perturbations.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_show_perturbations_marks_the_changed_words(show):
    left, right = show.marked("Patient: I feel good.\nDoctor: rest", "Patient: I feel bad.\nDoctor: rest")
    assert (left, right) == ("Patient: I feel [good.]\nDoctor: rest", "Patient: I feel [bad.]\nDoctor: rest")
    assert show.side_by_side("a b c d", "a x c d", 4).splitlines() == ["a b  | a x", "c d  | c d"]


def test_show_perturbations_runs_on_the_embedded_defaults_corpus(show, capsys):
    assert show.main(["--n", "2", "--top", "3"]) == 0  # config/config.yaml: 200 synthetic documents
    out = capsys.readouterr().out
    assert "dataset synthetic (200 documents), WordNet perturber, seed 1234, θ 0.06, 0.12" in out
    assert out.count("=== syn-") == 2 and out.count("θ = 0.06: ") == out.count("θ = 0.12: ") == 2
    assert "most-changed words over 2 documents" in out and "θ = 0.06 (" in out and "θ = 0.12 (" in out
    assert "[Patient:]" not in out and "impatient" not in out
    assert show.main(["--doc", "syn-000007", "--thetas", "0.12", "--count-all"]) == 0
    out = capsys.readouterr().out
    assert "=== syn-000007 (" in out and "most-changed words over 200 documents" in out
