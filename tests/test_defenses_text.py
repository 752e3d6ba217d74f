"""Text defenses: DP output perturbation, PAD regex masking (hostile strings), LPRAG substitution."""

from __future__ import annotations

import math

import pytest

from ragmi.defenses import build_defense
from ragmi.defenses.base import REFUSAL, DefenseContext, QueryState, hook_digest
from ragmi.defenses.dp_output import keep_probability
from ragmi.defenses.lprag import DOMAINS, NAMES, find_names, fixed_name, substitute
from ragmi.defenses.pad import mask

LOGPROBS = {"first_token_logprobs": [{"token": "Yes", "logprob": -0.2}], "token_logprobs": [-0.2, -1.3, -0.7]}


def ctx(seed=0):
    return DefenseContext(seed=seed, k=2)


def answered(text, qid="q"):
    return QueryState(query_id=qid, query="question", response={"response_text": text, **LOGPROBS})


# ---------------------------------------------------------------- DP output


def test_keep_probability():
    assert keep_probability(0.1) == pytest.approx(1 / 11)
    assert round(keep_probability(0.1), 4) == 0.0909
    assert keep_probability(1.0) == 0.5


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_dp_output_keeps_each_token_with_probability_eps_over_1_plus_eps(epsilon):
    d = build_defense("dp", {"kind": "dp_output", "epsilon": epsilon})
    tokens = [f"t{i}" for i in range(100)]
    kept = total = 0
    for q in range(300):
        s = answered(" ".join(tokens), qid=f"q{q}")
        d.on_output([s], ctx())
        out = s.response["response_text"].split()
        assert out == [t for t in tokens if t in out]  # kept tokens stay in order, nothing invented
        kept += len(out)
        total += len(tokens)
    p = keep_probability(epsilon)
    assert abs(kept / total - p) < 4 * math.sqrt(p * (1 - p) / total)


def test_dp_output_is_seeded_per_query_and_keeps_the_logprob_columns():
    d = build_defense("dp", {"kind": "dp_output", "epsilon": 1.0})
    text = " ".join(f"w{i}" for i in range(40))
    outs = {}
    for qid in ("a", "b", "a"):
        s = answered(text, qid)
        before = hook_digest(s, "output")
        d.on_output([s], ctx())
        assert hook_digest(s, "output") != before
        assert s.response["first_token_logprobs"] == LOGPROBS["first_token_logprobs"]
        assert s.response["token_logprobs"] == LOGPROBS["token_logprobs"]
        outs.setdefault(qid, []).append(s.response["response_text"])
    assert outs["a"][0] == outs["a"][1] != outs["b"][0]
    assert d.logprobs == "keep" and d.channels == ("text",)


def test_dp_output_empty_and_all_dropped_answers():
    d = build_defense("dp", {"kind": "dp_output"})
    s = answered("   ")
    d.on_output([s], ctx())
    assert s.response["response_text"] == REFUSAL
    # epsilon tiny: keep probability ~1e-9, so every token is dropped.
    one = build_defense("dp", {"kind": "dp_output", "epsilon": 1e-9})
    refuse = build_defense("dp", {"kind": "dp_output", "epsilon": 1e-9, "on_all_dropped": "refuse"})
    picked = set()
    for q in range(40):
        s = answered("alpha beta gamma", qid=f"q{q}")
        one.on_output([s], ctx())
        picked.add(s.response["response_text"])
        s = answered("alpha beta gamma", qid=f"q{q}")
        refuse.on_output([s], ctx())
        assert s.response["response_text"] == REFUSAL
    assert picked == {"alpha", "beta", "gamma"}  # one token, drawn uniformly
    assert one.record()["stats"]["all_dropped"] == 40


# ---------------------------------------------------------------- PAD


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Contact operator_7@acmetest-internal.canary now.", "Contact [EMAIL] now."),
        ("curator@art.museum", "[EMAIL]"),
        ("jürgen.müller@beispiel.de wrote", "[EMAIL] wrote"),
        ("用户@例子.广告", "[EMAIL]"),
        ("почта@пример.рф", "[EMAIL]"),
        ("a.b+tag@sub.domain.co.uk.", "[EMAIL]."),
        ("<mailto:x@y.io>", "<mailto:[EMAIL]>"),
        ("https://x.org/?u=a@b.c&v=1", "https://x.org/?u=[EMAIL]&v=1"),
        ("https://x.org/#a@b.c", "https://x.org/#[EMAIL]"),
        ("https://x.org/?u=user%40host.com", "https://x.org/?u=[EMAIL]"),
        ("(email: Foo.Bar@Example.COM)", "(email: [EMAIL])"),
        ("o'brien@x.ie", "[EMAIL]"),
        ("root@[192.168.0.1]", "[EMAIL]"),
        ("idn@xn--bcher-kva.example", "[EMAIL]"),
        ("full-width ｕｓｅｒ＠ｈｏｓｔ.ｃｏｍ", "full-width [EMAIL]"),
        ("Call +1 (555) 123-4567 or 555-123-4567.", "Call [ID] or [ID]."),
        ("+44 20 7946 0958", "[ID]"),
        ("(555) 123 4567 and 555.123.4567", "[ID] and [ID]"),
        ("SSN 123-45-6789", "SSN [ID]"),
        ("card 4111 1111 1111 1111", "card [ID]"),
        ("MRN 00482913; ID: AB1234567; MRN-00482913", "MRN [ID]; ID: [ID]; [ID]"),
    ],
)
def test_pad_masks_hostile_strings(text, expected):
    assert mask(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "In 2019, 42 patients (3.14159265 mg) were seen on 2024-01-15.",
        "COVID-19, IL-6, H1N1, 2019-nCoV, 100 mg, 1,234,567 cells",
        "Write to us at the front desk; no address here @ all.",
        "user at example dot com",  # obfuscated forms are outside the patterns (pattern-limited)
    ],
)
def test_pad_leaves_non_matching_text_alone(text):
    assert mask(text) == (text, 0, 0)


def test_pad_fires_only_on_a_match_and_keeps_logprobs():
    d = build_defense("pad", {"kind": "pad"})
    plain = answered("The patient should rest.", "a")
    leaky = answered("Write to operator_7@acmetest-internal.canary or call 555-123-4567.", "b")
    untouched = dict(plain.response)
    d.on_output([plain, leaky], ctx())
    assert plain.response == untouched
    assert leaky.response["response_text"] == "Write to [EMAIL] or call [ID]."
    assert leaky.response["token_logprobs"] == LOGPROBS["token_logprobs"]
    assert d.record()["stats"] == {"responses": 2, "fired": 1, "emails": 1, "ids": 1}
    emails_only = build_defense("pad", {"kind": "pad", "mask": ["email"]})
    s = answered("a@b.org, 555-123-4567")
    emails_only.on_output([s], ctx())
    assert s.response["response_text"] == "[EMAIL], 555-123-4567"
    assert set(d.vocabulary) == {"[EMAIL]", "[ID]"}


def test_the_canary_is_outside_every_placeholder_vocabulary():
    from ragmi.defenses import REGISTRY, defense_class

    canary = "operator_7@acmetest-internal.canary"
    for kind in REGISTRY:
        for word in defense_class(kind).vocabulary:
            assert word not in canary and "acmetest" not in word, (kind, word)


# ---------------------------------------------------------------- LPRAG

DOC = (
    "Dr. Okafor examined Jennifer Walsh on Monday. Walsh asked Kevin McDonald and Michael O'Brien-Smith "
    "to write to jennifer.walsh@stmarys-clinic.org and operator_4@acmetest-internal.canary. "
    "Robert F. Kennedy was cc'd; Wilson disease was ruled out at Brown University."
)
ORIGINAL_NAMES = ["Okafor", "Jennifer", "Walsh", "Kevin", "McDonald", "Michael", "O'Brien", "Robert", "Kennedy"]


def test_lprag_replaces_names_and_domains_in_documents_and_output():
    d = build_defense("lp", {"kind": "lprag"})
    s = QueryState(query_id="q", query="who?", docs=[DOC, "No names in this one."])
    before = hook_digest(s, "content")
    d.on_content([s], ctx())
    assert hook_digest(s, "content") != before
    doc = s.docs[0]
    for name in ORIGINAL_NAMES + ["stmarys-clinic.org", "acmetest-internal.canary"]:
        assert name not in doc, name
    assert s.docs[1] == "No names in this one."
    # Precision: non-person capitalised words stay.
    for word in ("Dr.", "Monday", "Wilson disease", "Brown University", "operator_4@", "jennifer.walsh@"):
        assert word in doc, word
    assert any(n in doc for n in NAMES) and any(dm in doc for dm in DOMAINS)
    # One person, one fixed name: "Jennifer Walsh" and the later "Walsh".
    walsh = fixed_name("Walsh")
    assert doc.count(walsh) >= 2
    assert f"Dr. {fixed_name('Okafor')} examined {walsh} on Monday. {walsh} asked" in doc

    s.response = {"response_text": "Jennifer Walsh (jennifer.walsh@stmarys-clinic.org) saw Dr. Okafor.", **LOGPROBS}
    d.on_output([s], ctx())
    out = s.response["response_text"]
    assert out == (
        f"{walsh} (jennifer.walsh@{substitute('a@stmarys-clinic.org')[0].split('@')[1]}) "
        f"saw Dr. {fixed_name('Okafor')}."
    )
    assert s.response["token_logprobs"] == LOGPROBS["token_logprobs"]
    assert set(d.vocabulary) == set(NAMES) | set(DOMAINS)


def test_lprag_substitution_is_idempotent_and_keeps_fixed_names():
    once = substitute(DOC)[0]
    assert substitute(once)[0] == once
    assert substitute("Alice met Bob at example.com; mail alice@example.org.") == (
        "Alice met Bob at example.com; mail alice@example.org.",
        0,
        0,
    )


@pytest.mark.parametrize(
    "text, names",
    [
        ("Sarah Okonkwo called.", ["Sarah Okonkwo"]),  # unambiguous first name + any capitalised word
        ("Will Smith and Grace Hopper", []),  # documented limit: "Will" is no lexicon first name, "Grace" ambiguous
        ("Grace Smith and Frank Miller", ["Grace Smith", "Frank Miller"]),  # ambiguous first + lexicon last name
        ("May Johnson met Grace.", []),  # ambiguous words alone or before a non-lexicon word stay
        ("Mrs. Patel and Prof. Ana Lima", ["Patel", "Ana Lima"]),
        ("Jennifer. The next day", ["Jennifer"]),
        ("John Smith. Later Smith left.", ["John Smith", "Smith"]),
        ("The Smith report", []),  # a last name alone is not a name
    ],
)
def test_lprag_name_detection(text, names):
    assert [text[a:b] for a, b, _ in find_names(text)] == names
