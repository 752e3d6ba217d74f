"""Membership-inference attacks.  Each module implements :class:`ragmi.attacks.base.Attack`;
registering one here and giving it its parameters and their defaults in config/schema.yaml
(``attacks.<name>``) is all it takes to add an attack."""

from __future__ import annotations

from ..schema import Registry

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


_LOOKUP = Registry(__name__, REGISTRY, lambda name, known, _where: f"unknown attack {name!r}; known: {known}")


def attack_class(name: str):
    return _LOOKUP.cls(name)


def attack_channels(name: str, variant: str) -> tuple[str, ...]:
    """The response channels ``variant`` of attack ``name`` reads (text, first-token or token log-probs)."""
    return attack_class(name).variant_channels(variant)


def needs_prepare(name: str) -> bool:
    return bool(attack_class(name).needs_prepare)


def get_attack(name: str, params: dict, **kwargs):
    """Attack ``name`` built from its config entry; ``kwargs``: ``seed``, ``logprobs``, ``validated``
    (:class:`ragmi.attacks.base.Attack`)."""
    return attack_class(name)(params, **kwargs)
