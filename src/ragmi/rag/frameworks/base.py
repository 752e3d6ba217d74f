"""The interface of a RAG framework: how a target turns queries into responses around the hooks.

:class:`~ragmi.rag.system.RAGSystem` owns the retriever, the documents, the template, the generator
and the defenses; its framework decides

* :meth:`Framework.run`: the pipeline from the queries to the raw responses (Standard RAG: the
  pre-generation stages, then one generation per query; IRCoT: several rounds of reasoning and
  retrieval);
* :meth:`Framework.compress`: what happens to the retrieved texts between the content hook and the
  template (LongLLMLingua, Selective-Context);
* :meth:`Framework.messages`: the prompt built from the query and the (compressed) texts.

Whatever a framework does, the defenses' hooks run where :meth:`RAGSystem.prepare` runs them, every
generation goes through the target's cached, batched generator, a prompt goes through :meth:`RAGSystem.fit` (the generator's context) right before it is generated,
and a response carries exactly the keys of ``ragmi.workflow.RESPONSE_FILE_COLUMNS``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...defenses.base import DefenseContext, QueryState
from ..generators import make_request


class Framework:
    name = "framework"
    table_rank = 99  # its row's place in the framework table (DCMI Tables 4 and 10: standard first)
    source = ""  # the paper / code it follows
    needs_local_model = False  # reads the weights of a local causal LM (``model: generator`` = the generator's)
    # The generator backend it needs, and why (Spring writes its virtual tokens into the generator's
    # embedding table: transformers); None: any backend
    needs_backend: str | None = None
    needs_backend_why = ""

    def __init__(self, params: Mapping):
        self.params = dict(params)
        self.model_path = None  # needs_local_model: set by the factory (``model``, or the generator's weights)
        self.model_key = "framework_params.model"  # the config key named when that model does not load

    def check(self, where: str) -> None:
        """Checks of its parameters beyond the schema (the files and models they name), before any job
        runs; ``where``: its config key (``targets.<t>.framework``)."""

    def generator(self, gen_cfg: Mapping, model_path: str, cache_dir: str, key: str, log):
        """A context manager giving the target's generator when the framework runs one of its own (Spring:
        the generator with its virtual tokens); None: the target's cached generator as configured."""
        return None

    def model_what(self) -> str:
        return f"the {self.name} model (config key {self.model_key})"

    def record(self) -> dict:
        return {"framework": self.name, "params": self.params, "source": self.source}

    # -- stages -----------------------------------------------------------------------------------
    def compress(self, rag, states: list[QueryState], ctx: DefenseContext) -> None:
        """Rewrite ``state.docs`` of the live states after the content hook (no-op by default)."""

    def messages(self, rag, state: QueryState) -> list[dict]:
        return rag.template.messages(state.query, state.docs)

    def run(self, rag, states: list[QueryState], ctx: DefenseContext, max_tokens, top_logprobs) -> float:
        """Fill ``state.response`` of every live state; return the retrieval seconds per query."""
        retrieval_s = rag.prepare(states, ctx, until="template")
        todo = [i for i, s in enumerate(states) if s.refusal is None]
        rag.fit([states[i] for i in todo], [max_tokens[i] for i in todo])
        requests = [
            make_request(states[i].messages, max_tokens[i], top_logprobs[i], rag.temperature, rag.seed) for i in todo
        ]
        for i, resp in zip(todo, rag.generator.generate(requests) if requests else []):
            states[i].response = dict(resp)
        return retrieval_s

    def close(self) -> None:
        """Free what the framework loaded (models)."""
