"""A user's RAG chain called in process (``kind: python``, block ``python``): a LangChain chain, a
LlamaIndex query engine or any function, with its own database, retrieval and generation
(docs/python-targets.md)."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError
from .base import TargetKind


class PythonKind(TargetKind):
    name = "python"
    block = "python"
    own_pipeline = True

    def check(self, cfg: dict, name: str, t: dict) -> None:
        """None of an in-process ragmi target's keys, exactly one of callable and factory, and a
        module that can be found (``ragmi.rag.python_target.check_reference``)."""
        from ..rag.python_target import check_reference

        where = f"config key targets.{name}"
        for key in ("retriever", "generator"):
            if key in t:
                raise ConfigError(
                    f"{where}.{key}: a python target does its own retrieval and generation; remove the key"
                )
        if t["defenses"]:
            raise ConfigError(
                f"{where}.defenses: a python target's defenses are the chain's own; ragmi cannot add hooks to it"
            )
        p = t["python"]
        if ("callable" in p) == ("factory" in p):
            raise ConfigError(f"{where}.python: give exactly one of callable (called per query) and factory")
        check_reference(p, f"targets.{name}.python")

    def model_name(self, cfg: Mapping, t: Mapping) -> str:
        return t["python"].get("factory") or t["python"]["callable"]

    def answers_logprobs(self, t: Mapping) -> bool:
        return bool(t["python"]["logprobs"])

    def open(self, spec, inputs, log):
        from ..rag.python_target import python_target

        return python_target(spec, log)
