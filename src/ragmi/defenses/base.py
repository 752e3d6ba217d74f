"""The interface every defense implements, and the per-query state that flows through the hooks.

A defense lives inside the target RAG system (``ragmi.rag.system.RAGSystem``) and acts on one or
more of five ordered hooks (Mind the Hook §III, docs/provenance.md#defenses):

=========  ==========================================  =========================================
hook       what it may change on a :class:`QueryState`   compared by the audit
=========  ==========================================  =========================================
query      ``query`` (then retrieval runs on it) or     ``query``, ``refusal``
           ``refusal`` (the target answers that text)
retrieval  ``retrieved_ids`` / ``retrieval_scores``      ``retrieved_ids``, ``retrieval_scores``,
           (from ``pool_*``, ``all_scores``), refusal    ``refusal``
content    ``docs`` (texts of the retrieved documents)   ``docs``
template   ``messages`` (the chat prompt)                ``messages``
output     ``response`` (text, log-probabilities)        ``response`` text and log-prob columns
=========  ==========================================  =========================================

Hooks take the whole batch (a list of states) so that LLM-based defenses batch their model calls.
Output hooks run after the response cache: the cache keeps the raw generation, so adding a defense
never regenerates.  Randomised defenses draw from :meth:`DefenseContext.rng`, seeded per
(run seed, defense name, query id), so a rerun gives the same outputs whatever the batch order.

A defense declares what it does, and the audit checks the declaration against what it measures:

* ``hooks``: the hooks it acts on (the others are never called);
* ``channels``: what an attacker-visible channel it can change, among :data:`CHANNELS`;
* ``vocabulary``: strings it writes into texts (placeholders, fixed names, refusals) — a canary
  or a leakage scorer must stay outside it;
* ``logprobs``: for output hooks, ``"keep"`` (the log-prob columns pass through untouched, so a
  gray-box attack still reads the undefended model) or ``"drop"`` (they are emptied).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

HOOKS = ("query", "retrieval", "content", "template", "output")
# "first_token_logprobs" is the channel of the top-K alternatives' log-probabilities: the response
# fields first_token_logprobs and token_top_logprobs (the top-K of every generated position).
CHANNELS = ("retrieval_set", "context", "prompt", "text", "first_token_logprobs", "token_logprobs")
REFUSAL = "I don't know."


@dataclass
class QueryState:
    query_id: str
    query: str
    pool_ids: list = field(default_factory=list)  # candidates, best first (len >= k when available)
    pool_scores: list = field(default_factory=list)
    retrieved_ids: list = field(default_factory=list)  # the documents that go into the context
    retrieval_scores: list = field(default_factory=list)
    docs: list = field(default_factory=list)  # their texts
    messages: list = field(default_factory=list)
    response: dict | None = None  # response_text, first_token_logprobs, token_logprobs, ...
    refusal: str | None = None  # when set, the target answers this text and generates nothing
    all_scores: np.ndarray | None = None  # whole-database scores (aligned with DefenseContext.doc_ids)
    trace: list = field(default_factory=list)  # [{"defense", "hook", "changed"}]
    n_docs_truncated: int = 0  # documents cut to fit the generator's context (ragmi.rag.fit)
    chars_truncated: int = 0  # characters they lost


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


# What each hook's change is compared on, channel by channel, and whether a change there can reach
# the generator (pre-generation hooks) or the attacker's response (the output hook).  The retrieval
# hook's released scores go into the response's ``retrieval_scores`` but never into the prompt: a
# hook that changes them alone leaves the context, and so the generated text, as it was — it is
# ``scores-only``, not acting (Mind the Hook §III: a hook acts when its output reaches the model).
HOOK_CHANNELS = {
    "query": {"query": True, "refusal": True},
    "retrieval": {"retrieval_set": True, "order": True, "scores": False, "refusal": True},
    "content": {"context": True},
    "template": {"prompt": True},
    "output": {"text": True, "logprobs": True},
}


def channel_views(state: QueryState, hook: str) -> dict:
    """{channel: what the audit compares there} before and after ``hook`` (see :data:`HOOK_CHANNELS`)."""
    if hook == "query":
        return {"query": state.query, "refusal": state.refusal}
    if hook == "retrieval":
        return {
            "retrieval_set": sorted(map(str, state.retrieved_ids)),
            "order": list(map(str, state.retrieved_ids)),
            "scores": [round(float(s), 6) for s in state.retrieval_scores],
            "refusal": state.refusal,
        }
    if hook == "content":
        return {"context": list(state.docs)}
    if hook == "template":
        return {"prompt": state.messages}
    if hook == "output":
        r = state.response or {}
        return {
            "text": r.get("response_text"),
            "logprobs": [r.get("first_token_logprobs"), r.get("token_logprobs"), r.get("token_top_logprobs")],
        }
    raise ValueError(f"unknown hook {hook!r}")


def channel_digests(state: QueryState, hook: str) -> dict:
    return {c: _digest(v) for c, v in channel_views(state, hook).items()}


def changed_channels(before: Mapping, state: QueryState, hook: str) -> list[str]:
    """The channels of ``hook`` whose view differs from ``before`` (:func:`channel_digests`).  A
    reordering alone changes ``order`` but not ``retrieval_set``."""
    after = channel_digests(state, hook)
    return [c for c in HOOK_CHANNELS[hook] if after[c] != before[c]]


def acts(hook: str, channels) -> bool:
    """Whether a change on ``channels`` of ``hook`` can reach the generator (or, for the output hook,
    the response): a change of the released retrieval scores alone does not."""
    return any(HOOK_CHANNELS[hook][c] for c in channels)


def trace_entry(defense: str, hook: str, channels) -> dict:
    """One hook-trace record: ``changed`` is :func:`acts` (what the inventory's fire rates count) and
    ``channels`` what changed, the score-only changes included."""
    return {"defense": defense, "hook": hook, "changed": acts(hook, channels), "channels": list(channels)}


def hook_view(state: QueryState, hook: str):
    """Everything the audit compares before and after ``hook``, all channels together."""
    return list(channel_views(state, hook).values())


def hook_digest(state: QueryState, hook: str) -> str:
    """Digest of :func:`hook_view`: it changes when *any* channel changes, released scores included;
    whether the change acts is :func:`changed_channels` + :func:`acts`."""
    return _digest(hook_view(state, hook))


class DefenseContext:
    """What the target hands its defenses: seeded randomness, its retriever, its documents, and
    the defender LLM (``chat``) for LLM-based defenses.  Attack code never sees this object."""

    def __init__(
        self,
        seed: int,
        k: int,
        template=None,
        documents: Mapping[str, str] | None = None,
        search: Callable | None = None,
        all_scores: Callable | None = None,
        chat: Callable | None = None,
        log: Callable = print,
    ):
        self.seed = int(seed)
        self.k = int(k)
        self.template = template
        self.documents = dict(documents or {})
        self.doc_ids = list(self.documents)
        self._search = search
        self._all_scores = all_scores
        self._chat = chat
        self.log = log

    def rng(self, defense: str, query_id: str) -> np.random.Generator:
        h = hashlib.sha256(f"{self.seed}|{defense}|{query_id}".encode()).digest()
        return np.random.default_rng(int.from_bytes(h[:8], "little"))

    def search(self, queries: Sequence[str], k: int):
        """Top-``k`` (ids, scores) per query from the target's retriever."""
        if self._search is None:
            raise RuntimeError("this target has no retriever")
        return self._search(list(queries), int(k))

    def all_scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Scores of every database document per query, aligned with :attr:`doc_ids`."""
        if self._all_scores is None:
            raise RuntimeError("this target's retriever cannot score the whole database")
        return self._all_scores(list(queries))

    def chat(self, prompts: list[list[dict]], max_tokens: int, temperature: float = 0.0) -> list[str]:
        """The defender LLM (cached, batched); one answer text per prompt."""
        if self._chat is None:
            raise RuntimeError("no defender LLM is configured for this target")
        return self._chat(prompts, int(max_tokens), float(temperature))


class Defense:
    """Subclasses set the class attributes and implement ``on_<hook>`` for each declared hook."""

    kind = "defense"
    hooks: tuple = ()
    channels: tuple = ()
    vocabulary: tuple = ()
    logprobs = "keep"  # output hooks: "keep" or "drop" the log-prob columns
    needs_all_scores = False  # whole-database scores (Mirabel): flat FAISS indexes only
    # reads the retrieval scores as cosine similarities (the benchmark's Threshold): dense retrievers on
    # L2-normalised vectors only (ragmi.rag.index.cosine_scores)
    needs_cosine_scores = False
    needs_llm = False  # calls the defender LLM
    stochastic = False  # its hooks draw from ctx.rng: one may leave a query unchanged by chance
    source = ""  # paper and section the defense follows
    # Calibrated to the attack it faces (CA-DP's T): the job that builds it hands it the attack's
    # queries (see_attack_queries) before the first answer.
    reads_attack_queries = False
    # Decides per query whether it is an attack (Mirabel, the LLM detector): the audit sends it benign
    # queries too and reads its flags (ragmi.audit.detection)
    detector = False

    def __init__(self, name: str, params: Mapping):
        self.name = name
        self.params = dict(params)

    def epsilon_claim(self):
        """What the defense claims as a DP mechanism (:class:`ragmi.defenses.claims.DeclaredEpsilon`),
        read without changing it; None for a defense that claims no ε.  The ε audit lists every
        defense that declares one, and drives its hook when the claim gives a ``noise_scale``."""
        return None

    def see_attack_queries(self, queries: Mapping) -> None:
        """``queries``: {how to name them: the query frame (``doc_id`` per query) of an attack this
        target answers}: one attack's in a generate job, every attack's for the audit's probes.  Only
        a defense with ``reads_attack_queries`` is handed them, and it implements this."""
        raise NotImplementedError(
            f"defense {self.name} ({self.kind}) declares reads_attack_queries without see_attack_queries"
        )

    def pool_size(self, k: int) -> int:
        """How many retrieval candidates this defense needs (backfill, sampling); ``k`` by default."""
        return k

    def record(self) -> dict:
        """What the run records about this defense (parameters, chosen where a paper is silent)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "hooks": list(self.hooks),
            "channels": list(self.channels),
            "vocabulary": list(self.vocabulary),
            "logprobs": self.logprobs,
            "params": self.params,
            "source": self.source,
        }

    def on_query(self, states: list[QueryState], ctx: DefenseContext) -> None:
        raise NotImplementedError

    def on_retrieval(self, states: list[QueryState], ctx: DefenseContext) -> None:
        raise NotImplementedError

    def on_content(self, states: list[QueryState], ctx: DefenseContext) -> None:
        raise NotImplementedError

    def on_template(self, states: list[QueryState], ctx: DefenseContext) -> None:
        raise NotImplementedError

    def on_output(self, states: list[QueryState], ctx: DefenseContext) -> None:
        raise NotImplementedError


def select_top(state: QueryState, ids: Sequence[str], scores: Sequence[float], k: int) -> None:
    """Set the retrieved set to the first ``k`` of ``ids`` / ``scores``."""
    state.retrieved_ids = list(ids[:k])
    state.retrieval_scores = [float(s) for s in scores[:k]]


def set_response_text(state: QueryState, text: str, drop_logprobs: bool = False) -> None:
    r = dict(state.response or {})
    r["response_text"] = text
    if drop_logprobs:
        r["first_token_logprobs"] = []
        r["token_logprobs"] = []
        r["token_top_logprobs"] = []
    state.response = r
