"""IA (interrogation attack): answer parsing, offline generation with a fake attacker LLM, the paper's
score with the IDK penalty and the repository's plain accuracy, all computed by hand."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ragmi.attacks.ia import IA, IA_EXAMPLE_QUESTIONS, SHADOW_PROMPT_REPO, repo_label
from ragmi.attacks.questions import parse_questions
from ragmi.errors import ConfigError


@pytest.mark.parametrize(
    "text,label",
    [
        ("Yes, it is.", "yes"),
        ("I don't know.", "unknown"),
        ("There is no information.", "no"),
        ("Unclear", "unknown"),
    ],
)
def test_repo_label_is_the_repository_regex(text, label):
    assert repo_label(text) == label


def test_question_parser_for_yes_no_questions():
    out = (
        "1. Are flavones and flavonols shown to antagonistically suppress the transformation of AhR induced by dioxins?\n"
        "2. Does vitamin D reduce hip fractures? Yes\n"
        "3. The trial lasted 18 months.\n"
        "4. Were 3,270 women enrolled? No"
    )
    qs, rule = parse_questions(out, 30, require_question_mark=True, exclude=IA_EXAMPLE_QUESTIONS)
    assert rule == "numbered"
    assert qs == ["Does vitamin D reduce hip fractures?", "Were 3,270 women enrolled?"]


# --------------------------------------------------------------------------------------------------
# fake attacker LLM
# --------------------------------------------------------------------------------------------------

DOC = (
    "Daily supplementation with 800 IU of vitamin D reduced hip fractures by 30 percent. "
    "The trial enrolled 3,270 women in French nursing homes."
)
QS = [
    "Does vitamin D reduce hip fractures?",
    "Was the dose 400 IU?",
    "Did the trial take place in Spain?",
    "Were women enrolled?",
]
SHADOW = {QS[0]: "Yes.", QS[1]: "No.", QS[2]: "I don't know.", QS[3]: "Yes"}


class FakeTools:
    def __init__(self, questions: dict, shadow: dict, summary: str = "Vitamin D and hip fractures in nursing homes"):
        self.questions, self.shadow, self.summary = questions, shadow, summary
        self.calls, self.logs = [], []

    def chat(self, prompts, max_tokens, temperature=0.0):
        self.calls.append((len(prompts), max_tokens, temperature))
        out = []
        for msgs in prompts:
            c = msgs[-1]["content"]
            if "yes/no questions as queries" in c:
                text = next(v for k, v in self.questions.items() if k in c.split("Here is the Corpus:")[1])
            elif "topic-focused description" in c:
                text = self.summary
            else:
                text = next(v for k, v in self.shadow.items() if k.rstrip("?") in c)
            out.append({"text": text, "prompt_tokens": 100, "completion_tokens": 3, "model": "fake-llm"})
        return out

    def log(self, msg):
        self.logs.append(msg)


CANDIDATES = pd.DataFrame(
    {"doc_id": ["d1", "d2"], "title": ["Vitamin D", ""], "text": [DOC, "Bananas are yellow and rich in potassium."]}
)
QUESTION_OUTPUT = {DOC: "\n".join(f"{i}. {q}" for i, q in enumerate(QS, 1)), "Bananas": "Sorry, I cannot."}


def prepared(params, tmp_path=None):
    attack = IA(params)
    tools = FakeTools(QUESTION_OUTPUT, SHADOW)
    mat = attack.prepare(CANDIDATES, tools)
    if tmp_path is not None:
        mat.to_parquet(tmp_path / "m.parquet")
        mat = pd.read_parquet(tmp_path / "m.parquet")
    return attack, tools, mat


def test_defaults():
    assert IA({}).params["n_questions"] == 30 and IA({}).params["lambda_idk"] == 5.0
    assert IA({"variant": "repo"}).params["n_questions"] == 15
    assert IA({"variant": "repo", "n_questions": 7}).params["n_questions"] == 7
    p = IA({}).params
    assert p["budgets"] == [1, 3, 5, 10, 30] and p["max_tokens"] == 5
    assert p["summary_prefix"] == "I want to ask about "
    assert p["answer_instruction"] == "Please answer with 'Yes,' 'No,' or 'I don't know'"
    with pytest.raises(ConfigError, match="attacks.ia.variant"):
        IA({"variant": "other"})
    with pytest.raises(ConfigError, match="attacks.ia.n_questions"):
        IA({"n_questions": 0})


def test_prepare_paper_keeps_prompts_and_builds_queries(tmp_path):
    attack, tools, mat = prepared({"n_questions": 4}, tmp_path)
    # questions (1000 tokens, T=0.2), summaries (64, 0.3), then one shadow call per parsed question (50, 0.1)
    assert tools.calls == [(2, 1000, 0.2), (2, 64, 0.3), (4, 50, 0.1)]
    for col in [
        "prompt",
        "llm_model",
        "llm_max_tokens",
        "llm_temperature",
        "llm_prompt_tokens",
        "llm_completion_tokens",
    ]:
        assert mat[col].notna().all(), col
    assert (mat["llm_model"] == "fake-llm").all() and (mat["llm_prompt_tokens"] == 100).all()
    q = mat[mat["kind"] == "questions"].set_index("doc_id")
    assert list(q["n_questions_parsed"]) == [4, 0] and list(q["parse_failed"]) == [False, True]
    assert "Generate 4 yes/no questions based on this text." in json.loads(q.loc["d1", "prompt"])[0]["content"]
    sh = mat[mat["kind"] == "shadow"].sort_values("item")
    assert list(sh["parsed"]) == ["yes", "no", "idk", "yes"] and list(sh["item"]) == [0, 1, 2, 3]
    content = json.loads(sh["prompt"].iloc[0])[0]["content"]
    assert content.startswith("You are a helpful assistant. Based solely on the provided contexts")
    assert f"Contexts: Vitamin D {DOC} \n\nQuestion: Does vitamin D reduce hip fractures? Answer only with" in content
    assert (sh["llm_max_tokens"] == 50).all() and (sh["llm_temperature"] == 0.1).all()

    queries = attack.build_queries(CANDIDATES, mat)
    assert list(queries["doc_id"]) == ["d1"] * 4
    assert queries["user_prompt"].iloc[0] == (
        "I want to ask about Vitamin D and hip fractures in nursing homes. "
        "Does vitamin D reduce hip fractures? "
        "Please answer with 'Yes,' 'No,' or 'I don't know'"
    )
    assert (queries["max_tokens"] == 5).all() and (queries["top_logprobs"] == 0).all()
    assert list(queries["shadow"]) == ["yes", "no", "idk", "yes"]
    bare = IA({"n_questions": 4, "summary_prefix": "", "answer_instruction": ""}).build_queries(CANDIDATES, mat)
    assert bare["user_prompt"].iloc[1] == "Vitamin D and hip fractures in nursing homes. Was the dose 400 IU?"


RESPONSES = ["Yes.", "I don't know.", "I don't know", "No"]  # -> yes, idk, idk, no


def responses_for(queries, texts):
    """Question i (query id ``{doc}::q{i}``) is answered with ``texts[i]``."""
    return pd.DataFrame(
        {
            "query_id": queries["query_id"],
            "response_text": [texts[int(qid.rsplit("q", 1)[1])] for qid in queries["query_id"]],
        }
    )


def test_paper_score_by_hand():
    attack, _, mat = prepared({"n_questions": 4})
    queries = attack.build_queries(CANDIDATES, mat)
    sc = attack.score(queries, responses_for(queries, RESPONSES), {}, mat).set_index(["doc_id", "variant"])
    assert set(v for _, v in sc.index) == {"ia/paper", "ia/paper/n=1", "ia/paper/n=3"}
    # q0: yes = yes -> 1; q1: idk vs no -> -5; q2: idk = idk -> 1 - 5; q3: no vs yes -> 0
    assert sc.loc[("d1", "ia/paper"), "score"] == pytest.approx((1 - 5 - 4 + 0) / 4)
    assert sc.loc[("d1", "ia/paper/n=1"), "score"] == pytest.approx(1.0)
    assert sc.loc[("d1", "ia/paper/n=3"), "score"] == pytest.approx((1 - 5 - 4) / 3)
    assert sc.loc[("d1", "ia/paper"), "n_correct"] == 2 and sc.loc[("d1", "ia/paper"), "n_idk"] == 2
    # d2 had no parsable question: no query, the lowest possible score, and counted
    assert sc.loc[("d2", "ia/paper"), "score"] == -5.0
    assert bool(sc.loc[("d2", "ia/paper"), "no_queries"]) and bool(sc.loc[("d2", "ia/paper"), "parse_failed"])

    lam1 = IA({"n_questions": 4, "lambda_idk": 1.0})
    assert lam1.score(queries, responses_for(queries, RESPONSES), {}, mat).set_index(["doc_id", "variant"]).loc[
        ("d1", "ia/paper"), "score"
    ] == pytest.approx((1 - 1 + 0 + 0) / 4)


def test_skip_idk_shadow_drops_questions_before_querying():
    attack, _, mat = prepared({"n_questions": 4, "skip_idk_shadow": True})
    queries = attack.build_queries(CANDIDATES, mat)
    assert list(queries["question"]) == [QS[0], QS[1], QS[3]] and list(queries["ask_order"]) == [0, 1, 2]
    sc = attack.score(queries, responses_for(queries, RESPONSES), {}, mat).set_index(["doc_id", "variant"])
    assert sc.loc[("d1", "ia/paper"), "score"] == pytest.approx((1 - 5 + 0) / 3)
    assert sc.loc[("d1", "ia/paper"), "n_queries"] == 3


def test_unparsed_answers_never_match():
    shadow = {QS[0]: "Perhaps", QS[1]: "No.", QS[2]: "Yes", QS[3]: "Yes"}
    attack = IA({"n_questions": 4})
    mat = attack.prepare(CANDIDATES, FakeTools(QUESTION_OUTPUT, shadow))
    queries = attack.build_queries(CANDIDATES, mat)
    sc = attack.score(queries, responses_for(queries, ["It depends", "No", "No", "Yes"]), {}, mat)
    # other vs other does not count; no = no -> 1; no vs yes -> 0; yes = yes -> 1
    assert sc.set_index(["doc_id", "variant"]).loc[("d1", "ia/paper"), "score"] == pytest.approx(2 / 4)


def test_repo_variant_plain_accuracy_with_unknown_equal_unknown(tmp_path):
    shadow = {QS[0]: "Yes, it is.", QS[1]: "I don't know.", QS[2]: "There is no information.", QS[3]: "Unclear"}
    attack = IA({"variant": "repo", "n_questions": 4})
    tools = FakeTools(QUESTION_OUTPUT, shadow)
    mat = attack.prepare(CANDIDATES, tools)
    assert tools.calls == [(2, 1000, 0.2), (4, 50, 0.1)]  # no summary in the repository's attack
    assert "summary" not in set(mat["kind"])
    sh = mat[mat["kind"] == "shadow"].sort_values("item")
    assert list(sh["parsed"]) == ["yes", "unknown", "no", "unknown"]
    assert json.loads(sh["prompt"].iloc[0])[0]["content"] == SHADOW_PROMPT_REPO.replace("[question]", QS[0]).replace(
        "[context]", DOC
    )
    queries = attack.build_queries(CANDIDATES, mat)
    assert list(queries["user_prompt"]) == QS  # bare questions
    # answers: no (wrong), unknown = unknown (right), no = no (right), unknown = unknown (right)
    resp = responses_for(queries, ["No", "I don't know", "No information", "Maybe"])
    sc = attack.score(queries, resp, {}, mat).set_index(["doc_id", "variant"])
    assert set(v for _, v in sc.index) == {"ia/repo", "ia/repo/n=1", "ia/repo/n=3"}
    assert sc.loc[("d1", "ia/repo"), "score"] == pytest.approx(0.75)
    assert sc.loc[("d1", "ia/repo/n=1"), "score"] == 0.0
    assert sc.loc[("d1", "ia/repo/n=3"), "score"] == pytest.approx(2 / 3)
    assert sc.loc[("d2", "ia/repo"), "score"] == 0.0 and bool(sc.loc[("d2", "ia/repo"), "no_queries"])


def test_all_or_nothing():
    out = {DOC: "1. Does vitamin D reduce hip fractures?\n2. Was the dose 400 IU?", "Bananas": "nothing"}
    attack = IA({"n_questions": 4, "all_or_nothing": True})
    mat = attack.prepare(CANDIDATES, FakeTools(out, SHADOW))
    assert attack.build_queries(CANDIDATES, mat).empty
    lenient = IA({"n_questions": 4})
    assert len(lenient.build_queries(CANDIDATES, mat)) == 2
    sc = attack.score(
        attack.build_queries(CANDIDATES, mat), pd.DataFrame(columns=["query_id", "response_text"]), {}, mat
    )
    assert (sc["score"] == -5.0).all() and sc["no_queries"].all()
    assert list(sc.drop_duplicates("doc_id")["n_questions_parsed"]) == [2, 0]
