"""CA-DP: composition-aware DP over a multi-turn dialogue (Mind the Hook §IV, Tables I-II; the
authors' own reimplementation, "per-turn split", epsilon in {1, 5}).

The total budget epsilon is split evenly over T turns: each query gets the per-turn budget
``epsilon / T`` and is answered like DP-R with it (Laplace noise of scale ``sensitivity * T / epsilon``
on the first ``pool`` candidates' scores, top k by noisy score, noisy scores released).  The paper
does not say what T is; ragmi takes it as the number of queries one attack (or conversation) spends
on one candidate document.  With ``turns: attack`` (the default) T is measured on the queries of the
attack that queries the target (:func:`queries_per_candidate`, set by the job that answers them via
:meth:`CaDp.set_turns`); an integer ``turns`` fixes it.  The value used and where it came from are
recorded (``record()["turns"]``, ``["turns_source"]``).  docs/provenance.md#ca_dp
"""

from __future__ import annotations

import pandas as pd

from ._common import RETRIEVAL_DOWNSTREAM
from .claims import RELATION_SCORES, DeclaredEpsilon
from .dp_retrieval import DpRetrieval


def queries_per_candidate(queries: pd.DataFrame) -> int:
    """T of an attack: the most queries it sends about one candidate document (all its variants
    together: each is a turn the attacker spends on that document); 1 for a frame without doc ids."""
    if queries is None or not len(queries) or "doc_id" not in queries.columns:
        return 1
    return int(queries.groupby("doc_id").size().max())


class CaDp(DpRetrieval):
    kind = "ca_dp"
    hooks = ("retrieval",)
    channels = RETRIEVAL_DOWNSTREAM
    vocabulary = ()
    source = "Mind the Hook §IV CA-DP (composition-aware per-turn DP budget)"
    chosen = {
        "turns": "T = queries the attack that queries the target spends on one candidate (params.turns: attack); "
        "an integer params.turns fixes it (untold)",
        "per-turn budget": "epsilon / T (even split, basic sequential composition)",
        "sensitivity": "params.sensitivity (untold; default 1.0)",
        "pool": "params.pool candidates noised (untold; default 20)",
    }

    reads_attack_queries = True

    def __init__(self, name, params):
        super().__init__(name, params)
        t = self.params.get("turns", "attack")
        self._turns = int(t) if t != "attack" else None
        self.turns_source = "params.turns" if self._turns is not None else None

    def set_turns(self, turns: int, source: str) -> None:
        """T measured on the attack's queries (``turns: attack``); a fixed ``params.turns`` wins."""
        if self.params.get("turns", "attack") != "attack":
            return
        if int(turns) < 1:
            raise ValueError(f"defense {self.name}: T must be at least 1, got {turns}")
        self._turns, self.turns_source = int(turns), source

    def see_attack_queries(self, queries) -> None:
        """T from the attack queries handed over: the largest of their :func:`queries_per_candidate`
        (the first such frame on a tie), named in ``turns_source``."""
        if not queries:
            return
        top = max(queries, key=lambda name: queries_per_candidate(queries[name]))
        t = queries_per_candidate(queries[top])
        self.set_turns(t, f"{top}: {t} queries per candidate")

    def epsilon_claim(self) -> DeclaredEpsilon:
        """ε per candidate: T queries × ε/T each (even split, basic sequential composition), T as set for
        the attack (``declared_turns``; unknown while no attack has set it); each query DP-R's mechanism
        with ε/T, same relation."""
        p = self.params
        eps = float(p["epsilon"])
        turns = self.declared_turns  # read without setting it (None: no attack has set T)
        if turns is None:
            t_words = "T unknown (turns: attack, and no attack queries this target)"
        else:
            t_words = f"T = {turns} ({self.turns_source}), ε/T = {eps / turns:g}"
        return DeclaredEpsilon(
            eps,
            f"per candidate: T queries × ε/T (even split, basic sequential composition); {t_words}; each query "
            f"Laplace(Δ·T/ε) on the top {p.get('pool')} candidates' scores, Δ = {p.get('sensitivity')}",
            RELATION_SCORES,
            per_candidate=True,
            noise_scale=float(p["sensitivity"]) / self.noise_epsilon(),
        )

    NO_ATTACK_TURNS = "no attack queries this target: T = 1"

    @property
    def declared_turns(self) -> int | None:
        """T as set (``params.turns`` or :meth:`set_turns`), None while unknown; reading it changes nothing."""
        return self._turns

    @property
    def turns(self) -> int:
        """T the noise is drawn with: 1 while no attack has set it (its probes only).  Reading it does not
        set T: a later :meth:`set_turns` still takes effect."""
        return 1 if self._turns is None else self._turns

    @property
    def per_turn_epsilon(self) -> float:
        return self.params["epsilon"] / self.turns

    def record(self):
        r = super().record()
        r["turns"] = self.turns
        r["turns_source"] = self.turns_source if self._turns is not None else self.NO_ATTACK_TURNS
        r["per_turn_epsilon"] = self.per_turn_epsilon
        return r

    def noise_epsilon(self) -> float:
        return self.per_turn_epsilon
