"""The one small interface every membership-inference attack implements.

Threat model (enforced by the workflow, see ``workflow_scripts/``): an attack sees only

* the candidate documents it wants to test (``doc_id``, ``text``, ``title``, ``human_turn``), without
  their labels (:func:`attack_candidates`),
* the labels of the *reference* documents (the adversary's own calibration data),
* its own tools: an *attacker LLM* (any OpenAI-compatible endpoint, the local served model by
  default) for offline query generation, and local models of its own (:mod:`ragmi.attacks.models`:
  proxy LM, embedder, NLI), and
* the target's answers to the queries the attack wrote: ``response_text``, and in gray-box
  settings ``first_token_logprobs`` / ``token_top_logprobs`` (top-K alternatives of the first /
  every generated token) and ``token_logprobs`` (:data:`RESPONSE_COLUMNS`, :func:`attack_responses`).

Attack modules never import ``ragmi.rag`` (retriever, index, generator, defenses).

Parameters: ``Attack(params, seed=..., logprobs=...)`` takes the attack's config entry; every key gets its
default from ``config/schema.yaml`` (``attacks.<name>``) and is validated there (once: the workflow passes
the validated config's entry with ``validated=True``), so attacks read ``self.params["key"]`` and
``self.seed``.

Life cycle, each step a Snakemake rule with parquet in between:

1. ``prepare(candidates, tools)``   offline query generation (summaries, questions, perturbations,
                                    masks, shadow answers) -> *materials* frame, frozen as parquet.
                                    Only for attacks with ``needs_prepare = True``.
2. ``build_queries(candidates, materials)`` -> queries frame (no model call).
3. the target RAG system answers every query -> responses frame.
4. ``score(queries, responses, reference_labels, materials, tools)`` -> scores frame.

Data frames exchanged
---------------------
candidates   doc_id, text, title, human_turn          (one row per candidate document; human_turn is
                                                        the human part of a dialogue document, "" for
                                                        other corpora: ragmi.datasets)
materials    doc_id, ... attack-specific; rows written by the attacker LLM also keep ``prompt``,
             ``llm_model``, ``llm_max_tokens``, ``llm_temperature``, ``llm_prompt_tokens``,
             ``llm_completion_tokens`` (see :meth:`AttackerTools.chat`)
queries      query_id, doc_id, user_prompt, max_tokens, top_logprobs, [attack-specific columns]
responses    query_id, response_text, first_token_logprobs, token_logprobs, token_top_logprobs,
             prompt_tokens, completion_tokens         (one row per query; token_top_logprobs: the
                                                        top-K alternatives of every generated token)
scores       doc_id, variant, score [, decision]      (higher score = more likely member;
                                                        ``decision`` in {0,1} for point attacks;
                                                        extra per-row columns allowed, e.g. no_answer)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol

import pandas as pd

from ..schema import plugin_params
from .work import AttackWork

CANDIDATE_COLUMNS = ["doc_id", "text", "title", "human_turn"]  # what an attack sees of a candidate
QUERY_COLUMNS = ["query_id", "doc_id", "user_prompt", "max_tokens", "top_logprobs"]
RESPONSE_COLUMNS = [
    "query_id",
    "response_text",
    "first_token_logprobs",  # list of {"token": str, "logprob": float}, top-K of the 1st token
    "token_logprobs",  # list of float: log-prob of each generated token
    "token_top_logprobs",  # list per generated token of its top-K {"token", "logprob"} ([] without K)
    "prompt_tokens",
    "completion_tokens",
]
SCORE_COLUMNS = ["doc_id", "variant", "score", "decision"]

# A scores frame lists each skipped variant in one row: doc_id null, score NaN, this column = why.
SKIPPED_COLUMN = "skipped"
NO_LOGPROBS_NOTE = "skipped: the target returns no log-probabilities (gray-box variant)"


class AttackerTools(Protocol):
    """What the workflow hands an attack for offline query generation and scoring."""

    def chat(self, prompts: list[list[dict]], max_tokens: int, temperature: float = 0.0) -> list[dict]:
        """Ask the attacker LLM; one dict per prompt with ``text``, ``prompt_tokens``,
        ``completion_tokens`` and ``model`` (cached: the same prompt is never sent twice)."""

    def local_model_path(self, name: str) -> str:
        """A local folder (or HF id) for a model the attacker runs itself (e.g. MBA's proxy LM);
        ``"attacker"`` names the attacker LLM's own weights when they are local."""

    def log(self, msg: str) -> None: ...


class Attack(ABC):
    """Subclasses set ``name`` and implement :meth:`build_queries` and :meth:`score`."""

    name = "attack"
    needs_prepare = False
    channels = ("text",)  # what the attack reads of the target's responses (ragmi.audit.inventory)
    extraction = False  # its responses are also scored for generated-text leakage (ragmi.audit.leakage)
    # Scores its reference candidates out of fold (a classifier trained on the reference set): the split
    # needs at least params["cv_folds"] reference members and non-members (ragmi.plan.fold_requirements).
    out_of_fold = False
    # The leakage dashboard's membership attack when audit.mi_attack is unset: the configured attack with
    # the lowest rank (None: never chosen; ragmi.audit.plan.mi_attack).
    audit_mi_rank: int | None = None

    @classmethod
    def work(cls, p: Mapping, doc_chars: float) -> AttackWork:
        """What the attack sends per candidate, from its validated parameters ``p`` and a typical
        document's length (:mod:`ragmi.attacks.work`, read by ``tools/eta.py``).  This default, for an
        attack that declares none: one query quoting the candidate, a 64-token answer, said to be rough."""
        return AttackWork(1, 100 + doc_chars, 48, 64, rough=True)

    @classmethod
    def model_references(cls, params: Mapping) -> list[tuple[str, str]]:
        """(parameter, kind) of every model the attack's validated ``params`` name, checked before any
        job runs (ragmi.config): kind ``model`` (a local folder or a plausible Hugging Face id),
        ``embedder`` (also a packaged embedder) or ``attacker-weights`` (the parameter asks for the
        attacker generator's own weights, which an openai endpoint cannot give)."""
        return []

    @classmethod
    def ablation_sweep(cls, variant: str) -> str | None:
        """The sweep of the attack's ablation table a variant belongs to (None: not in it); sweeps
        are ordered as :attr:`ablation_sweeps` lists them (ragmi.report.comparison.ablation_frame)."""
        return None

    ablation_sweeps: tuple[str, ...] = ()

    @classmethod
    def variant_channels(cls, variant: str) -> tuple[str, ...]:
        """The response channels one of the attack's variants reads."""
        return tuple(cls.channels)

    def __init__(self, params: Mapping | None = None, *, seed: int = 0, logprobs: bool = True, validated: bool = False):
        """``params``: the attack's config entry (``attacks.<name>``); ``validated``: it comes from a
        validated configuration (defaults filled, values checked), so it is used as given instead of
        being validated again.  ``seed``: the run's seed.  ``logprobs`` False: the target returns no
        log-probabilities (a remote or python target with ``logprobs: false``), so the gray-box variants
        are listed as skipped, not computed."""
        self.seed = int(seed)
        self.logprobs = bool(logprobs)
        self.skipped_variants: list[str] = []
        self.params = dict(params) if validated else plugin_params("attacks", self.name, dict(params or {}))

    def prepare(self, candidates: pd.DataFrame, tools: AttackerTools) -> pd.DataFrame:
        """Offline query generation; attacks with ``needs_prepare = True`` override it."""
        raise TypeError(f"attack {self.name} has no offline query-generation step")

    @abstractmethod
    def build_queries(self, candidates: pd.DataFrame, materials: pd.DataFrame | None = None) -> pd.DataFrame:
        """Write the attack's queries for every candidate document (no model call)."""

    @abstractmethod
    def score(
        self,
        queries: pd.DataFrame,
        responses: pd.DataFrame,
        reference_labels: Mapping[str, int],
        materials: pd.DataFrame | None = None,
        tools: AttackerTools | None = None,
    ) -> pd.DataFrame:
        """Turn the target's responses into one score per (document, variant)."""


def attack_candidates(candidates: pd.DataFrame) -> pd.DataFrame:
    """The candidates as an attack sees them: :data:`CANDIDATE_COLUMNS` only (labels and roles stay
    hidden); a frame without one of them (written by an older ragmi) is refused."""
    missing = [c for c in CANDIDATE_COLUMNS if c not in candidates.columns]
    if missing:
        raise ValueError(f"candidates frame lacks columns {missing}; rerun the split (results/split/)")
    return candidates[CANDIDATE_COLUMNS].reset_index(drop=True)


def attack_responses(responses: pd.DataFrame) -> pd.DataFrame:
    """The responses as an attack sees them: :data:`RESPONSE_COLUMNS` only (never the retrieved ids,
    the raw pre-defense text or the hook trace); responses written by an older ragmi, without one of
    them, are refused."""
    missing = [c for c in RESPONSE_COLUMNS if c not in responses.columns]
    if missing:
        raise ValueError(f"responses lack columns {missing}; regenerate them (results/responses/)")
    return responses[RESPONSE_COLUMNS]


def merge_responses(queries: pd.DataFrame, responses: pd.DataFrame, columns=None) -> pd.DataFrame:
    """The queries joined with their responses (all response columns, or ``columns``); every query
    must have been answered."""
    cols = ["query_id"] + [c for c in (columns or responses.columns) if c != "query_id"]
    df = queries.merge(responses[cols], on="query_id", how="left", validate="one_to_one")
    missing = df.loc[df["response_text"].isna(), "query_id"]
    if len(missing):
        raise ValueError(f"responses missing for queries {missing.head(3).tolist()}")
    return df.reset_index(drop=True)


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


def with_skipped(scores: pd.DataFrame, skipped: list[str], note: str = NO_LOGPROBS_NOTE) -> pd.DataFrame:
    """``scores`` plus one row per skipped variant (doc_id null, score NaN, :data:`SKIPPED_COLUMN` = note)."""
    if not skipped:
        return scores
    n = len(skipped)
    rows = pd.DataFrame(
        {
            "doc_id": pd.Series([None] * n, dtype=scores["doc_id"].dtype),  # keeps the scored rows' dtype
            "variant": pd.Series(list(skipped), dtype=scores["variant"].dtype),
            "score": float("nan"),
            "decision": pd.NA,
        }
    )
    out = pd.concat([scores.assign(**{SKIPPED_COLUMN: None}), rows.assign(**{SKIPPED_COLUMN: note})], ignore_index=True)
    return out


def is_main_variant(variant: str) -> bool:
    """Whether a variant is an attack's headline one: a sweep's variants are named with ``=``
    (``dcmi/theta=0.06``) and are the same attack again."""
    return "=" not in variant


def split_skipped(scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the scored rows, the skipped-variant rows) of a scores frame."""
    if SKIPPED_COLUMN not in scores.columns:
        return scores, scores.iloc[0:0]
    mask = scores[SKIPPED_COLUMN].notna()
    scored = scores[~mask].drop(columns=SKIPPED_COLUMN).reset_index(drop=True).infer_objects()
    return scored, scores[mask].reset_index(drop=True)
