"""A RAG service reached over HTTP (``kind: remote``, block ``remote``): it retrieves and generates
on its own; its answers carry log-probabilities and sources when its API gives them
(docs/remote-targets.md)."""

from __future__ import annotations

from collections.abc import Mapping

from .base import TargetKind


class RemoteKind(TargetKind):
    name = "remote"
    block = "remote"
    own_pipeline = True
    holds_store = True

    def check(self, cfg: dict, name: str, t: dict) -> None:
        from ..rag.remote.keys import check_remote_target

        check_remote_target(name, t)

    def model_name(self, cfg: Mapping, t: Mapping) -> str:
        return t["remote"]["model"] or t["remote"]["url"]

    def answers_logprobs(self, t: Mapping) -> bool:
        return bool(t["remote"]["logprobs"])

    def reports_sources(self, t: Mapping) -> bool:
        return "sources_path" in t["remote"]

    def open(self, spec, inputs, log):
        import json
        from pathlib import Path

        import pandas as pd

        from ..rag.remote import remote_target
        from ..rag.remote.mapping import game_aliases

        documents = None
        if "source_members" in inputs.keys():  # remote.sources_path: its sources matched to these
            documents = pd.concat(
                [
                    pd.read_parquet(inputs[c], columns=["doc_id", "text", "title"])
                    for c in ("source_members", "source_nonmembers")
                ],
                ignore_index=True,
            )
        aliases = None
        if documents is not None and "store_inserted" in inputs.keys():
            # the store game's ids of its members name them too (a service reports the store's ids)
            aliases = game_aliases(json.loads(Path(inputs.store_inserted).read_text())["manifest"])
        return remote_target(spec, log, documents, aliases)
