"""A copy of ragmi's workflow with extra plug-ins added the documented way, for the tests.

``docs/architecture.md`` says that adding an attack or a defense is one module, one registry line and
one schema entry.  :func:`workflow_with` does exactly that to a copy of the repository's workflow
(``Snakefile``, ``rules/``, ``workflow_scripts/``, ``config/``, ``envs/``, ``profiles/``, ``report/``,
``src/``): the tests then run Snakemake on the copy (``run_snakemake(..., snakefile=tree / "Snakefile")`` with
``PYTHONPATH=tree/src``), so a test-only plug-in never sits in the production registries.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("Snakefile", "rules", "workflow_scripts", "config", "envs", "profiles", "report", "src")


@dataclass(frozen=True)
class Plugin:
    """One plug-in: ``package`` is ``attacks``, ``defenses`` or ``targets``; ``name`` its config key
    (an attack's name under ``attacks``, a defense's ``kind``, a target kind); ``module``/``cls`` what
    the registry line names; ``source`` the module's code; ``schema`` its parameters' schema entry (a
    target kind's: the block of its own keys, ``None`` for a kind without one)."""

    package: str
    name: str
    module: str
    cls: str
    source: str
    schema: dict


def workflow_with(dest: Path, *plugins: Plugin) -> Path:
    """``dest`` holding a copy of the workflow with ``plugins`` added: their modules under
    ``src/ragmi/<package>/``, one line each in that package's ``REGISTRY`` and one schema entry each
    (``attacks.<name>``, ``$defs.defenses.<kind>``, or a target kind's name in ``targets.<t>.kind``'s
    enum with its block ``targets.<t>.<name>``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / part)
    schema_path = dest / "config" / "schema.yaml"
    schema = yaml.safe_load(schema_path.read_text())
    for p in plugins:
        package = dest / "src" / "ragmi" / p.package
        (package / f"{p.module}.py").write_text(p.source)
        init = package / "__init__.py"
        text = init.read_text()
        anchor = "REGISTRY = {\n"
        assert anchor in text, f"no REGISTRY in {init}"
        init.write_text(text.replace(anchor, f'{anchor}    "{p.name}": ("{p.module}", "{p.cls}"),\n', 1))
        if p.package == "attacks":
            schema["properties"]["attacks"]["properties"][p.name] = p.schema
        else:
            add_schema_entry(schema, p)
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False, allow_unicode=True))
    return dest


def add_schema_entry(schema: dict, p: Plugin) -> None:
    """The schema entry of a defense or target-kind plug-in, added to ``schema`` in place."""
    if p.package == "defenses":
        schema["$defs"]["defenses"][p.name] = p.schema
    elif p.package == "targets":
        target = schema["properties"]["targets"]["additionalProperties"]["properties"]
        target["kind"]["enum"].append(p.name)
        if p.schema is not None:
            target[p.name] = p.schema
    else:
        raise ValueError(f"plug-in package {p.package!r}: attacks, defenses or targets")


def tree_env(tree: Path, env: dict | None = None) -> dict:
    """The environment of a Snakemake run on ``tree``: its ``src`` first on the Python path."""
    import os

    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = str(tree / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


PLUGINS = Path(__file__).resolve().parent / "plugins"

# Mind the Hook's inert-hook case (tests/plugins/stub_fixture.py): its schema entry, as a defense's
STUB_FIXTURE = Plugin(
    package="defenses",
    name="stub_fixture",
    module="stub_fixture",
    cls="StubFixture",
    source=(PLUGINS / "stub_fixture.py").read_text(),
    schema={
        "type": "object",
        "additionalProperties": False,
        "description": "TEST-ONLY Mind-the-Hook fixture, Laplace retrieval noise plus a pass-through output hook",
        "properties": {
            "epsilon": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
            "sensitivity": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
            "pool": {"type": "integer", "minimum": 1, "default": 20},
        },
    },
)


# A toy attack (tests/plugins/toy_attack.py) with its schema entry, as an attack's
TOY_ATTACK = Plugin(
    package="attacks",
    name="toy",
    module="toy_attack",
    cls="ToyAttack",
    source=(PLUGINS / "toy_attack.py").read_text(),
    schema={
        "type": "object",
        "additionalProperties": False,
        "description": "TEST-ONLY toy attack: asks whether the candidate's first words are in the context",
        "properties": {
            "n_words": {"type": "integer", "minimum": 1, "default": 8},
            "cv_folds": {"type": "integer", "minimum": 2, "default": 2},
            "proxy": {"type": "string"},
        },
    },
)


def register_in_process(monkeypatch, plugin: Plugin) -> None:
    """Add ``plugin`` to this process's ragmi (its module, registry line and schema entry) for the
    duration of a test: what :func:`workflow_with` does to a copy, done to the loaded modules."""
    import importlib
    import importlib.util
    import sys

    from ragmi import schema as schemas

    package = importlib.import_module(f"ragmi.{plugin.package}")
    name = f"ragmi.{plugin.package}.{plugin.module}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = f"ragmi.{plugin.package}"
    exec(compile(plugin.source, str(PLUGINS / f"{plugin.module}.py"), "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(package.REGISTRY, plugin.name, (plugin.module, plugin.cls))
    schema = schemas.load_schema()
    if plugin.package == "attacks":
        schema["properties"]["attacks"]["properties"][plugin.name] = plugin.schema
    else:
        add_schema_entry(schema, plugin)
    path = schemas.SCHEMA_PATH.resolve()
    monkeypatch.setitem(schemas._SCHEMAS, (str(path), path.stat().st_mtime_ns), schema)


# A toy target kind (tests/plugins/toy_kind.py) with its schema entry: its name in the kind enum and
# the block of its own keys
TOY_KIND = Plugin(
    package="targets",
    name="echo",
    module="toy_kind",
    cls="EchoKind",
    source=(PLUGINS / "toy_kind.py").read_text(),
    schema={
        "type": "object",
        "additionalProperties": False,
        "description": "TEST-ONLY echo target: answers every query with `answer` and its first `words` words",
        "properties": {
            "answer": {"type": "string", "default": "Yes"},
            "words": {"type": "integer", "minimum": 0, "default": 3},
        },
    },
)


# A toy DP defense (tests/plugins/toy_dp.py) with its schema entry, as a defense's
TOY_DP = Plugin(
    package="defenses",
    name="toy_dp",
    module="toy_dp",
    cls="ToyDp",
    source=(PLUGINS / "toy_dp.py").read_text(),
    schema={
        "type": "object",
        "additionalProperties": False,
        "description": "TEST-ONLY DP defense whose noise is a quarter of what its claim needs",
        "properties": {
            "epsilon": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
            "sensitivity": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
            "pool": {"type": "integer", "minimum": 1, "default": 20},
        },
    },
)
