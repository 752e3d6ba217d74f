"""The configuration schema (``config/schema.yaml``) and the plug-in registries' shared lookup: the
bottom floor of ragmi's imports, below the plug-ins and the validator.

Every plug-in (attack, defense, framework) reads its parameters' defaults from here
(:func:`plugin_params`); :mod:`ragmi.config` validates a whole configuration by building the plug-ins,
and :mod:`ragmi.plan` answers questions about a validated one.  This module imports nothing of ragmi's
but :mod:`ragmi.errors` and :mod:`ragmi.io`, so a plug-in can never import the validator back.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from pathlib import Path

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

from .errors import ConfigError
from .io import read_project_yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


def _with_defaults(cls):
    validate_props = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return validators.extend(cls, {"properties": set_defaults})


DefaultingValidator = _with_defaults(Draft202012Validator)


_SCHEMAS: dict[tuple[str, int], dict] = {}


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    """The parsed schema (a fresh copy; parsed once per file version: validation reads it for every
    plug-in, and parsing YAML is what made validating a config take seconds)."""
    p = Path(path).resolve()
    key = (str(p), p.stat().st_mtime_ns)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = read_project_yaml(p)
    return copy.deepcopy(_SCHEMAS[key])


def defaults_and_check(schema_part: dict, params: dict, where: str, root: dict) -> dict:
    """Fill ``schema_part``'s defaults into a copy of ``params`` and validate it (errors name ``where``)."""
    sub = {**schema_part, "$defs": root.get("$defs", {})}
    out = copy.deepcopy(dict(params or {}))
    for _ in range(2):
        error = best_match(DefaultingValidator(sub).iter_errors(out))
    if error is not None:
        path = ".".join([where] + [str(p) for p in error.absolute_path])
        raise ConfigError(f"config key {path}: {error.message}")
    return out


def plugin_schema(kind: str, name: str, schema: dict | None = None) -> dict:
    """The schema entry of one plug-in: ``kind`` is ``attacks``, ``defenses`` or ``frameworks``."""
    schema = schema or load_schema()
    entries = schema["properties"]["attacks"]["properties"] if kind == "attacks" else schema["$defs"][kind]
    if name not in entries:
        raise ConfigError(f"unknown {kind[:-1]} {name!r}; known: {', '.join(sorted(entries))}")
    return entries[name]


def plugin_params(kind: str, name: str, params: dict | None = None, where: str | None = None) -> dict:
    """``params`` of one attack, defense or framework with the schema's defaults filled in, validated.

    The schema is the only place where a plug-in's defaults live; modules read the returned dict
    with plain indexing (``p["key"]``), never ``p.get(key, default)``.
    """
    schema = load_schema()
    return defaults_and_check(plugin_schema(kind, name, schema), params or {}, where or f"{kind}.{name}", schema)


def section_params(section: str, params: dict | None = None, where: str | None = None) -> dict:
    """One entry of a map section (``generators``, ``retrievers``, ``targets``) with defaults filled."""
    schema = load_schema()
    part = schema["properties"][section]["additionalProperties"]
    return defaults_and_check(part, params or {}, where or section, schema)


class Registry:
    """The lookup over a plug-in registry: ``entries`` maps a config name to (module of ``package``, class
    name), the module imported only when its class is asked for.  The dict is held, not copied: a line
    added to the package's ``REGISTRY`` is found.  ``unknown(name, known, where)`` words the error for a
    name that is not registered (``known``: the sorted names, comma-separated)."""

    def __init__(
        self,
        package: str,
        entries: dict[str, tuple[str, str]],
        unknown: Callable[[str, str, str | None], str],
    ):
        self.package = package
        self.entries = entries
        self._unknown = unknown

    def cls(self, name: str, where: str | None = None):
        """The class registered as ``name``; one ConfigError naming the known ones otherwise."""
        try:
            module, cls = self.entries[name]
        except KeyError:
            raise ConfigError(self._unknown(name, ", ".join(sorted(self.entries)), where)) from None
        return getattr(importlib.import_module(f"{self.package}.{module}"), cls)
