"""Load, default-fill and validate a ragmi configuration against ``config/schema.yaml``.

A bad value raises :class:`~ragmi.errors.ConfigError` with one sentence naming the key and what is
allowed, e.g. ``config key targets.smollm2-rag.k: 0 is less than the minimum of 1``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
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


_DefaultingValidator = _with_defaults(Draft202012Validator)


_SCHEMAS: dict[tuple[str, int], dict] = {}


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    """The parsed schema (a fresh copy; parsed once per file version: validation reads it for every
    plug-in, and parsing YAML is what made validating a config take seconds)."""
    p = Path(path).resolve()
    key = (str(p), p.stat().st_mtime_ns)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = read_project_yaml(p)
    return copy.deepcopy(_SCHEMAS[key])


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Return a default-filled copy of ``config``; raise ConfigError on the first problem."""
    schema = schema or load_schema()
    cfg = copy.deepcopy(config) if config else {}
    apply_remote_presets(cfg, schema)
    # Two passes: defaults for nested objects are filled once their parent default exists.
    for _ in range(2):
        error = best_match(_DefaultingValidator(schema).iter_errors(cfg))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"config key {where}: {error.message}")
    _check_references(cfg)
    return cfg


def apply_remote_preset(remote: dict, where: str, schema: dict | None = None) -> dict:
    """``remote`` (a target's ``remote`` block, before validation) with the keys of its ``preset``
    filled in where it sets none (``$defs.remote_presets``: the ``blocking`` keys, and the ``stream``
    keys on top when it sets ``stream: true``); keys the block sets win."""
    if not isinstance(remote, dict) or "preset" not in remote:
        return remote
    presets = (schema or load_schema())["$defs"]["remote_presets"]
    name = remote["preset"]
    if name not in presets or name == "description":
        known = ", ".join(sorted(k for k in presets if k != "description"))
        raise ConfigError(f"config key {where}.preset: unknown preset {name!r}; known: {known}")
    keys = dict(presets[name]["blocking"])
    if remote.get("stream") is True:
        keys.update(presets[name]["stream"])
    if "session_id" in remote:  # a fixed session: the preset's way of opening one does not apply
        for k in ("session_open_path", "session_id_path", "session"):
            keys.pop(k, None)
    out = copy.deepcopy(keys)
    out.update(remote)
    return out


def apply_remote_presets(cfg: dict, schema: dict) -> None:
    """Fill every remote target's preset keys in place (before the schema's defaults)."""
    for name, t in (cfg.get("targets") or {}).items():
        if isinstance(t, dict) and isinstance(t.get("remote"), dict):
            t["remote"] = apply_remote_preset(t["remote"], f"targets.{name}.remote", schema)


def is_remote(target: dict) -> bool:
    """A validated target of ``kind: remote`` (an HTTP RAG service; ``rag``, the schema's default, runs
    in process)."""
    return target["kind"] == "remote"


def is_python(target: dict) -> bool:
    """A validated target of ``kind: python`` (a user's RAG chain called in process)."""
    return target["kind"] == "python"


def is_external(target: dict) -> bool:
    """A target whose retrieval and generation are not ragmi's (kind remote or python): no index, no
    database of ragmi's, no defenses, controls, frameworks or canaries."""
    return target["kind"] in ("remote", "python")


def is_plain(target: dict) -> bool:
    """A validated target that is undefended and not a negative control: the attacks' baseline."""
    return not target["defenses"] and target["control"] == "none"


def default_generator(cfg: dict) -> str:
    """The generator of the first in-process target (the attacker's and defender's default); with
    only remote targets, the first configured generator."""
    local = [t for t in sorted(cfg["targets"]) if not is_external(cfg["targets"][t])]
    if local:
        return cfg["targets"][local[0]]["generator"]
    return sorted(cfg.get("generators", {}))[0] if cfg.get("generators") else ""


def _check_references(cfg: dict) -> None:
    """Every name the config uses is defined, and each section's keys fit the others (in this order:
    the first problem found is the one reported)."""
    _check_attacker(cfg)
    _check_remote(cfg)
    _check_stores(cfg)
    _check_target_components(cfg)
    _derive_controls(cfg)
    _check_folds(cfg)
    _check_frameworks(cfg)
    built = _build_defenses(cfg)
    needs_llm = _check_target_defenses(cfg, built)
    _check_target_attacks(cfg)
    _check_audit(cfg)
    _check_gate(cfg)
    _check_utility(cfg)
    _check_defender(cfg, needs_llm)
    _check_defense_vocabularies(cfg, built)
    _check_models(cfg)
    _check_generator_endpoints(cfg)


def _check_attacker(cfg: dict) -> None:
    """The attacker's generator (default: the first in-process target's) is defined."""
    attacker = cfg["attacker"]  # the schema's default: {"temperature": 0.0}
    if "generator" not in attacker:
        attacker["generator"] = default_generator(cfg)
    if attacker["generator"] not in cfg.get("generators", {}):
        raise ConfigError(f"config key attacker.generator: {attacker['generator']!r} is not defined under 'generators'")


def _check_target_components(cfg: dict) -> None:
    """The retriever and generator of every in-process target are defined."""
    for name, t in cfg["targets"].items():
        if is_external(t):
            continue
        for kind in ("retriever", "generator"):
            section = kind + "s"
            if t[kind] not in cfg.get(section, {}):
                raise ConfigError(
                    f"config key targets.{name}.{kind}: {t[kind]!r} is not defined under '{section}' "
                    f"(defined: {', '.join(sorted(cfg.get(section, {}))) or 'none'})"
                )


def _check_generator_endpoints(cfg: dict) -> None:
    """``base_url`` is given for, and only for, the generators of backend 'openai'."""
    for name, g in cfg.get("generators", {}).items():
        if g["backend"] == "openai" and "base_url" not in g:
            raise ConfigError(f"config key generators.{name}.base_url: required for backend 'openai'")
        if g["backend"] != "openai" and "base_url" in g:
            raise ConfigError(
                f"config key generators.{name}.base_url: only used with backend 'openai' (backend is {g['backend']!r})"
            )


def fold_requirements(cfg: dict, dataset: str | None = None) -> list[tuple[str, int]]:
    """(attack, cv_folds) of every run attack that scores its reference candidates out of fold (its
    class's ``out_of_fold``: RAG-MIA's gray-box ensemble, S²MIA's classifier), on ``dataset`` or on
    any dataset: each needs at least ``cv_folds`` reference members and non-members."""
    from .attacks import attack_class

    used = {
        a
        for t in cfg["targets"]
        if dataset is None or dataset in target_datasets(cfg, t)
        for a in target_attacks(cfg, t)
    }
    return [
        (attack, int(cfg["attacks"][attack]["cv_folds"]))
        for attack in sorted(used)
        if attack in cfg["attacks"] and attack_class(attack).out_of_fold  # an unconfigured one: _check_target_attacks
    ]


def min_reference(cfg: dict, dataset: str) -> tuple[int, str]:
    """The fewest reference candidates per class that ``dataset``'s split may have (its attacks'
    largest ``cv_folds``; 0 when none needs folds) and the config key that asks for it, for
    ``split.allow_shrink`` and for candidates files whose roles are given."""
    needs = fold_requirements(cfg, dataset)
    if not needs:
        return 0, ""
    attack, folds = max(needs, key=lambda n: n[1])
    return folds, f"attacks.{attack}.cv_folds"


def _check_folds(cfg: dict) -> None:
    """An attack that scores its reference candidates out of fold needs at least ``cv_folds``
    reference members and non-members: say so before any model runs, not in the score job at the
    end."""
    n_ref = cfg.get("split", {}).get("n_reference")
    if n_ref is None:
        return
    for attack, folds in fold_requirements(cfg):
        if n_ref < folds:
            raise ConfigError(
                f"config key split.n_reference: {n_ref} reference candidates per class, but "
                f"attacks.{attack}.cv_folds is {folds}: its out-of-fold reference scores need at least "
                f"cv_folds members and non-members (lower cv_folds or raise split.n_reference)"
            )


def _check_remote(cfg: dict) -> None:
    """Remote targets: the keys their API needs, nothing that only an in-process target has, and the
    datasets each target names; the file of every dataset of source 'candidates'."""
    _check_candidates_files(cfg)
    for name, t in cfg["targets"].items():
        _check_target_datasets(cfg, name, t)
        if is_remote(t):
            _check_remote_target(name, t)
        elif "remote" in t:
            raise ConfigError(f"config key targets.{name}.remote: only used with kind 'remote'")
        if is_python(t):
            _check_python_target(name, t)
        elif "python" in t:
            raise ConfigError(f"config key targets.{name}.python: only used with kind 'python'")


def store_target_of(cfg: dict, target: str) -> str | None:
    """The store a target plays the membership game in (``targets.<t>.store``), or None."""
    return cfg["targets"][target].get("store")


# Keys of stores.<s> besides the common ones (kind, collection, host, port, embedder, id_prefix,
# batch_size), each with its default, per kind (the schema lists every key; docs/vector-stores.md).
STORE_KIND_KEYS: dict[str, dict] = {
    "chroma": {"port": 8000},
    "qdrant": {
        "port": 6333,
        "url": None,
        "path": None,
        "api_key_env": None,
        "vector_name": None,
        "text_key": "page_content",
        "metadata_key": "metadata",
    },
    "pgvector": {
        "port": 5432,
        "dbname": "postgres",
        "user": "postgres",
        "password_env": None,
        "table": "langchain_pg_embedding",
        "id_column": "id",
        "text_column": "document",
        "embedding_column": "embedding",
        "metadata_column": "cmetadata",
        "collection_table": "langchain_pg_collection",
        "collection_id_column": "collection_id",
    },
}
_STORE_COMMON_KEYS = {"kind", "collection", "host", "port", "embedder", "id_prefix", "batch_size"}


def _check_store_specs(cfg: dict) -> None:
    """Each store names only keys of its kind; fill the kind's defaults; the collection is named."""
    keys_of = {k: set(v) | _STORE_COMMON_KEYS for k, v in STORE_KIND_KEYS.items()}
    for name, s in sorted(cfg["stores"].items()):
        kind = s["kind"]
        for key in sorted(set(s) - keys_of[kind]):
            users = sorted(k for k, v in keys_of.items() if key in v)
            raise ConfigError(f"config key stores.{name}.{key}: only used with kind {' or '.join(users)}, not {kind}")
        for key, default in STORE_KIND_KEYS[kind].items():
            s.setdefault(key, default)
        if kind == "qdrant" and s["url"] and s["path"]:
            raise ConfigError(f"config key stores.{name}.path: set url (a server) or path (local mode), not both")
        if kind == "pgvector" and not s["collection_table"]:
            s.setdefault("collection", s["table"])
        if "collection" not in s:
            raise ConfigError(f"config key stores.{name}.collection: required for kind {kind}")


def _check_stores(cfg: dict) -> None:
    """A target's ``store`` (the membership game, docs/vector-stores.md) is a defined store, of a
    remote target, with one dataset whose split draws the members; one target per store (two games
    in one collection would count each other's documents as members)."""
    _check_store_specs(cfg)
    users: dict[str, str] = {}
    for name, t in sorted(cfg["targets"].items()):
        if "store" not in t:
            continue
        where = f"config key targets.{name}.store"
        if t["store"] not in cfg["stores"]:
            raise ConfigError(
                f"{where}: {t['store']!r} is not defined under 'stores' (defined: {', '.join(sorted(cfg['stores'])) or 'none'})"
            )
        if not is_remote(t):
            raise ConfigError(f"{where}: only a remote target (kind remote) plays the game in a store")
        if len(t.get("datasets") or []) != 1:
            raise ConfigError(f"config key targets.{name}.datasets: a target with a store names exactly one dataset")
        d = t["datasets"][0]
        if cfg["datasets"][d]["source"] == "candidates":
            raise ConfigError(
                f"config key targets.{name}.datasets.0: {d!r} is a labelled 'candidates' file; the game draws its "
                "members from a corpus split (any other source)"
            )
        if t["store"] in users:
            raise ConfigError(f"{where}: store {t['store']!r} is already the store of target {users[t['store']]!r}")
        users[t["store"]] = name


def _check_candidates_files(cfg: dict) -> None:
    """Every dataset of source 'candidates' names a file that exists."""
    for name, d in cfg["datasets"].items():
        if d["source"] == "candidates":
            if "path" not in d:
                raise ConfigError(f"config key datasets.{name}.path: required for source 'candidates'")
            if not Path(d["path"]).expanduser().is_file():
                raise ConfigError(f"config key datasets.{name}.path: file {d['path']} does not exist")


def _check_target_datasets(cfg: dict, name: str, t: dict) -> None:
    """The datasets target ``name`` lists are defined."""
    for i, d in enumerate(t.get("datasets") or []):
        if d not in cfg["datasets"]:
            raise ConfigError(
                f"config key targets.{name}.datasets.{i}: {d!r} is not defined under 'datasets' "
                f"(defined: {', '.join(sorted(cfg['datasets']))})"
            )


def _check_remote_target(name: str, t: dict) -> None:
    """A remote target has none of an in-process target's keys (retriever, generator, defenses)."""
    where = f"config key targets.{name}"
    for key in ("retriever", "generator"):
        if key in t:
            raise ConfigError(f"{where}.{key}: a remote target does its own retrieval and generation; remove the key")
    if t["defenses"]:
        raise ConfigError(
            f"{where}.defenses: a remote target's defenses are the service's own; ragmi cannot add hooks to "
            "it (serve a defended ragmi target with `ragmi serve-target` instead)"
        )
    _check_remote_api(f"{where}.remote", t["remote"])


def _check_remote_api(where: str, r: dict) -> None:
    """The ``remote`` block: the keys its ``api`` needs and none that only the other api reads."""
    if r["api"] == "json":
        for key in ("body", "answer_path"):
            if key not in r:
                raise ConfigError(f"{where}.{key}: required for api 'json'")
        if r["logprobs"] and not ("token_logprobs_path" in r or "top_logprobs_path" in r):
            raise ConfigError(f"{where}.logprobs: true needs token_logprobs_path or top_logprobs_path for api 'json'")
    else:
        for key in ("body", "answer_path", "token_logprobs_path", "top_logprobs_path", *STREAM_JSON_KEYS):
            if key in r:
                raise ConfigError(f"{where}.{key}: only used with api 'json' (api is 'openai')")
        if r["path"]:
            raise ConfigError(f"{where}.path: only used with api 'json' (api openai posts to <url>/chat/completions)")
    if r["api"] == "json" and r["stream"]:
        if "stream_path" not in r:
            raise ConfigError(f"{where}.stream_path: required for a streamed answer of api 'json' (stream: true)")
        if r["logprobs"]:
            raise ConfigError(
                f"{where}.logprobs: a streamed answer of api 'json' is read without log-probabilities; "
                "set stream: false or logprobs: false"
            )
    elif r["api"] == "json":
        for key in STREAM_JSON_KEYS:
            if key in r:
                raise ConfigError(f"{where}.{key}: only used with stream: true")
    _check_session(where, r)
    if "sources_path" in r and r["sources_path"].count("*") > 1:
        raise ConfigError(f"{where}.sources_path: at most one '*' (the list of sources), got {r['sources_path']!r}")
    if r.get("api_key_env") is not None and not r["api_key_env"].strip():
        raise ConfigError(f"{where}.api_key_env: must name an environment variable")


STREAM_JSON_KEYS = (
    "stream_path",
    "stream_event_path",
    "stream_text_events",
    "stream_end_event",
    "stream_error_event",
    "stream_replace_event",
)
SESSION_KEYS = ("session_open_path", "session_id_path", "session", "session_id")


def _check_session(where: str, r: dict) -> None:
    """The session keys (``ragmi.rag.remote.Sessions``): api json only; an opened session needs the
    path of its id and a place for it; a fixed ``session_id`` opens none."""
    used = [k for k in SESSION_KEYS if k in r]
    if not used:
        return
    if r["api"] != "json":
        raise ConfigError(f"{where}.{used[0]}: only used with api 'json' (api is 'openai')")
    if "session_id" in r and "session_open_path" in r:
        raise ConfigError(
            f"{where}.session_id: a fixed session opens none; remove session_open_path (or session_id to "
            "open a session per query)"
        )
    if "session_open_path" not in r and "session_id" not in r:
        raise ConfigError(f"{where}.{used[0]}: only used with session_open_path (or a fixed session_id)")
    if "session_open_path" in r and "session_id_path" not in r:
        raise ConfigError(f"{where}.session_id_path: required with session_open_path (where its answer holds the id)")
    if "session_id" in r and ("session_id_path" in r or "session" in r):
        key = "session_id_path" if "session_id_path" in r else "session"
        raise ConfigError(f"{where}.{key}: only used with session_open_path (a fixed session_id opens none)")
    if "{session_id}" not in r["path"] and "{session_id}" not in json.dumps(r.get("body"), ensure_ascii=False):
        raise ConfigError(
            f"{where}.path: a session is used but neither path nor body says where its id goes ({{session_id}})"
        )


def _check_python_target(name: str, t: dict) -> None:
    """A python target has none of an in-process ragmi target's keys, exactly one of callable and
    factory, and its module can be found (``ragmi.rag.python_target.check_reference``)."""
    from .rag.python_target import check_reference

    where = f"config key targets.{name}"
    for key in ("retriever", "generator"):
        if key in t:
            raise ConfigError(f"{where}.{key}: a python target does its own retrieval and generation; remove the key")
    if t["defenses"]:
        raise ConfigError(
            f"{where}.defenses: a python target's defenses are the chain's own; ragmi cannot add hooks to it"
        )
    p = t["python"]
    if ("callable" in p) == ("factory" in p):
        raise ConfigError(f"{where}.python: give exactly one of callable (called per query) and factory")
    check_reference(p, f"targets.{name}.python")


CONTROLS = (  # controls.<flag>: (target name suffix, what changes)
    ("null_database", "--null-db", {"database": "null_control", "control": "null_database"}),
    ("no_retrieval", "--no-retrieval", {"k": 0, "control": "no_retrieval"}),
)


def control_base(cfg: dict, name: str) -> str | None:
    """The target whose fitted attack a derived negative control ``name`` applies (``<base>--null-db``,
    ``<base>--no-retrieval``), None for any other target.  Such a control answers only the evaluation
    candidates' queries; its scores read the base target's answers for the reference candidates, so every
    fitted part of the attack (θ, γ, thresholds, ensembles, classifiers) is the base target's and is
    applied, never refitted, to the control's answers (docs/attacks.md, "Negative controls")."""
    t = cfg["targets"].get(name)
    if t is None or t["control"] == "none":
        return None
    for _flag, suffix, change in CONTROLS:
        if name.endswith(suffix) and t["control"] == change["control"]:
            base = name[: -len(suffix)]
            if base in cfg["targets"] and cfg["targets"][base]["control"] == "none":
                return base
    return None


def _derive_controls(cfg: dict) -> None:
    """Add the negative-control targets of every undefended target (``controls``)."""
    controls = cfg["controls"]
    for i, a in enumerate(controls["attacks"] or []):
        if a not in cfg["attacks"]:
            raise ConfigError(f"config key controls.attacks.{i}: {a!r} is not configured under 'attacks'")
    for name, t in sorted(cfg["targets"].items()):
        if t["defenses"] or t["control"] != "none" or t["database"] != "members" or is_external(t):
            continue
        for flag, suffix, change in CONTROLS:
            if controls[flag] and name + suffix not in cfg["targets"]:
                derived = {**copy.deepcopy(t), **change}
                if controls["attacks"] is not None:
                    derived["attacks"] = list(controls["attacks"])
                cfg["targets"][name + suffix] = derived


def _check_frameworks(cfg: dict) -> None:
    """Each target's framework is registered, its parameters valid (defaults filled in), and the
    models and files it names plausible (ragmi.rag.frameworks)."""
    from .models import check_model_reference
    from .rag.frameworks import build_framework
    from .rag.frameworks.spring import check_embeddings_reference

    for name, t in cfg["targets"].items():
        key = f"targets.{name}.framework"
        if is_external(t):  # the service runs its own pipeline: ragmi cannot choose its framework
            if t["framework"] != "standard":
                raise ConfigError(
                    f"config key {key}: a {t['kind']} target (kind {t['kind']}) does its own retrieval and generation; "
                    f"framework {t['framework']!r} cannot be applied to it"
                )
            continue
        fw = build_framework(t["framework"], t["framework_params"], where=key)
        t["framework_params"] = fw.params
        gen = cfg["generators"][t["generator"]]
        if fw.needs_local_model:
            if fw.params["model"] == "generator":
                if gen["backend"] not in ("vllm", "transformers"):
                    raise ConfigError(
                        f"config key {key}_params.model: 'generator' reads the target generator's weights, and "
                        f"generator {t['generator']!r} is an external endpoint (backend {gen['backend']}); "
                        "name a local folder or a Hugging Face model id"
                    )
            else:
                check_model_reference(fw.params["model"], f"{key}_params.model")
        if fw.name == "spring":
            if gen["backend"] != "transformers":
                raise ConfigError(
                    f"config key {key}: spring writes its virtual tokens into the generator's embedding table, so "
                    f"it needs a generator with backend transformers (generator {t['generator']!r} is "
                    f"{gen['backend']})"
                )
            check_embeddings_reference(fw.params["embeddings"], f"{key}_params.embeddings")


def _check_models(cfg: dict) -> None:
    """Every model the config names is a packaged model, an existing folder or a plausible Hub id."""
    from .attacks import attack_class
    from .models import PACKAGED_EMBEDDERS, PACKAGED_GGUF, check_model_reference

    for name, r in cfg.get("retrievers", {}).items():
        if r.get("kind") == "dense":
            check_model_reference(r["embedder"], f"retrievers.{name}.embedder", PACKAGED_EMBEDDERS)
    for name, g in cfg.get("generators", {}).items():
        if g["backend"] in ("vllm", "transformers"):  # openai: the endpoint's own model name
            check_model_reference(g["model"], f"generators.{name}.model", PACKAGED_GGUF)
    for attack, params in sorted(cfg["attacks"].items()):  # the models each attack's class says it names
        for key, kind in attack_class(attack).model_references(params):
            where = f"attacks.{attack}.{key}"
            if kind == "attacker-weights":
                attacker = cfg["attacker"]["generator"]
                if cfg["generators"][attacker]["backend"] == "openai":
                    raise ConfigError(
                        f"{where} is {params[key]!r}, but the attacker generator {attacker!r} is an openai "
                        f"endpoint, whose weights {attack}'s {key} cannot load: name a local model folder or "
                        "Hugging Face id"
                    )
            else:
                check_model_reference(params[key], where, PACKAGED_EMBEDDERS if kind == "embedder" else ())


def _build_defenses(cfg: dict) -> dict:
    """Each defense's kind and parameters valid (defaults written back into ``cfg``); the built
    defenses by name."""
    from .defenses import build_defense  # the registry imports this module

    defenses = cfg.setdefault("defenses", {})
    built = {}
    for name, spec in defenses.items():
        d = build_defense(name, spec)
        defenses[name] = {"kind": d.kind, **({"hooks": list(d.hooks)} if "hooks" in spec else {}), **d.params}
        built[name] = d
    return built


def _check_target_defenses(cfg: dict, built: dict) -> bool:
    """The defenses each target lists are defined, and a defense that needs the whole database's
    scores sits on a dense flat-index retriever; whether any used defense needs the defender LLM."""
    needs_llm = False
    for tname, t in cfg["targets"].items():
        for i, dname in enumerate(t.get("defenses", [])):
            if dname not in built:
                raise ConfigError(
                    f"config key targets.{tname}.defenses.{i}: {dname!r} is not defined under 'defenses' "
                    f"(defined: {', '.join(sorted(built)) or 'none'})"
                )
            d = built[dname]
            needs_llm = needs_llm or d.needs_llm
            r = cfg.get("retrievers", {}).get(t.get("retriever"), {})
            if d.needs_all_scores and (r.get("kind") != "dense" or r.get("index") not in ("flat_ip", "flat_l2")):
                raise ConfigError(
                    f"config key targets.{tname}.defenses.{i}: defense {dname!r} ({d.kind}) needs the scores "
                    f"of the whole database, which only a dense retriever with a flat index gives "
                    f"(retriever {t['retriever']!r} is {r.get('kind')}/{r.get('index', '-')})"
                )
    return needs_llm


def _check_target_attacks(cfg: dict) -> None:
    """The attacks each target lists are configured."""
    for tname, t in cfg["targets"].items():
        for i, a in enumerate(t.get("attacks") or []):
            if a not in cfg["attacks"]:
                raise ConfigError(
                    f"config key targets.{tname}.attacks.{i}: {a!r} is not configured under 'attacks' "
                    f"(configured: {', '.join(sorted(cfg['attacks']))})"
                )


def _check_audit(cfg: dict) -> None:
    """The audit's canary targets (in-process ones, or remote ones with a store), canary dataset and MI
    attack are defined."""
    audit = cfg.setdefault("audit", {})
    for i, t in enumerate(audit.get("canary_targets") or []):
        if t not in cfg["targets"]:
            raise ConfigError(f"config key audit.canary_targets.{i}: {t!r} is not defined under 'targets'")
        if is_external(cfg["targets"][t]) and not cfg["targets"][t].get("store"):
            raise ConfigError(
                f"config key audit.canary_targets.{i}: {t!r} is a {cfg['targets'][t]['kind']} target; the canary "
                "experiment builds its own knowledge base, which a service or chain of its own cannot be given "
                "(a remote target with a store can: the membership game plants the canaries in its collection)"
            )
    if audit.get("canary_dataset") is not None and audit["canary_dataset"] not in cfg["datasets"]:
        raise ConfigError(
            f"config key audit.canary_dataset: {audit['canary_dataset']!r} is not defined under 'datasets'"
        )
    if audit.get("mi_attack") is not None and audit["mi_attack"] not in cfg["attacks"]:
        raise ConfigError(f"config key audit.mi_attack: {audit['mi_attack']!r} is not configured under 'attacks'")


def _check_gate(cfg: dict) -> None:
    """Every gate limit has one bound, names configured datasets, targets and attacks (or ``*``), uses
    only the selectors its metric's table has, and has an id of its own (ragmi.gate)."""
    from .gate import METRICS, limit_id

    sections = {"dataset": "datasets", "target": "targets", "attack": "attacks"}
    seen: dict = {}
    for i, lim in enumerate(cfg["gate"]["limits"]):
        key = f"gate.limits.{i}"
        if ("max" in lim) == ("min" in lim):
            raise ConfigError(f"config key {key}: give exactly one of max or min")
        metric = METRICS[lim["metric"]]
        for sel in ("dataset", "target", "attack", "variant"):
            value = lim[sel]
            if value == "*":
                continue
            if sel not in metric.keys:
                raise ConfigError(
                    f"config key {key}.{sel}: metric {lim['metric']} reads the {metric.table} table, whose cells "
                    f"are named by {', '.join(metric.keys)} only"
                )
            if sel in sections and value not in cfg[sections[sel]]:
                raise ConfigError(f"config key {key}.{sel}: {value!r} is not configured under '{sections[sel]}'")
        lid = limit_id(lim)
        if lid in seen:
            raise ConfigError(f"config key {key}.id: {lid!r} is also the id of gate.limits.{seen[lid]}")
        seen[lid] = i


def _check_utility(cfg: dict) -> None:
    """The utility block's targets and headline variant are defined."""
    u = cfg["utility"]
    if u["seed"] is None:
        u["seed"] = cfg["seed"]
    for i, t in enumerate(u["targets"] or []):
        if t not in cfg["targets"]:
            raise ConfigError(f"config key utility.targets.{i}: {t!r} is not defined under 'targets'")
    v = u["headline_variant"]
    if v is not None:
        attack = v.split("/", 1)[0]
        if attack not in cfg["attacks"]:
            raise ConfigError(
                f"config key utility.headline_variant: {v!r} names attack {attack!r}, which is not configured "
                f"under 'attacks' (configured: {', '.join(sorted(cfg['attacks']))})"
            )


def _check_defender(cfg: dict, needs_llm: bool) -> None:
    """The defender's generator (default: the first in-process target's) is defined when a used
    defense needs it."""
    defender = cfg.setdefault("defender", {})
    if "generator" not in defender:
        defender["generator"] = default_generator(cfg)
    if needs_llm and defender["generator"] not in cfg.get("generators", {}):
        raise ConfigError(f"config key defender.generator: {defender['generator']!r} is not defined under 'generators'")


def _check_defense_vocabularies(cfg: dict, built: dict) -> None:
    """With any defended target, no defense's fixed vocabulary overlaps the canary audit's."""
    if any(t["defenses"] for t in cfg["targets"].values()):
        from .audit.canaries import check_outside_vocabulary

        check_outside_vocabulary({n: built[n].vocabulary for n in built})


def _defaults_and_check(schema_part: dict, params: dict, where: str, root: dict) -> dict:
    """Fill ``schema_part``'s defaults into a copy of ``params`` and validate it (errors name ``where``)."""
    sub = {**schema_part, "$defs": root.get("$defs", {})}
    out = copy.deepcopy(dict(params or {}))
    for _ in range(2):
        error = best_match(_DefaultingValidator(sub).iter_errors(out))
    if error is not None:
        path = ".".join([where] + [str(p) for p in error.absolute_path])
        raise ConfigError(f"config key {path}: {error.message}")
    return out


def plugin_schema(kind: str, name: str, schema: dict | None = None) -> dict:
    """The schema entry of one plug-in: ``kind`` is ``attacks`` or ``defenses``."""
    schema = schema or load_schema()
    entries = schema["properties"]["attacks"]["properties"] if kind == "attacks" else schema["$defs"][kind]
    if name not in entries:
        raise ConfigError(f"unknown {kind[:-1]} {name!r}; known: {', '.join(sorted(entries))}")
    return entries[name]


def plugin_params(kind: str, name: str, params: dict | None = None, where: str | None = None) -> dict:
    """``params`` of one attack or defense with the schema's defaults filled in, validated.

    The schema is the only place where a plug-in's defaults live; modules read the returned dict
    with plain indexing (``p["key"]``), never ``p.get(key, default)``.
    """
    schema = load_schema()
    return _defaults_and_check(plugin_schema(kind, name, schema), params or {}, where or f"{kind}.{name}", schema)


def section_params(section: str, params: dict | None = None, where: str | None = None) -> dict:
    """One entry of a map section (``generators``, ``retrievers``, ``targets``) with defaults filled."""
    schema = load_schema()
    part = schema["properties"][section]["additionalProperties"]
    return _defaults_and_check(part, params or {}, where or section, schema)


def target_attacks(cfg: dict, target: str) -> list[str]:
    """The attacks run against ``target``: its ``attacks`` list, or every configured attack."""
    chosen = cfg["targets"][target].get("attacks")
    return sorted(cfg["attacks"]) if chosen is None else sorted(chosen)


def target_needs_defender(cfg: dict, target: str) -> bool:
    from .defenses import defense_class

    return any(defense_class(cfg["defenses"][d]["kind"]).needs_llm for d in cfg["targets"][target]["defenses"])


def dataset_contexts(cfg: dict, dataset: str) -> list[list]:
    """``[[generator, max_model_len], ...]`` of the in-process targets whose prompts
    ``targets.<t>.context_fit`` fits and that retrieve from ``dataset`` (the corpus job's warning)."""
    out = set()
    for name, t in cfg["targets"].items():
        if is_remote(t) or t["context_fit"] == "none" or dataset not in target_datasets(cfg, name):
            continue
        g = cfg["generators"][t["generator"]]
        if g["backend"] != "openai":
            out.add((t["generator"], int(g["max_model_len"])))
    return [list(x) for x in sorted(out)]


def target_datasets(cfg: dict, target: str) -> list[str]:
    """The datasets ``target`` is attacked on: its ``datasets`` list, or every dataset."""
    chosen = cfg["targets"][target].get("datasets")
    return sorted(cfg["datasets"]) if chosen is None else sorted(chosen)


def runs(cfg: dict) -> list[tuple[str, str, str]]:
    """Every (dataset, target, attack) the configuration runs, sorted."""
    return [
        (d, t, a)
        for d in sorted(cfg["datasets"])
        for t in sorted(cfg["targets"])
        if d in target_datasets(cfg, t)
        for a in target_attacks(cfg, t)
    ]


def yaml_error_text(e: yaml.YAMLError) -> str:
    """One line for a YAML error: where it is (1-based line and column) and what is wrong."""
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
    if context and cmark is not None and (mark is None or cmark.line != mark.line):
        problem += f" ({context} that starts at line {cmark.line + 1}, column {cmark.column + 1})"
    elif context:
        problem += f" ({context})"
    return where + problem


def read_config_file(path: str | Path) -> dict:
    """The raw mapping of a config file, or one ConfigError naming the file (and the line, for a YAML
    syntax error): what Snakemake reports without either (tools/check_configfiles.py)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config file {p} is a folder")
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {p} is not valid YAML: {yaml_error_text(e)}") from None
    if raw is None:
        raise ConfigError(f"config file {p} is empty")
    if not isinstance(raw, dict):
        raise ConfigError(
            f"config file {p} must hold config keys (a mapping) at the top level, not a {type(raw).__name__}"
        )
    return raw


def load_config(path: str | Path) -> dict:
    return validate_config(read_config_file(path))
