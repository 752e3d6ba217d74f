"""End to end with Snakemake: a RAG service that speaks Dify's chat-messages API, streamed (a stand-in
on 127.0.0.1 that holds the members of a labelled candidates file and answers from them), attacked
with ``preset: dify``: the answers are read from the event stream, the sources it reports are matched
to the candidates and reach the responses' ``retrieved_ids`` and the table's ``candidate retrieved``
column.  The same service behind MaxKB 2's chat API (``preset: maxkb``, ``tests/stand_in.py``
``MaxKB``): every query in a chat of its own, two HTTP requests per query.  No model runs: RAG-MIA's
black box needs none."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from stand_in import SSE_HEADERS, MaxKB, StandIn, sse

pytestmark = pytest.mark.slow

KEY = "app-e2e-SECRET-7"
N = 6  # members and non-members, each: 3 reference + 3 evaluation


def record(i: int, member: bool) -> dict:
    who = "member" if member else "outsider"
    text = (
        f"Record {who} {i}: the patient reports a {['dry', 'wet', 'night'][i % 3]} cough for {i + 2} days, "
        f"with fever and fatigue; the doctor advises rest, fluids and a visit in {i + 1} weeks."
    )
    label = "member" if member else "non-member"
    return {"doc_id": f"{who}-{i}", "text": text, "label": label, "role": "reference" if i < 3 else "eval"}


def dify_service(members: list[dict]):
    """Retrieves the member whose text the query quotes (else the first member) and says Yes only
    when it found the quoted one: a service that leaks membership, the way RAG-MIA asks it."""

    def reply(n, path, body, headers):
        if path != "/v1/chat-messages" or headers.get("Authorization") != f"Bearer {KEY}":
            return 401, {"code": "unauthorized", "message": "Access token is invalid", "status": 401}, None
        hit = next((m for m in members if m["text"][:60] in body["query"]), None)
        doc = hit or members[0]
        answer = "Yes, it appears." if hit else "No."
        resources = [{"position": 1, "document_name": "upload.txt", "segment_id": "s1", "content": doc["text"][10:90]}]
        events = [{"event": "message", "answer": a} for a in (answer[:3], answer[3:])]
        events.insert(1, {"event": "ping"})
        events.append({"event": "message_end", "metadata": {"retriever_resources": resources, "usage": {}}})
        return 200, sse(events), SSE_HEADERS

    return StandIn(reply)


def maxkb_service(members: list[dict]):
    """The same leaking service behind MaxKB 2's chat API (blocking answers, no sources)."""

    def answer(message, history):
        assert not history, "a query was sent into another query's chat"
        return "Yes, it appears." if any(m["text"][:60] in message for m in members) else "No."

    return MaxKB(KEY, "0196b4c2-3fdf-7941-a6f4-0572478f57f6", 2, answer=answer)


def attack(work, service, remote: dict):
    """Run the attack on ``service`` (the stand-in) through Snakemake; (work, process, service)."""
    cfg = {
        "seed": 3,
        "datasets": {
            "aud": {
                "source": "candidates",
                "path": str(work / "aud.jsonl"),
                "id_column": "doc_id",
                "role_column": "role",
            }
        },
        "split": {"n_reference": 3, "n_eval": 3},
        "targets": {"svc": {"kind": "remote", "datasets": ["aud"], "remote": {**remote, "backoff_s": 0.0}}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3, "sample": "full_text"}},
        "generation": {"shard_size": 8},
        "metrics": {"n_boot": 100},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "AUDIT_SVC_KEY": KEY}
    proc = run_snakemake(
        work, "results/tables/attack_comparison.md", "--configfile", str(work / "config.yaml"), env=env
    )
    service.close()
    return work, proc, service


def candidates(work) -> list[dict]:
    rows = [record(i, True) for i in range(N)] + [record(i, False) for i in range(N)]
    (work / "aud.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [r for r in rows if r["label"] == "member"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("dify-e2e")
    service = dify_service(candidates(work))
    remote = {
        "preset": "dify",
        "url": service.url + "/v1",
        "stream": True,
        "api_key_env": "AUDIT_SVC_KEY",
        # the service's documents are not the candidates' files: match the passages it cites
        "sources_path": "metadata.retriever_resources.*.content",
        "sources_match": "text",
    }
    return attack(work, service, remote)


@pytest.fixture(scope="module")
def run_maxkb(tmp_path_factory):
    work = tmp_path_factory.mktemp("maxkb-e2e")
    service = maxkb_service(candidates(work))
    return attack(work, service, {"preset": "maxkb", "url": service.url, "api_key_env": "AUDIT_SVC_KEY"})


def responses_of(work) -> pd.DataFrame:
    responses = pd.concat(pd.read_parquet(f) for f in (work / "results/responses/aud/svc/rag_mia").glob("*.parquet"))
    queries = pd.read_parquet(work / "results/queries/aud/rag_mia.parquet")
    return queries[["query_id", "doc_id"]].merge(responses, on="query_id")


def test_dify_stream_answers_and_sources_reach_the_responses_and_the_table(run):
    work, proc, service = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert service.requests and all(r["body"]["response_mode"] == "streaming" for r in service.requests)
    df = responses_of(work)
    members = df[df["doc_id"].str.startswith("member")]
    outsiders = df[df["doc_id"].str.startswith("outsider")]
    assert (members["response_text"] == "Yes, it appears.").all() and (outsiders["response_text"] == "No.").all()
    assert (df["answer_replaced"] == False).all()  # noqa: E712 - the dify preset reads message_replace: none came
    assert all(list(r) == [d] for r, d in zip(members["retrieved_ids"], members["doc_id"]))
    assert all(list(r) == ["member-0"] for r in outsiders["retrieved_ids"])
    table = pd.read_csv(work / "results/tables/attack_comparison.csv")
    row = table[(table["target"] == "svc") & (table["variant"] == "rag_mia/black/t2")].iloc[0]
    assert row["candidate_retrieved_rate"] == 1.0 and row["auc"] == 1.0
    for f in work.rglob("*"):
        if f.is_file() and f.suffix in (".log", ".json", ".parquet", ".csv", ".md", ".txt"):
            assert KEY.encode() not in f.read_bytes(), f


def test_maxkb_queries_each_get_a_chat_of_their_own_two_requests_each(run_maxkb):
    work, proc, service = run_maxkb
    assert proc.returncode == 0, proc.stderr[-4000:]
    df = responses_of(work)
    members = df[df["doc_id"].str.startswith("member")]
    outsiders = df[df["doc_id"].str.startswith("outsider")]
    assert (members["response_text"] == "Yes, it appears.").all() and (outsiders["response_text"] == "No.").all()
    assert df["retrieved_ids"].isna().all() and df["answer_replaced"].isna().all()  # MaxKB reports neither
    # one chat per query: as many opens as messages, each chat with exactly one message
    opens = [r for r in service.requests if r["method"] == "GET"]
    posts = [r for r in service.requests if r["method"] == "POST"]
    assert len(posts) == len(df) and len(opens) == len(posts) and len(service.requests) == 2 * len(df)
    assert all(len(m) == 1 for m in service.chats.values())
    log = "".join(f.read_text(errors="replace") for f in (work / "logs").rglob("*") if f.is_file())
    counts = re.findall(r"(\d+) HTTP requests \((\d+) retries, (\d+) of them session opens\)", log)
    assert counts and [sum(int(c[i]) for c in counts) for i in range(3)] == [2 * len(df), 0, len(df)]
    table = pd.read_csv(work / "results/tables/attack_comparison.csv")
    row = table[(table["target"] == "svc") & (table["variant"] == "rag_mia/black/t2")].iloc[0]
    assert row["auc"] == 1.0
    for f in work.rglob("*"):
        if f.is_file() and f.suffix in (".log", ".json", ".parquet", ".csv", ".md", ".txt"):
            data = f.read_bytes()
            assert KEY.encode() not in data, f
            assert not any(c.encode() in data for c in service.chats), f  # no chat id kept
