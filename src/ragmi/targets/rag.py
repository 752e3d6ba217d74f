"""ragmi's own RAG system, run in process (``kind: rag``, the default): ragmi's retriever and index
over the member split, its template and generator, the target's defenses and framework."""

from __future__ import annotations

from ..errors import ConfigError
from .base import TargetKind


class RagKind(TargetKind):
    name = "rag"

    def check(self, cfg: dict, name: str, t: dict) -> None:
        """The retriever and generator are given and defined."""
        for key in ("retriever", "generator"):
            section = key + "s"
            if key not in t:
                raise ConfigError(f"config key targets.{name}.{key}: required for kind rag")
            if t[key] not in cfg.get(section, {}):
                raise ConfigError(
                    f"config key targets.{name}.{key}: {t[key]!r} is not defined under '{section}' "
                    f"(defined: {', '.join(sorted(cfg.get(section, {}))) or 'none'})"
                )

    def open(self, spec, inputs, log):
        import pandas as pd

        from ..rag.factory import rag_system

        return rag_system(spec, pd.read_parquet(inputs.members), log)
