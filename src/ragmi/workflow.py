"""Glue for the small entry points in ``workflow_scripts/`` (called by Snakemake's ``script:``).

:func:`run_step` sends log lines to the rule's ``log:`` file and to stderr, turns a
:class:`~ragmi.errors.RagmiError` into one clear message (no traceback), removes any partial output
and exits non-zero.  A full disk (``ENOSPC``, ``EDQUOT``) is such an error wherever the job meets it: in
an atomic writer (:mod:`ragmi.io`, which names the file and the space left), in the job's own log
(:class:`StepLog`) or in a library that writes a file directly.  The atomic writers live in
:mod:`ragmi.io` (import them from there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

from . import io
from .errors import DiskFullError, RagmiError

__all__ = ["StepLog", "run_step"]


class StepLog:
    """A job's log lines, to its ``log:`` file and to stderr.  When the log file's disk is full the line
    still reaches stderr, the file is dropped and :class:`~ragmi.errors.DiskFullError` is raised and kept
    in ``disk_full``: :func:`run_step` fails the job even where a caller swallowed the exception (a
    heartbeat task's), since a job whose log is incomplete did not finish cleanly."""

    def __init__(self, path: str | None):
        self.path = path
        self.progress_label: str | None = (
            None  # the answers' progress label, when not the path's (ragmi.progress.job_label)
        )
        self.fh = None
        self.disk_full: DiskFullError | None = None
        self.t0 = time.time()
        if path:
            try:
                self.fh = open(path, "a", encoding="utf-8")
            except OSError as e:
                if not io.is_disk_full(e):
                    raise
                self.disk_full = io.disk_full_error(e, path)

    def __call__(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')} +{time.time() - self.t0:6.1f}s] {msg}"
        print(line, file=sys.stderr, flush=True)
        if self.fh:
            try:
                self.fh.write(line + "\n")
                self.fh.flush()
            except OSError as e:
                if not io.is_disk_full(e):
                    raise
                fh, self.fh = self.fh, None
                with contextlib.suppress(OSError):  # its buffer cannot be written either
                    fh.close()
                self.disk_full = io.disk_full_error(e, self.path)
                raise self.disk_full from e


def _remove(paths):
    for p in paths:
        p = Path(p)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists():
            p.unlink()


# The columns of a generate job's response shard (workflow_scripts/generate.py writes exactly these).
RESPONSE_FILE_COLUMNS = [
    "query_id",
    "response_text",
    "first_token_logprobs",
    "token_logprobs",
    "token_top_logprobs",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "cached",
    "retrieved_ids",
    "retrieval_scores",
    "retrieval_s",
    "response_text_raw",
    "refused",
    "hook_trace",
    "n_docs_truncated",
    "chars_truncated",
    "answer_replaced",
]


def read_responses(files):
    """The response shards of one (target, attack) as one frame; an attack that wrote no query (e.g.
    the attacker LLM parsed no question for any candidate) has no shard: an empty frame."""
    import pandas as pd

    frames = [pd.read_parquet(f) for f in files]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in RESPONSE_FILE_COLUMNS})
    return pd.concat(frames, ignore_index=True)


def control_responses(base, own, queries, candidates):
    """The responses a negative control's attack reads (ragmi.plan.control_base): the base target's
    answers to the reference candidates' queries (the attack's fitted parts come from them, as on the
    base target) and the control's own answers to the evaluation candidates' queries."""
    import pandas as pd

    roles = dict(zip(candidates["doc_id"].astype(str), candidates["role"].astype(str), strict=True))
    role = queries.set_index(queries["query_id"].astype(str))["doc_id"].astype(str).map(roles)
    ref_ids = set(role.index[role == "reference"])
    eval_ids = set(role.index[role == "eval"])
    b = base[base["query_id"].astype(str).isin(ref_ids)]
    o = own[own["query_id"].astype(str).isin(eval_ids)]
    return pd.concat([b, o], ignore_index=True)


def eval_queries(shard, candidates):
    """The rows of a query shard about evaluation candidates (what a negative control answers)."""
    ev = set(candidates.loc[candidates["role"] == "eval", "doc_id"].astype(str))
    return shard[shard["doc_id"].astype(str).isin(ev)].reset_index(drop=True)


def run_step(smk, fn) -> None:
    """Run ``fn(smk, log)``; on failure remove ``smk.output`` and exit 1 with one message."""
    log = StepLog(smk.log[0] if len(smk.log) else None)
    threads = getattr(smk, "threads", None)
    if threads:
        # Bound the math libraries to the job's threads without importing torch in light jobs.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(int(threads))
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
    try:
        if log.disk_full is not None:  # not even the log could be opened
            raise log.disk_full
        fn(smk, log)
        if log.disk_full is not None:  # the log filled where its exception was swallowed
            raise log.disk_full
    except (RagmiError, OSError) as e:
        if isinstance(e, OSError):
            if not io.is_disk_full(e):  # a bug or an unexpected environment: its traceback
                _unexpected(smk, log)
                raise
            # a library that wrote a file itself (not through ragmi.io): the file it names, else the outputs
            e = io.disk_full_error(e, e.filename or (smk.output[0] if len(smk.output) else os.getcwd()))
        _remove(smk.output)
        with contextlib.suppress(DiskFullError):  # the log's own disk may be the full one
            log(f"ERROR: {e}")
        print(f"\nragmi: {e}\n", file=sys.stderr, flush=True)
        sys.exit(1)
    except BaseException:
        _unexpected(smk, log)
        raise


def _unexpected(smk, log) -> None:
    _remove(smk.output)
    with contextlib.suppress(DiskFullError):
        log("unexpected failure:\n" + traceback.format_exc())


def split_options(p) -> dict:
    """The keyword arguments of ``ragmi.split.split_corpus`` / ``split_labelled`` from the params of
    rules split and split_candidates: the dataset's name and what ``split.allow_shrink`` may do."""
    return {"name": p.name, "allow_shrink": p.allow_shrink, "floor": tuple(p.min_reference)}


def write_split(smk, log, name: str, members, nonmembers, candidates, info: dict, requested: str) -> None:
    """The outputs of rules split and split_candidates (members, non-members, candidates, split.json),
    after a loud warning when ``split.allow_shrink`` capped the candidate sets (``requested`` says what
    was asked for)."""
    if info["capped"]:
        bar = "!" * 100
        log(bar)
        log(
            f"WARNING: dataset {name}: SHRUNK to {info['n_reference_per_class']} reference + "
            f"{info['n_eval_per_class']} evaluation candidates per class ({requested}), because "
            "split.allow_shrink is true. Every number of this dataset rests on these smaller sets (see split.json)."
        )
        log(bar)
    io.atomic_write_parquet(members, smk.output.members)
    io.atomic_write_parquet(nonmembers, smk.output.nonmembers)
    io.atomic_write_parquet(candidates, smk.output.candidates)
    io.write_json(info, smk.output.info)


def target_spec(smk, index_dir: str | None = None):
    """The :class:`~ragmi.rag.factory.TargetSpec` of a rule whose ``params.spec`` holds the target's
    config entries (rules/common.smk ``target_spec_params``) and whose inputs hold its files."""
    from .rag.factory import TargetSpec

    p = dict(smk.params.spec)
    inputs = smk.input.keys()
    return TargetSpec(
        **p,
        index_dir=index_dir or (smk.input.index if "index" in inputs else ""),  # a remote target has none
        threads=smk.threads,
        model_dir=smk.input.model if "model" in inputs else None,
        defender_model_dir=smk.input.defender_model if "defender_model" in inputs else None,
    )
