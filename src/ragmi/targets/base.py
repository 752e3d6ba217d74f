"""The interface of a target kind (registry: :mod:`ragmi.targets`).

Each question is asked of a validated target entry ``t`` (``targets.<name>``) and, where it needs
more, the validated configuration ``cfg``.  The defaults describe ragmi's own RAG system; a kind
that does its own retrieval and generation sets ``own_pipeline`` and overrides what differs.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError


class TargetKind:
    name: str = ""
    # The key of the block of this kind's own settings (targets.<t>.<block>), required with the kind
    # and refused without it; None: the kind has none.
    block: str | None = None
    # Retrieves and generates on its own: no index, generator, defenses, controls, framework or
    # generated-text leakage check of ragmi's; the config keys of ragmi's RAG do not apply.
    own_pipeline: bool = False
    # May play the membership game in a vector store (targets.<t>.store, docs/vector-stores.md).
    holds_store: bool = False

    def check(self, cfg: dict, name: str, t: dict) -> None:
        """Kind-specific validation of ``targets.<name>`` (defaults may be written into ``t``);
        raise ConfigError naming the key.  Runs after the schema and the block checks."""

    def generator(self, cfg: Mapping, t: Mapping) -> Mapping | None:
        """The ``generators.<g>`` entry ragmi serves for this target (None: it generates on its own)."""
        return None if self.own_pipeline else cfg["generators"][t["generator"]]

    def model_name(self, cfg: Mapping, t: Mapping) -> str:
        """The model the metrics name for this target."""
        return cfg["generators"][t["generator"]]["model"]

    def answers_logprobs(self, t: Mapping) -> bool:
        """Its answers carry token log-probabilities (the gray-box variants need them)."""
        return True

    def reports_sources(self, t: Mapping) -> bool:
        """Its answers name the documents it retrieved in a form ragmi matches to the labelled
        members and non-members (a service's sources)."""
        return False

    def reads_split(self, t: Mapping) -> bool:
        """It retrieves from ragmi's member split through ragmi's index (so ragmi knows the texts
        of what it retrieved: the utility's faithfulness, the null-database control)."""
        return not self.own_pipeline

    def takes_canaries(self, t: Mapping) -> bool:
        """The audit's canary experiment can build this target's knowledge base (ragmi's own RAG) or
        plant its canaries in the target's store."""
        return not self.own_pipeline or bool(t.get("store"))

    def open(self, spec, inputs, log):
        """The answering system of a generate job (a context manager whose value has ``answer``,
        ``defenses`` and ``generator``); ``inputs``: the job's input files by name (Snakemake's
        ``input``: ``members``, ``index``, ``source_members``, ``store_inserted``, ...)."""
        raise NotImplementedError


def check_block(kind: TargetKind, name: str, t: Mapping, blocks: Mapping[str, str]) -> None:
    """The block of ``kind``'s own keys is given, and no other kind's block is (``blocks``: {block
    key: its kind} over every registered kind)."""
    if kind.block and kind.block not in t:
        raise ConfigError(f"config key targets.{name}.{kind.block}: required for kind {kind.name}")
    for b, owner in sorted(blocks.items()):
        if b != kind.block and b in t:
            raise ConfigError(f"config key targets.{name}.{b}: only used with kind {owner!r}")
