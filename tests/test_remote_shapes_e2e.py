"""End to end with Snakemake: a RAG service that speaks Dify's chat-messages API, streamed (a stand-in
on 127.0.0.1 that holds the members of a labelled candidates file and answers from them), attacked
with ``preset: dify``: the answers are read from the event stream, the sources it reports are matched
to the candidates and reach the responses' ``retrieved_ids`` and the table's ``candidate retrieved``
column.  No model runs: RAG-MIA's black box needs none."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from stand_in import SSE_HEADERS, StandIn, sse

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


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("dify-e2e")
    rows = [record(i, True) for i in range(N)] + [record(i, False) for i in range(N)]
    (work / "aud.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    service = dify_service([r for r in rows if r["label"] == "member"])
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
        "targets": {
            "dify": {
                "kind": "remote",
                "datasets": ["aud"],
                "remote": {
                    "preset": "dify",
                    "url": service.url + "/v1",
                    "stream": True,
                    "api_key_env": "AUDIT_DIFY_KEY",
                    # the service's documents are not the candidates' files: match the passages it cites
                    "sources_path": "metadata.retriever_resources.*.content",
                    "sources_match": "text",
                    "backoff_s": 0.0,
                },
            }
        },
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3, "sample": "full_text"}},
        "generation": {"shard_size": 8},
        "metrics": {"n_boot": 100},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "AUDIT_DIFY_KEY": KEY}
    proc = run_snakemake(
        work, "results/tables/attack_comparison.md", "--configfile", str(work / "config.yaml"), env=env
    )
    service.close()
    return work, proc, service


def test_dify_stream_answers_and_sources_reach_the_responses_and_the_table(run):
    work, proc, service = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert service.requests and all(r["body"]["response_mode"] == "streaming" for r in service.requests)
    responses = pd.concat(pd.read_parquet(f) for f in (work / "results/responses/aud/dify/rag_mia").glob("*.parquet"))
    queries = pd.read_parquet(work / "results/queries/aud/rag_mia.parquet")
    df = queries[["query_id", "doc_id"]].merge(responses, on="query_id")
    members = df[df["doc_id"].str.startswith("member")]
    outsiders = df[df["doc_id"].str.startswith("outsider")]
    assert (members["response_text"] == "Yes, it appears.").all() and (outsiders["response_text"] == "No.").all()
    assert all(list(r) == [d] for r, d in zip(members["retrieved_ids"], members["doc_id"]))
    assert all(list(r) == ["member-0"] for r in outsiders["retrieved_ids"])
    table = pd.read_csv(work / "results/tables/attack_comparison.csv")
    row = table[(table["target"] == "dify") & (table["variant"] == "rag_mia/black/t2")].iloc[0]
    assert row["candidate_retrieved_rate"] == 1.0 and row["auc"] == 1.0
    for f in work.rglob("*"):
        if f.is_file() and f.suffix in (".log", ".json", ".parquet", ".csv", ".md", ".txt"):
            assert KEY.encode() not in f.read_bytes(), f
