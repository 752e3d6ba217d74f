"""Membership-inference attacks.  Each module implements :class:`ragmi.attacks.base.Attack`;
registering one here (and in config/schema.yaml) is all it takes to add an attack."""

from __future__ import annotations

import importlib

from ..errors import ConfigError

REGISTRY = {
    # config key: (module, class)
    "rag_mia": ("rag_mia", "RagMIA"),
}


def get_attack(name: str, params: dict):
    try:
        module, cls = REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown attack {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)(params)
