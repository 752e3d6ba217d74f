"""The loop of an adaptive extraction campaign (docs/campaigns.md): rounds of ``batch``
queries until the budget is spent, each round proposed by the attack after it read the answers of the
rounds before, the whole campaign checkpointed after every round.

What the attack reads of an answer is its text only; the answer's other fields (the retrieved ids, the
token counts) go into the campaign's rows for the coverage metrics, never to the attack.

Checkpoint (a folder beside the output, removed once the output is written): ``rows.parquet`` (every
query asked and its answer) and ``state.json`` (the attack's state after the last whole round, the
number of rows it covers, and the campaign's fingerprint).  A rerun with the same fingerprint goes on
from the last whole round and proposes what the uninterrupted run would have; a round cut short is
asked again (its answers come from the response cache); a different fingerprint (another attack
parameter, budget, batch, seed or target) starts over, saying so.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .io import atomic_write_parquet, atomic_write_text

ROW_COLUMNS = [
    "round",
    "query_index",
    "query",
    "step",
    "attacker_prompt_tokens",
    "attacker_completion_tokens",
    "response_text",
    "prompt_tokens",
    "completion_tokens",
    "cached",
    "retrieved_ids",  # for the coverage metrics only: never shown to the attack
    "judged_by",  # the target's query detectors that judged the query (its hook trace), and
    "flagged_by",  # those that flagged it: the campaign's detectability; never shown to the attack
    "note",
]


def detector_verdicts(trace) -> tuple[list[str], list[str]]:
    """(detectors that judged, detectors that flagged) from an answer's hook trace (a list of hook
    entries, or its JSON), as ragmi.audit.detection reads it."""
    entries = json.loads(trace) if isinstance(trace, str) else list(trace if trace is not None else [])
    judged = [str(t["defense"]) for t in entries if isinstance(t, dict) and "flagged" in t]
    flagged = [str(t["defense"]) for t in entries if isinstance(t, dict) and t.get("flagged")]
    return judged, flagged


def _load(state_dir: Path, fingerprint: str, attack, log) -> pd.DataFrame | None:
    sf, rf = state_dir / "state.json", state_dir / "rows.parquet"
    if not (sf.is_file() and rf.is_file()):
        return None
    saved = json.loads(sf.read_text())
    if saved.get("fingerprint") != fingerprint:
        log("the checkpoint is of another campaign setting (attack, budget, batch, seed or target): starting over")
        return None
    rows = pd.read_parquet(rf).iloc[: int(saved["n_rows"])].reset_index(drop=True)
    attack.load_state(saved["attack"])
    log(f"resuming from the checkpoint: {len(rows)} queries asked in {int(saved['rounds'])} rounds")
    return rows


def _save(state_dir: Path, fingerprint: str, attack, rows: pd.DataFrame, rounds: int) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_parquet(rows, state_dir / "rows.parquet")
    state = {"fingerprint": fingerprint, "n_rows": len(rows), "rounds": rounds, "attack": attack.state()}
    atomic_write_text(json.dumps(state), state_dir / "state.json")


def run_campaign(
    attack,
    ask: Callable[[list[str], int], list[dict]],
    *,
    budget: int,
    batch: int,
    state_dir: str | Path,
    fingerprint: str,
    log: Callable[[str], None] = print,
) -> pd.DataFrame:
    """Every query of the campaign and its answer (:data:`ROW_COLUMNS`).  ``ask(queries, first_index)``
    returns one dict per query with ``response_text`` (and ``prompt_tokens``, ``completion_tokens``,
    ``cached``, ``retrieved_ids`` where the target gives them); ``attack`` has been started."""
    state_dir = Path(state_dir)
    rows = _load(state_dir, fingerprint, attack, log)
    if rows is None:
        rows = pd.DataFrame({c: pd.Series(dtype=object) for c in ROW_COLUMNS})
    done = len(rows)
    rounds = int(rows["round"].max()) + 1 if done else 0
    while done < budget:
        n = min(batch, budget - done)
        proposals = attack.propose(n)
        if len(proposals) != n:
            raise RuntimeError(f"adaptive attack {attack.name} proposed {len(proposals)} queries, not {n}")
        queries = [p.query for p in proposals]
        answers = ask(queries, done)
        texts = [str(a.get("response_text") or "") for a in answers]
        attack.observe(queries, texts)
        verdicts = [detector_verdicts(a.get("hook_trace")) for a in answers]
        new = pd.DataFrame(
            {
                "round": rounds,
                "query_index": range(done, done + n),
                "query": queries,
                "step": [p.step for p in proposals],
                "attacker_prompt_tokens": [int(p.attacker_prompt_tokens) for p in proposals],
                "attacker_completion_tokens": [int(p.attacker_completion_tokens) for p in proposals],
                "response_text": texts,
                "prompt_tokens": [int(a.get("prompt_tokens") or 0) for a in answers],
                "completion_tokens": [int(a.get("completion_tokens") or 0) for a in answers],
                "cached": [bool(a.get("cached", False)) for a in answers],
                "retrieved_ids": [[str(x) for x in (a.get("retrieved_ids") or [])] for a in answers],
                "judged_by": [v[0] for v in verdicts],
                "flagged_by": [v[1] for v in verdicts],
                "note": [json.dumps(p.note, sort_keys=True) for p in proposals],
            }
        )
        rows = pd.concat([rows, new], ignore_index=True) if done else new
        done += n
        rounds += 1
        _save(state_dir, fingerprint, attack, rows, rounds)
        log(
            f"round {rounds}: {done} of {budget} queries asked ({int(new['cached'].sum())} of {n} answers from the cache)"
        )
    return rows[ROW_COLUMNS].reset_index(drop=True)


def clear_checkpoint(state_dir: str | Path) -> None:
    shutil.rmtree(state_dir, ignore_errors=True)
