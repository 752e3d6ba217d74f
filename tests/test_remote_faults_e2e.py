"""End to end with Snakemake: a RAG service that hangs and fails, attacked unattended.

A real threaded HTTP server on 127.0.0.1 plays a RAG service behind a generic JSON API (``api:
json``): it answers every query deterministically from its text (Yes or No and a reference, both
from the query's SHA-256), except that every ``HANG``-th request it receives hangs far past the
client's ``timeout_s`` and every ``GATEWAY``-th is answered ``504`` with a proxy's HTML page.
RAG-MIA's black box (no model runs) is run against it through the real pipeline, then:

* the run completes, and every stored answer (the generate parquets and every response-cache JSON)
  is the server's answer to its query: no timeout or error page is ever stored as an answer;
* the run's request ledger (``results/cache/remote_requests/<target>.<run id>.count``) counts what
  the server saw: ``sent`` its requests, ``http_errors["504"]`` its 504s, ``timeouts`` at least its
  hangs; the job logs name the timeouts;
* a rerun answers from the response cache: the server sees no further request.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import run_snakemake
from stand_in import StandIn

from ragmi.cache import pack_records

pytestmark = pytest.mark.slow

HANG = 5  # every 5th request hangs (until the test ends or 60 s)
GATEWAY = 7  # every 7th is answered 504 with an HTML body
TIMEOUT_S = 2.0
N = 12  # candidates per class: 6 reference + 6 evaluation
GATEWAY_PAGE = (
    b"<html><head><title>504 Gateway Time-out</title></head>"
    b"<body><h1>504 Gateway Time-out</h1><hr><center>nginx</center></body></html>"
)


def answer_of(query: str) -> str:
    """The service's answer to ``query``: Yes or No and a reference, both from its hash."""
    h = hashlib.sha256(query.encode("utf-8")).hexdigest()
    ref = h[1:13].translate(str.maketrans("0123456789abcdef", "ghijklmnopqrstuv"))  # no digits: no "504"
    return f"{'Yes' if int(h[0], 16) < 8 else 'No'}, reference {ref}."


class FaultyService:
    """``POST /ask`` ``{"question": …}`` -> ``{"answer": …}`` (tests/stand_in.py's endpoint), but request n
    hangs when n % HANG == 0 and is answered 504 (HTML) when n % GATEWAY == 0 (n counts the requests
    received, from 1)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.hangs = 0
        self.gateway = 0
        self.queries: list[str] = []  # the queries answered 200
        self.stand_in = StandIn(self.reply)
        self.url = self.stand_in.url

    @property
    def received(self) -> int:
        return len(self.stand_in.requests)

    def reply(self, n, path, body, headers):
        hang, gateway = n % HANG == 0, n % GATEWAY == 0 and n % HANG != 0
        with self.lock:
            self.hangs += hang
            self.gateway += gateway
            if not (hang or gateway):
                self.queries.append(body["question"])
        if hang:
            self.release.wait(60)  # the client gave up long ago: what follows reaches no one
            return 504, b"", {"Content-Type": "text/plain"}
        if gateway:
            return 504, GATEWAY_PAGE, {"Content-Type": "text/html"}
        return 200, {"answer": answer_of(body["question"]), "usage": {"input": 7, "output": 3}}, None

    def close(self):
        self.release.set()  # the hanging handlers return
        self.stand_in.close()


def record(i: int, member: bool) -> dict:
    who = "member" if member else "outsider"
    text = f"Record {who} {i}: shipment {1000 + 7 * i} left the {['north', 'east', 'west'][i % 3]} depot on day {i}."
    label = "member" if member else "non-member"
    return {"doc_id": f"{who}-{i}", "text": text, "label": label, "role": "reference" if i < N // 2 else "eval"}


METRICS = "results/metrics/aud/svc/rag_mia.csv"


def pipeline(work: Path, *targets: str):
    env = {k: v for k, v in os.environ.items() if k != "RAGMI_RUN_ID"}  # each invocation is a run of its own
    return run_snakemake(work, *(targets or [METRICS]), "--configfile", str(work / "config.yaml"), env=env)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("faults-e2e")
    rows = [record(i, True) for i in range(N)] + [record(i, False) for i in range(N)]
    (work / "aud.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    service = FaultyService()
    remote = {
        "api": "json",
        "url": service.url + "/ask",
        "body": {"question": "{query}"},
        "answer_path": "answer",
        "timeout_s": TIMEOUT_S,
        "max_retries": 6,
        "backoff_s": 0.05,
        "max_backoff_s": 0.2,
        "concurrency": 2,
        "max_requests": 1000,
    }
    cfg = {
        "seed": 5,
        "datasets": {
            "aud": {
                "source": "candidates",
                "path": str(work / "aud.jsonl"),
                "id_column": "doc_id",
                "role_column": "role",
            }
        },
        "split": {"n_reference": N // 2, "n_eval": N // 2},
        "targets": {"svc": {"kind": "remote", "datasets": ["aud"], "remote": remote}},
        "attacks": {"rag_mia": {"templates": [2], "ensemble_size": 5, "cv_folds": 3, "sample": "full_text"}},
        "generation": {"shard_size": 12},
        "metrics": {"n_boot": 100},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    try:
        proc = pipeline(work)
        yield work, proc, service
    finally:
        service.close()


def responses(work: Path) -> pd.DataFrame:
    files = sorted((work / "results/responses/aud/svc/rag_mia").glob("*.parquet"))
    got = pd.concat(pd.read_parquet(f) for f in files)
    queries = pd.read_parquet(work / "results/queries/aud/rag_mia.parquet")
    return queries[["query_id", "user_prompt"]].merge(got, on="query_id", validate="one_to_one")


def ledgers(work: Path) -> list[Path]:
    return sorted((work / "results/cache/remote_requests").glob("svc.*.count"))


def strings(doc) -> list[str]:
    """Every string in a JSON document (its numbers, such as a latency, are not text)."""
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in [k, *strings(v)]]
    if isinstance(doc, list):
        return [s for v in doc for s in strings(v)]
    return []


BAD = ("504", "<html", "gateway", "time-out", "timeout", "timed out", "no answer within")


def test_run_completes_and_stores_only_the_service_answers(run):
    work, proc, service = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert service.hangs >= 3 and service.gateway >= 3  # the faults did happen
    df = responses(work)
    assert len(df) == 2 * N and not df["cached"].any()
    expected = [answer_of(q) for q in df["user_prompt"]]
    assert df["response_text"].tolist() == expected
    assert set(service.queries) == set(df["user_prompt"])  # what the service answered 200
    for text in df["response_text"]:
        assert not any(b in text.lower() for b in BAD), text
    records = list(pack_records(work / "results/cache/responses"))  # every record, whole or not
    cached = [r.data.decode("utf-8", "replace") for r in records]
    assert len(cached) == 2 * N and all(len(r.data) == r.length for r in records)
    assert sorted(json.loads(c)["response"]["response_text"] for c in cached) == sorted(expected)
    for c in cached:  # the answer each record holds (its request names the URL, whose port may hold "504")
        for text in strings(json.loads(c)["response"]):
            assert not any(b in text.lower() for b in BAD), c[:300]
    metrics = pd.read_csv(work / METRICS).set_index("variant")
    assert metrics.loc["rag_mia/black/t2", "n_members"] == N // 2 and metrics["auc"].notna().sum() == 1


def test_ledger_counts_what_the_service_saw(run):
    work, proc, service = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    (ledger,) = ledgers(work)  # one file for the run's shard jobs
    counts = json.loads(ledger.read_text())
    assert counts["sent"] == service.received
    assert counts["http_errors"].get("504", 0) == service.gateway and set(counts["http_errors"]) <= {"504"}
    assert counts["timeouts"] >= service.hangs
    assert counts["answered"] == 2 * N and counts["network_errors"] == 0
    assert counts["answered"] + counts["timeouts"] + counts["http_errors"]["504"] == counts["sent"]
    assert counts["retries"] == counts["sent"] - 2 * N and counts["session_opens"] == 0
    # each job's log line gives its share, the timeouts named
    logs = " ".join(p.read_text() for p in (work / "logs/generate/aud/svc/rag_mia").glob("*.log"))
    said = re.findall(r"(\d+) HTTP requests \((\d+) retries\): (\d+) answered, (\d+) timeouts \(no answer within", logs)
    assert len(said) == 2  # 24 queries, shards of 12
    assert [sum(int(x[i]) for x in said) for i in range(4)] == [
        counts["sent"],
        counts["retries"],
        counts["answered"],
        counts["timeouts"],
    ]
    per_job_504 = [int(n) for n in re.findall(r"HTTP errors \(504: (\d+)\)", logs)]
    assert sum(per_job_504) == service.gateway
    assert str(ledger.relative_to(work)) in logs


def test_rerun_answers_from_the_cache(run):
    work, proc, service = run
    assert proc.returncode == 0, proc.stderr[-4000:]
    before = service.received
    first = responses(work)
    shards = sorted((work / "results/responses/aud/svc/rag_mia").glob("*.parquet"))
    for f in shards:
        f.unlink()
    again = pipeline(work, *(str(f.relative_to(work)) for f in shards))
    assert again.returncode == 0, again.stderr[-4000:]
    assert service.received == before  # no request sent
    assert len(ledgers(work)) == 1  # the rerun sent nothing, so it has no ledger
    df = responses(work)
    assert df["cached"].all() and df["response_text"].tolist() == first["response_text"].tolist()
