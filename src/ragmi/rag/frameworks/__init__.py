"""RAG frameworks of a target (``targets.<t>.framework``), one module each (interface: ``.base``).

DCMI (Gao et al., §5.2 and Table 8) measures membership leakage on five RAG frameworks: Standard RAG,
LongLLMLingua compression, Selective-Context (SC-RAG), Spring and IRCoT.  Every framework keeps the
five defense hooks of :class:`~ragmi.rag.system.RAGSystem` (query, retrieval, content, template,
output), so every attack, defense and the audit run on it unchanged.

Adding a framework: a module with one :class:`~ragmi.rag.frameworks.base.Framework` subclass, one
line in :data:`REGISTRY`, and its parameter schema under ``$defs.frameworks.<name>`` in
config/schema.yaml.
"""

from __future__ import annotations

from ...schema import Registry, plugin_params

REGISTRY = {
    # name: (module, class)
    "standard": ("standard", "Standard"),
    "selective_context": ("selective_context", "SelectiveContext"),
    "longllmlingua": ("longllmlingua", "LongLLMLingua"),
    "ircot": ("ircot", "IRCoT"),
    "spring": ("spring", "Spring"),
}


_LOOKUP = Registry(
    __name__, REGISTRY, lambda name, known, where: f"config key {where}: unknown framework {name!r}; known: {known}"
)


def framework_class(name: str, where: str = "framework"):
    return _LOOKUP.cls(name, where)


def framework_rank(name: str) -> int:
    """The place of framework ``name``'s rows in the framework table (its class's ``table_rank``;
    an unknown name last)."""
    return framework_class(name).table_rank if name in REGISTRY else len(REGISTRY)


def build_framework(name: str, params: dict | None = None, where: str = "framework", validated: bool = False):
    """A framework from ``targets.<t>.framework`` and ``targets.<t>.framework_params`` (``where`` names
    the target's ``framework`` key in error messages); ``validated``: the parameters come from a
    validated configuration (defaults filled, checked) and are used as given."""
    cls = framework_class(name, where)
    if validated:
        return cls(dict(params or {}))
    prefix = where.rsplit(".", 1)[0] + ".framework_params" if "." in where else "framework_params"
    return cls(plugin_params("frameworks", name, params or {}, where=prefix))
