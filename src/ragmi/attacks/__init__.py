"""Membership-inference attacks.  Each module implements :class:`ragmi.attacks.base.Attack`."""

from __future__ import annotations

from ..errors import ConfigError


def get_attack(name: str, params: dict):
    if name == "rag_mia":
        from .rag_mia import RagMIA

        return RagMIA(params)
    raise ConfigError(f"unknown attack {name!r}")
