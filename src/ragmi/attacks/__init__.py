"""Membership-inference attacks.  Each module implements :class:`ragmi.attacks.base.Attack`;
registering one here and giving it its parameters and their defaults in config/schema.yaml
(``attacks.<name>``) is all it takes to add an attack."""

from __future__ import annotations

import importlib

from ..errors import ConfigError

REGISTRY = {
    # config key: (module, class)
    "rag_mia": ("rag_mia", "RagMIA"),
    "dcmi": ("dcmi", "DCMI"),
    "mba": ("mba", "MBA"),
    "s2mia": ("s2mia", "S2MIA"),
    "menta": ("menta", "MEntA"),
    "ia": ("ia", "IA"),
    "extraction": ("extraction", "Extraction"),
}


def attack_class(name: str):
    try:
        module, cls = REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown attack {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def attack_channels(name: str, variant: str) -> tuple[str, ...]:
    """The response channels ``variant`` of attack ``name`` reads (text, first-token or token log-probs)."""
    return attack_class(name).variant_channels(variant)


def needs_prepare(name: str) -> bool:
    return bool(attack_class(name).needs_prepare)


def get_attack(name: str, params: dict):
    return attack_class(name)(params)
