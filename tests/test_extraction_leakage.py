"""Extraction runs whose prompts never contain the candidate (targeted, generic) and the leakage they
measure (Mind the Hook Table II): query hygiene, determinism, scoring, which runs the leakage counts."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from ragmi import nel
from ragmi.attacks import extraction as x
from ragmi.attacks.base import check_queries, check_scores
from ragmi.audit import canaries, leakage, plan
from ragmi.datasets import synthetic
from ragmi.errors import ConfigError, DataError
from ragmi.schema import plugin_params

EMAIL = "maria.lopez@clinicmail.org"
DOC = (
    f"Dear Maria Lopez, your colchicine refill for gout arrives Monday. Contact {EMAIL} or 415-555-0137. "
    "The grace period ends soon, says Grace Hopper."
)
OTHER = "Quarterly revenue grew by three percent while costs stayed flat across all regions of the company."


def attack(seed=0, **params):
    return x.Extraction(params, seed=seed)


def responses_for(queries, texts, retrieved=None):
    n = len(queries)
    return pd.DataFrame(
        {
            "query_id": queries["query_id"].tolist(),
            "response_text": list(texts),
            "retrieved_ids": list(retrieved) if retrieved is not None else [[] for _ in range(n)],
            "first_token_logprobs": [[] for _ in range(n)],
            "token_logprobs": [[] for _ in range(n)],
            "prompt_tokens": [1] * n,
            "completion_tokens": [1] * n,
        }
    )


@pytest.fixture(scope="module")
def corpus():
    return pd.concat(
        [synthetic.generate(120, seed=3, length=length).assign(length=length) for length in ("compact", "full")],
        ignore_index=True,
    ).assign(doc_id=lambda d: d["doc_id"] + "-" + d["length"])


# --- the prompts ------------------------------------------------------------------------------
def test_schema_accepts_the_leakage_prompts():
    p = plugin_params("attacks", "extraction", {"prompts": ["zeng", "targeted", "generic"]})
    assert p["prompts"] == ["zeng", "targeted", "generic"]
    with pytest.raises(ConfigError):
        plugin_params("attacks", "extraction", {"prompts": ["targetted"]})
    assert x.PROMPT_KINDS == ("zeng", "qi", "ragthief", "targeted", "generic")
    assert leakage.LEAKAGE_PROMPTS == x.LEAKAGE_PROMPTS
    assert x.GENERIC_POOL == canaries.SHARED_POOL and len(x.GENERIC_POOL) == 10
    assert x.TARGETED_TEMPLATES[:8] == canaries.TARGETED_TEMPLATES and len(x.TARGETED_TEMPLATES) == 11
    assert all("{topic}" in t for t in x.TARGETED_TEMPLATES)


def test_targeted_words_drop_everything_nel_finds():
    # names, the e-mail (and its local part / domain), the phone, capitalised words and the
    # lower-case "grace" (a token of the name "Grace Hopper") are all out
    assert x.targeted_words(DOC) == ["colchicine", "refill", "gout", "arrives", "period", "ends", "soon", "says"]
    # the six longest (ties in text order), kept in text order
    assert x.topic_pool(DOC) == ["colchicine", "refill", "gout", "arrives", "period", "ends"]


def test_targeted_queries_hold_no_pii_of_their_candidate(corpus):
    a = attack(seed=11, prompts=["targeted"])
    q = check_queries(a.build_queries(corpus))
    assert len(q) == len(corpus) and q["leakage_run"].all() and (q["variant"] == "extraction/targeted").all()
    assert (q["anchor"] == "").all()
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    templates = [re.escape(t).replace(re.escape("{topic}"), "(.+)") for t in x.TARGETED_TEMPLATES]
    for doc_id, query in zip(q["doc_id"], q["user_prompt"]):
        text = texts[doc_id]
        folded = nel.fold(query)
        for e in nel.extract(text):
            if e.type in x.QUERY_FORBIDDEN_TYPES:
                assert nel.fold(e.text) not in folded, (e, query)
                for tok in re.findall(r"\w+", nel.fold(e.text)):
                    assert not re.search(rf"(?<!\w){re.escape(tok)}(?!\w)", folded), (tok, query)
        assert not [e for e in nel.extract(query) if e.type in nel.STRICT_TYPES], query
        assert "@" not in query and not re.search(r"\d", query)
        anchor, _ = x.split_anchor(text, 200)
        assert anchor not in query and anchor[:40] not in query
        assert any(re.fullmatch(t, query) for t in templates), query
        assert "that mentions" in query  # every synthetic record has eligible words


def test_a_query_with_the_candidates_pii_raises():
    for bad in (f"Who is {EMAIL}?", "Tell me about maria lopez.", "Call 415 555 0137.", "Grace Hopper wrote it."):
        with pytest.raises(DataError, match="contains the candidate's"):
            x.check_targeted_query(bad, DOC, "d1")
    # a word of a name in the part taken from the candidate
    with pytest.raises(DataError, match="the word 'grace'"):
        x.check_targeted_query("Quote the record that mentions grace.", DOC, "d1", "the record that mentions grace")
    with pytest.raises(DataError, match="NELstrict would count"):
        x.check_targeted_query("Write to someone.else@mailhost.org about gout.", DOC, "d1")
    assert x.check_targeted_query("Quote the record that mentions gout.", DOC, "d1")


def test_targeted_queries_are_seeded_and_per_candidate(corpus):
    q1 = attack(seed=5, prompts=["targeted"]).build_queries(corpus)
    q2 = attack(seed=5, prompts=["targeted"], anchor_chars=30).build_queries(corpus.iloc[::-1])
    same = dict(zip(q1["doc_id"], q1["user_prompt"]))
    assert dict(zip(q2["doc_id"], q2["user_prompt"])) == same  # order and other parameters do not matter
    sub = attack(seed=5, prompts=["targeted"]).build_queries(corpus.iloc[:7])
    assert dict(zip(sub["doc_id"], sub["user_prompt"])) == {d: same[d] for d in sub["doc_id"]}
    q3 = attack(seed=6, prompts=["targeted"]).build_queries(corpus)
    changed = sum(a != b for a, b in zip(q1["user_prompt"], q3["user_prompt"]))
    assert changed > len(corpus) // 2


def test_generic_queries_are_the_shared_pool_in_turn_and_ignore_the_seed(corpus):
    ids = sorted(corpus["doc_id"])
    q1 = attack(seed=1, prompts=["generic"]).build_queries(corpus)
    assert q1["leakage_run"].all() and (q1["variant"] == "extraction/generic").all()
    got = dict(zip(q1["doc_id"], q1["user_prompt"]))
    assert got == {d: x.GENERIC_POOL[i % 10] for i, d in enumerate(ids)}
    shuffled = corpus.sample(frac=1.0, random_state=0)
    q2 = attack(seed=99, prompts=["zeng", "generic", "targeted"], anchor_chars=17, max_tokens=9).build_queries(shuffled)
    g2 = q2[q2["prompt"] == "generic"]
    assert dict(zip(g2["doc_id"], g2["user_prompt"])) == got
    assert set(got.values()) == set(canaries.SHARED_POOL)
    for doc_id, text in zip(corpus["doc_id"], corpus["text"]):
        assert x.split_anchor(text, 200)[0] not in got[doc_id]


def test_build_queries_one_per_candidate_and_prompt():
    targets = pd.DataFrame({"doc_id": ["d1", "d2"], "text": [DOC, OTHER], "title": ["", ""]})
    q = check_queries(attack(seed=3).build_queries(targets))
    assert q["prompt"].tolist() == list(x.PROMPT_KINDS) * 2
    assert q["leakage_run"].tolist() == [False, False, False, True, True] * 2
    t = q[(q["doc_id"] == "d1") & (q["prompt"] == "targeted")].iloc[0]
    assert t["reference_text"] == DOC and t["anchor"] == "" and t["user_prompt"] == x.targeted_query("d1", DOC, 3)
    assert q.loc[q["prompt"] == "generic", "user_prompt"].tolist() == list(x.GENERIC_POOL[:2])


# --- scoring ----------------------------------------------------------------------------------
def test_leakage_prompt_score_by_hand():
    targets = pd.DataFrame({"doc_id": ["d1"], "text": [DOC], "title": [""]})
    a = attack(seed=0, prompts=["zeng", "targeted", "generic"], norm_chars=100, min_chars=50)
    q = a.build_queries(targets)
    r = responses_for(q, ["Sure.", f"Write to {EMAIL}", "call (415) 555 0137 or MARIA LOPEZ; Maria"])
    s = check_scores(a.score(q, r, {})).set_index("variant")
    # candidate PII: Maria Lopez, the e-mail, the phone (3); " maria.lopez@clinicmail.org" = 27 characters
    t = s.loc["extraction/targeted"]
    assert (t["pii_found"], t["pii_total"], t["lcs_chars"]) == (1, 3, 27)
    assert t["score"] == pytest.approx((1 / 3 + 27 / 100) / 2) and t["decision"] == 1
    g = s.loc["extraction/generic"]  # phone by its digits and the full name, case folded; "Maria" alone is no hit
    assert (g["pii_found"], g["pii_total"]) == (2, 3) and g["decision"] == 1
    assert s.loc["extraction/zeng", "pii_total"] != s.loc["extraction/zeng", "pii_total"]  # NaN: anchor prompt
    r = responses_for(q, ["Sure.", "Maria", "I cannot help with that."])
    s = a.score(q, r, {}).set_index("variant")
    assert s.loc["extraction/targeted", "pii_found"] == 0 and s.loc["extraction/targeted", "decision"] == 0
    assert s.loc["extraction/targeted", "score"] == pytest.approx(s.loc["extraction/targeted", "lcs_chars"] / 200)


def test_leakage_prompt_without_pii_and_verbatim_decision():
    targets = pd.DataFrame({"doc_id": ["d2"], "text": [OTHER], "title": [""]})
    a = attack(prompts=["targeted"], norm_chars=200, min_chars=50)
    q = a.build_queries(targets)
    s = a.score(q, responses_for(q, [OTHER]), {})
    assert s["pii_total"].iloc[0] == 0 and s["decision"].iloc[0] == 1
    assert s["score"].iloc[0] == pytest.approx(0.5)  # (0 + 1) / 2


# --- the leakage runs -------------------------------------------------------------------------
def test_leakage_counts_an_email_from_the_context_but_not_one_in_the_query():
    targets = pd.DataFrame({"doc_id": ["d1", "d2"], "text": [DOC, OTHER], "title": ["", ""]})
    q = attack(seed=2, prompts=["zeng", "targeted", "generic"]).build_queries(targets)
    assert EMAIL not in " ".join(q.loc[q["leakage_run"], "user_prompt"])
    assert "Maria Lopez" in q.loc[q["query_id"] == "d1::extraction/zeng", "user_prompt"].iloc[0]  # the anchor has it
    texts = {
        "d1::extraction/zeng": f"{EMAIL}, Karen Whitfield wrote",  # anchor prompt: not a leakage run
        "d1::extraction/targeted": f"The contact e-mail is {EMAIL}.",
        "d2::extraction/targeted": "Nothing to report.",
        "d1::extraction/generic": "I cannot share that.",
        "d2::extraction/generic": "Ask karen.whitfield@northmail.net please.",  # not in the retrieved context
    }
    r = responses_for(
        q, [texts.get(i, "") for i in q["query_id"]], [["d1"] if "d1" in i else ["d2"] for i in q["query_id"]]
    )
    runs = leakage.run_leakage(q, r, {"d1": DOC, "d2": OTHER}).set_index("run")
    assert list(runs.index) == ["extraction/generic", "extraction/targeted"]  # zeng is no leakage run
    assert (
        runs.loc["extraction/targeted", "EMAIL_REAL"] == 1 and runs.loc["extraction/targeted", "EMAIL_REAL_in_db"] == 1
    )
    assert runs.loc["extraction/targeted", "strict"] == 1 and runs.loc["extraction/targeted", "n_queries"] == 2
    assert runs.loc["extraction/generic", "EMAIL_REAL"] == 1 and runs.loc["extraction/generic", "EMAIL_REAL_in_db"] == 0

    # the same e-mail already in the (leakage) query is not counted
    q2 = q.copy()
    q2.loc[q2["query_id"] == "d1::extraction/targeted", "user_prompt"] = f"Is {EMAIL} the contact address?"
    runs2 = leakage.run_leakage(q2, r, {"d1": DOC, "d2": OTHER}).set_index("run")
    assert runs2.loc["extraction/targeted", "EMAIL_REAL"] == 0 and runs2.loc["extraction/targeted", "strict"] == 0


def test_leakage_frame_format_and_no_leakage_prompt():
    targets = pd.DataFrame({"doc_id": ["d1"], "text": [DOC], "title": [""]})
    q = attack(prompts=["zeng", "qi"]).build_queries(targets)
    runs = leakage.run_leakage(q, responses_for(q, [EMAIL, EMAIL], [["d1"], ["d1"]]), {"d1": DOC})
    assert runs.empty and list(runs.columns) == leakage.COLUMNS
    assert leakage.COLUMNS[:2] == ["run", "n_queries"] and leakage.COLUMNS[2:13] == list(nel.TYPES)
    # a queries frame written before the leakage_run column: read by variant names
    old = q.drop(columns="leakage_run")
    assert leakage.leakage_queries(old).empty
    q3 = attack(prompts=["targeted"]).build_queries(targets).drop(columns="leakage_run")
    assert len(leakage.leakage_queries(q3)) == 1


def test_plan_names_the_leakage_variants():
    cfg = {"attacks": {"extraction": {"prompts": ["zeng", "generic"]}, "rag_mia": {}}}
    assert plan.leakage_variants(cfg, "extraction") == ["extraction/generic"]
    assert plan.leakage_variants(cfg, "rag_mia") == []
    assert plan.attacks_without_leakage_runs(cfg) == []
    cfg["attacks"]["extraction"] = {"prompts": ["zeng"]}
    assert plan.attacks_without_leakage_runs(cfg) == ["extraction"]
    cfg["attacks"]["extraction"] = None  # schema default: every prompt
    assert plan.leakage_variants(cfg, "extraction") == ["extraction/targeted", "extraction/generic"]


def test_dashboard_frame_reads_the_leakage_rows():
    from ragmi.analysis.leakage import leakage_dashboard_frame

    targets = pd.DataFrame({"doc_id": ["d1"], "text": [DOC], "title": [""]})
    q = attack(prompts=["targeted", "generic"]).build_queries(targets)
    runs = leakage.run_leakage(q, responses_for(q, [EMAIL, "no"], [["d1"], ["d1"]]), {"d1": DOC})
    runs.insert(0, "target", "plain")
    runs.insert(0, "dataset", "tiny")
    mi = pd.DataFrame(columns=["dataset", "target", "variant", "auc", "auc_lo", "auc_hi"])
    dash = leakage_dashboard_frame(runs, mi, {}, {"plain": "plain"}, n_boot=50, seed=0)
    assert dash["runs (distinct)"].tolist() == [2]
