"""Target kinds: what a target of each ``targets.<t>.kind`` is, asked of its plug-in.

A kind says what it needs (ragmi's index and generator, or nothing of ragmi's), what its answers
carry (text, log-probabilities, the sources it retrieved), where it can play the store game or take
the audit's canaries, and how its answering system is opened in a generate job
(:class:`~ragmi.targets.base.TargetKind`).  The workflow, the validator, the audit, the utility
step, the report and ``tools/eta.py`` ask these questions; none of them tests a kind's name.

Adding a target kind: a module with one :class:`~ragmi.targets.base.TargetKind` subclass, one line in
:data:`REGISTRY`, and its name in the schema's ``targets.<t>.kind`` enum (with the block of its own
keys under ``targets.<t>``, when it has one).  docs/architecture.md, "Adding a target kind".
"""

from __future__ import annotations

from collections.abc import Mapping

from ..schema import Registry

REGISTRY = {
    # kind: (module, class)
    "rag": ("rag", "RagKind"),
    "remote": ("remote", "RemoteKind"),
    "python": ("python", "PythonKind"),
}

_LOOKUP = Registry(
    __name__,
    REGISTRY,
    lambda kind, known, where: f"config key {where or 'kind'}: unknown target kind {kind!r}; known: {known}",
)


def kind_class(name: str, where: str | None = None):
    """The :class:`~ragmi.targets.base.TargetKind` subclass registered as ``name``."""
    return _LOOKUP.cls(name, where)


def target_kind(target: Mapping):
    """The kind plug-in of a validated target entry ``targets.<t>``."""
    return kind_class(target["kind"])()


def own_pipeline(target: Mapping) -> bool:
    """The target retrieves and generates on its own (a service, a user's chain): ragmi builds no
    index, serves no generator, adds no defense, control, framework or leakage check for it."""
    return target_kind(target).own_pipeline
