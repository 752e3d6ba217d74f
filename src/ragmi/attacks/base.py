"""The one small interface every membership-inference attack implements.

Threat model (enforced by the workflow, see ``workflow_scripts/``): an attack sees only

* the target documents it wants to test (``doc_id``, ``text``, ``title``), without their labels,
* the labels of the *reference* documents (the adversary's own calibration data), and
* the target's answers to the queries the attack wrote: ``response_text``, and in gray-box
  settings ``first_token_logprobs`` / ``token_logprobs``.

Attack modules never import ``ragmi.target`` (retriever, index, generator, defenses).

Data frames exchanged
---------------------
targets      doc_id, text, title                      (one row per document under test)
queries      query_id, doc_id, user_prompt, max_tokens, top_logprobs, [attack-specific columns]
responses    query_id, response_text, first_token_logprobs, token_logprobs,
             prompt_tokens, completion_tokens         (one row per query)
scores       doc_id, variant, score [, decision]      (higher score = more likely member;
                                                        ``decision`` in {0,1} for point attacks)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Mapping

import pandas as pd

QUERY_COLUMNS = ["query_id", "doc_id", "user_prompt", "max_tokens", "top_logprobs"]
RESPONSE_COLUMNS = [
    "query_id",
    "response_text",
    "first_token_logprobs",  # list of {"token": str, "logprob": float}, top-K of the 1st token
    "token_logprobs",  # list of float: log-prob of each generated token (empty if not asked)
    "prompt_tokens",
    "completion_tokens",
]
SCORE_COLUMNS = ["doc_id", "variant", "score", "decision"]


class Attack(ABC):
    """Subclasses set ``name`` and implement :meth:`build_queries` and :meth:`score`."""

    name = "attack"

    def __init__(self, params: Mapping | None = None):
        self.params = dict(params or {})

    @abstractmethod
    def build_queries(self, targets: pd.DataFrame) -> pd.DataFrame:
        """Write the attack's queries for every target document (offline, no model call)."""

    @abstractmethod
    def score(
        self,
        queries: pd.DataFrame,
        responses: pd.DataFrame,
        reference_labels: Mapping[str, int],
    ) -> pd.DataFrame:
        """Turn the target's responses into one score per (document, variant)."""


def check_queries(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"queries frame lacks columns {missing}")
    if df["query_id"].duplicated().any():
        raise ValueError("query_id values must be unique")
    return df


def check_scores(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ["doc_id", "variant", "score"] if c not in df.columns]
    if missing:
        raise ValueError(f"scores frame lacks columns {missing}")
    if "decision" not in df.columns:
        df = df.assign(decision=pd.NA)
    return df[SCORE_COLUMNS + [c for c in df.columns if c not in SCORE_COLUMNS]]
