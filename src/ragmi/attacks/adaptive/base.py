"""The interface of an adaptive extraction attack: a campaign of queries under a budget, each round's
queries written after reading the answers to the rounds before (docs/campaigns.md).

Threat model: like every ragmi attack (:mod:`ragmi.attacks.base`), an adaptive attack sees only the
queries it wrote and the target's answers (their text); never the retrieved ids, the index or the
defenses.  Its own tools are the attacker LLM (``tools.chat``) and local models it loads itself (the
attacker's sentence embedder, :func:`ragmi.attacks.models.load_embedder`).

Life cycle (driven by :func:`ragmi.campaign.run_campaign`, one Snakemake job per campaign):

1. ``start(tools)``: load what the attack needs (embedder, token pool, public-text statistics);
2. per round: ``propose(n)`` writes ``n`` queries, the target answers them, ``observe(queries,
   answers)`` reads the answers;
3. after every round the loop saves :meth:`state` beside the campaign's rows; a killed campaign resumes
   from there (:meth:`load_state`) and proposes exactly what the uninterrupted run would have.

Randomness comes from ``self.rng`` (a numpy Generator seeded by the campaign's seed and the attack's
name), saved with the state; an attack keeps everything else it learns in the attributes named by
``state_keys`` (JSON values: strings, numbers, lists of them).
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ...errors import ConfigError
from ...schema import plugin_params


@dataclass
class Proposal:
    """One query an attack proposes, with what writing it cost the attacker."""

    query: str
    step: str = "query"  # the attack's own label of how it was written (explore, exploit, random, ...)
    attacker_prompt_tokens: int = 0
    attacker_completion_tokens: int = 0
    note: dict = field(default_factory=dict)  # small JSON facts for the log (e.g. the cosine reached)


class AdaptiveAttack(ABC):
    """Subclasses set ``name`` and implement :meth:`propose` (and :meth:`observe` when they adapt)."""

    name = "adaptive"
    baseline = False  # a random baseline: the floor the coverage table compares the attacks with
    uses_llm = False  # calls the attacker LLM
    embedder_param: str | None = None  # the parameter naming the attacker's embedder, if it uses one
    state_keys: tuple[str, ...] = ()

    def __init__(self, params: Mapping | None = None, *, seed: int = 0, validated: bool = False):
        self.params = dict(params) if validated else plugin_params("adaptive_attacks", self.name, dict(params or {}))
        self.seed = int(seed)
        self.rng = np.random.default_rng([self.seed & 0xFFFFFFFF, zlib.crc32(self.name.encode())])
        self.tools = None

    @classmethod
    def work(cls, params: Mapping) -> tuple[float, float, float, float]:
        """What one query costs, for the time estimate (``tools/eta.py``): its characters, the attacker-LLM
        calls spent writing it, the characters of such a call's prompt and the tokens of its answer.
        This default: a 200-character query written without the LLM."""
        return 200.0, 0.0, 0.0, 0.0

    @classmethod
    def variant(cls, params: Mapping, retriever_embedder: str | None) -> str:
        """The row label of the coverage table (e.g. ``dgea/white``)."""
        return cls.name

    def start(self, tools) -> None:
        """Load the attack's own models (``tools``: chat, log)."""
        self.tools = tools

    @abstractmethod
    def propose(self, n: int) -> list[Proposal]:
        """The next ``n`` queries."""

    def observe(self, queries: list[str], answers: list[str]) -> None:
        """Read the target's answers to the queries of the round just asked (in order); a random
        baseline reads nothing."""
        return None

    def log(self, msg: str) -> None:
        if self.tools is not None:
            self.tools.log(msg)

    def chat(self, prompt: str, max_tokens: int, temperature: float) -> tuple[str, int, int]:
        """One attacker-LLM call (``prompt`` as the user message) with its own sampling seed from the
        campaign's generator: the answer's text, stripped, and its prompt and completion tokens."""
        seed = int(self.rng.integers(0, 2**31 - 1))
        a = self.tools.chat([[{"role": "user", "content": prompt}]], max_tokens, temperature, seeds=[seed])[0]
        return str(a["text"] or "").strip(), int(a["prompt_tokens"]), int(a["completion_tokens"])

    def required_topic(self, example: str) -> str:
        """The ``topic`` parameter, stripped; a :class:`~ragmi.errors.ConfigError` naming the setting
        (and ``example``, the topics the attack's source uses) when it is empty."""
        topic = str(self.params.get("topic") or "").strip()
        if not topic:
            raise ConfigError(
                f"the {self.name} attack needs the knowledge base's topic: set campaigns.attacks.{self.name}.topic "
                f"({example})"
            )
        return topic

    # --- checkpoints -------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"rng": self.rng.bit_generator.state, **{k: getattr(self, k) for k in self.state_keys}}

    def load_state(self, state: Mapping) -> None:
        self.rng.bit_generator.state = state["rng"]
        for k in self.state_keys:
            setattr(self, k, state[k])
