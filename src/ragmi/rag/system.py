"""The target RAG system: query -> retrieve -> read documents -> fill template -> generate, with the
defenses acting on five ordered hooks (``ragmi.defenses.base``).  How the stages are chained — once
(Standard RAG), with a compression of the retrieved texts, or in rounds of reasoning and retrieval —
is the target's framework (``ragmi.rag.frameworks``).

Every query carries a :class:`~ragmi.defenses.base.QueryState` through the hooks; each defense that
declares a hook runs on the whole batch, in the target's configured order, and the state records
per (defense, hook) which channels that hook changed and whether the change can reach the generator
(the trace the active-path audit reads; ``ragmi.defenses.base.trace_entry``).
Output hooks act after the response cache: the raw generation is cached and kept as
``response_text_raw``, so adding or changing a defense never regenerates.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..defenses.base import HOOKS, DefenseContext, QueryState, changed_channels, channel_digests, trace_entry
from .templates import Template


def refusal_response(text: str) -> dict:
    """What the target returns when a defense refuses a query: its text, no generation."""
    return {
        "response_text": text,
        "first_token_logprobs": [],
        "token_logprobs": [],
        "token_top_logprobs": [],
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 0.0,
        "cached": False,
    }


@dataclass
class RAGSystem:
    retriever: object  # ragmi.rag.index.Retriever
    documents: dict  # doc_id -> text of the retrieval database (the members)
    template: Template
    generator: object  # has .generate(list[request]) -> list[response]
    k: int = 4
    temperature: float = 0.0
    seed: int = 0
    defenses: list = field(default_factory=list)  # ragmi.defenses.base.Defense, in hook order
    defender: Callable | None = None  # chat(prompts, max_tokens, temperature) -> list[str]
    log: Callable = print
    framework: object = None  # ragmi.rag.frameworks.base.Framework; None: Standard RAG
    fitter: object = None  # ragmi.rag.fit.PromptFitter; None: prompts are sent as built

    def __post_init__(self):
        if self.framework is None:
            from .frameworks.standard import Standard

            self.framework = Standard({})

    def context(self) -> DefenseContext:
        all_scores = getattr(self.retriever, "all_scores", None)
        order = getattr(self.retriever, "ids", None) or list(self.documents)
        return DefenseContext(
            seed=self.seed,
            k=self.k,
            template=self.template,
            documents={d: self.documents[d] for d in order},
            search=self.retriever.search,
            all_scores=all_scores,
            chat=self.defender,
            log=self.log,
        )

    def run_hook(self, hook: str, states: list[QueryState], ctx: DefenseContext) -> None:
        """Run every defense declaring ``hook`` on the states, recording whether each changed them."""
        for d in self.defenses:
            if hook not in d.hooks:
                continue
            live = [s for s in states if hook == "output" or s.refusal is None]
            before = [channel_digests(s, hook) for s in live]
            getattr(d, f"on_{hook}")(live, ctx)
            flags = getattr(d, "flags", None)  # a detector's per-query verdicts (Mirabel, the LLM detector)
            for s, b in zip(live, before):
                entry = trace_entry(d.name, hook, changed_channels(b, s, hook))
                if flags is not None and s.query_id in flags:
                    entry["flagged"] = bool(flags[s.query_id])
                s.trace.append(entry)

    def pool_size(self) -> int:
        return max([self.k] + [int(d.pool_size(self.k)) for d in self.defenses])

    def retrieve(self, states: list[QueryState], ctx: DefenseContext) -> float:
        """Fill each live state's candidate pool, top-k and (when a defense needs them) whole-database
        scores; return the retrieval seconds per query."""
        live = [s for s in states if s.refusal is None]
        t0 = time.perf_counter()
        if live and self.pool_size() > 0:  # k = 0: no retrieval (the control), an empty context
            ids, scores = self.retriever.search([s.query for s in live], self.pool_size())
            whole = None
            if any(d.needs_all_scores for d in self.defenses):
                whole = ctx.all_scores([s.query for s in live])
            for j, s in enumerate(live):
                s.pool_ids, s.pool_scores = list(ids[j]), [float(x) for x in scores[j]]
                s.retrieved_ids, s.retrieval_scores = s.pool_ids[: self.k], s.pool_scores[: self.k]
                if whole is not None:
                    s.all_scores = whole[j]
        return (time.perf_counter() - t0) / max(1, len(states))

    def _fill_docs(self, states: list[QueryState], ctx: DefenseContext) -> None:
        for s in states:
            if s.refusal is None:
                s.docs = [self.documents[d] for d in s.retrieved_ids]

    def _fill_messages(self, states: list[QueryState], ctx: DefenseContext) -> None:
        # the framework's compression acts on the texts the content hook left (LongLLMLingua, SC)
        self.framework.compress(self, [s for s in states if s.refusal is None], ctx)
        for s in states:
            if s.refusal is None:
                s.messages = self.framework.messages(self, s)

    def fit(self, states: list[QueryState], max_tokens: list[int]) -> None:
        """Fit each state's prompt to the generator's context (``ragmi.rag.fit``), after the template
        hook and right before generation; a state keeps the most it ever had cut (IRCoT's rounds)."""
        if self.fitter is None:
            return
        for s, mt in zip(states, max_tokens):
            s.messages, docs, n, chars = self.fitter.fit(s.messages, list(s.docs), mt)
            if n:
                s.docs = docs
                s.n_docs_truncated = max(s.n_docs_truncated, n)
                s.chars_truncated = max(s.chars_truncated, chars)

    def prepare(
        self,
        states: list[QueryState],
        ctx: DefenseContext,
        until: str = "template",
        run_last_hook: bool = True,
        start: str = "query",
    ) -> float:
        """Run the pre-generation stages — each stage's own step, then its defenses' hook — from
        ``start`` up to ``until``; with ``run_last_hook=False`` the last stage's hook is left out (the
        audit's probes stop there).  Returns the retrieval seconds per query."""
        steps = {"query": None, "retrieval": self.retrieve, "content": self._fill_docs, "template": self._fill_messages}
        retrieval_s = 0.0
        for hook in HOOKS[HOOKS.index(start) : HOOKS.index(until) + 1]:
            step = steps[hook]
            if step is not None:
                t = step(states, ctx)
                retrieval_s = t if hook == "retrieval" else retrieval_s
            if hook != until or run_last_hook:
                self.run_hook(hook, states, ctx)
        return retrieval_s

    def answer(
        self,
        user_prompts: list[str],
        max_tokens: list[int],
        top_logprobs: list[int],
        query_ids: list[str] | None = None,
    ) -> list[dict]:
        query_ids = query_ids or [str(i) for i in range(len(user_prompts))]
        states = [QueryState(query_id=str(qid), query=str(q)) for qid, q in zip(query_ids, user_prompts)]
        ctx = self.context()
        # the framework runs the pre-generation stages (and their hooks) and the generation(s)
        retrieval_s = self.framework.run(self, states, ctx, max_tokens, top_logprobs)
        for s in states:
            if s.refusal is not None:
                s.response = refusal_response(s.refusal)
            s.response["response_text_raw"] = s.response["response_text"]
        self.run_hook("output", states, ctx)
        out = []
        for s in states:
            resp = dict(s.response)
            resp["retrieved_ids"] = list(s.retrieved_ids)
            resp["retrieval_scores"] = [float(x) for x in s.retrieval_scores]
            resp["retrieval_s"] = retrieval_s
            resp["refused"] = s.refusal is not None
            resp["hook_trace"] = json.dumps(s.trace)
            resp["n_docs_truncated"] = int(s.n_docs_truncated)
            resp["chars_truncated"] = int(s.chars_truncated)
            resp["answer_replaced"] = None  # a remote service's own replacement (ragmi.rag.remote)
            out.append(resp)
        return out
