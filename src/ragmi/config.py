"""Load, default-fill and validate a ragmi configuration against ``config/schema.yaml``.

A bad value raises :class:`~ragmi.errors.ConfigError` with one sentence naming the key and what is
allowed, e.g. ``config key targets.smollm2-rag.k: 0 is less than the minimum of 1``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

from .errors import ConfigError

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


_DefaultingValidator = _with_defaults(Draft202012Validator)


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    return yaml.safe_load(Path(path).read_text())


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Return a default-filled copy of ``config``; raise ConfigError on the first problem."""
    schema = schema or load_schema()
    cfg = copy.deepcopy(config) if config else {}
    # Two passes: defaults for nested objects are filled once their parent default exists.
    for _ in range(2):
        error = best_match(_DefaultingValidator(schema).iter_errors(cfg))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"config key {where}: {error.message}")
    _check_references(cfg)
    return cfg


def _check_references(cfg: dict) -> None:
    attacker = cfg.setdefault("attacker", {"temperature": 0.0})
    if "generator" not in attacker:
        attacker["generator"] = cfg["targets"][sorted(cfg["targets"])[0]]["generator"]
    if attacker["generator"] not in cfg.get("generators", {}):
        raise ConfigError(
            f"config key attacker.generator: {attacker['generator']!r} is not defined under 'generators'"
        )
    for name, t in cfg["targets"].items():
        for kind in ("retriever", "generator"):
            section = kind + "s"
            if t[kind] not in cfg.get(section, {}):
                raise ConfigError(
                    f"config key targets.{name}.{kind}: {t[kind]!r} is not defined under '{section}' "
                    f"(defined: {', '.join(sorted(cfg.get(section, {}))) or 'none'})"
                )
    for name, g in cfg.get("generators", {}).items():
        if g["backend"] == "openai" and "base_url" not in g:
            raise ConfigError(f"config key generators.{name}.base_url: required for backend 'openai'")
        if g["backend"] != "openai" and "base_url" in g:
            raise ConfigError(
                f"config key generators.{name}.base_url: only used with backend 'openai' "
                f"(backend is {g['backend']!r})"
            )


def load_config(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
    return validate_config(raw or {})
