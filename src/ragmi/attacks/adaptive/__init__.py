"""Adaptive extraction attacks: campaigns of queries under a budget, each round written after reading
the answers before it (:mod:`ragmi.attacks.adaptive.base`), and the random baselines they are compared
with.  Registering one here and giving its parameters in config/schema.yaml
(``$defs.adaptive_attacks.<name>``) is all it takes to add one (docs/campaigns.md)."""

from __future__ import annotations

from ...schema import Registry

REGISTRY = {
    # config key: (module, class)
    "copybreak": ("copybreak", "CopyBreak"),
    "dgea": ("dgea", "DGEA"),
    "ikea": ("ikea", "IKEA"),
    "ragcrawler": ("ragcrawler", "RAGCrawler"),
    "random_emb": ("random_emb", "RandomEmb"),
    "random_token": ("random_token", "RandomToken"),
    "random_text": ("random_text", "RandomText"),
}

_LOOKUP = Registry(__name__, REGISTRY, lambda name, known, _where: f"unknown adaptive attack {name!r}; known: {known}")


def adaptive_class(name: str):
    return _LOOKUP.cls(name)


def get_adaptive(name: str, params: dict, **kwargs):
    """Adaptive attack ``name`` built from its config entry; ``kwargs``: ``seed``, ``validated``."""
    return adaptive_class(name)(params, **kwargs)
