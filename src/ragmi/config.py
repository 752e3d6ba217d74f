"""Load, default-fill and validate a ragmi configuration against ``config/schema.yaml``.

This module only validates: the schema and its defaults are :mod:`ragmi.schema` (below the plug-ins,
which validation builds), the questions asked of a validated configuration are :mod:`ragmi.plan`.
A bad value raises :class:`~ragmi.errors.ConfigError` with one sentence naming the key and what is
allowed, e.g. ``config key targets.smollm2-rag.k: 0 is less than the minimum of 1``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml
from jsonschema.exceptions import best_match

from .attacks import attack_class
from .attacks.adaptive import adaptive_class
from .canary import check_outside_vocabulary
from .defenses import build_defense
from .errors import ConfigError
from .gate.limits import limit_id  # the gate's declarations (floor 2, docs/architecture.md)
from .gate.metrics import METRICS
from .models import PACKAGED_EMBEDDERS, PACKAGED_GGUF, check_model_reference
from .plan import CONTROLS, default_generator, fold_requirements
from .rag.frameworks import build_framework
from .rag.index import COSINE_INDEXES, cosine_scores
from .schema import DefaultingValidator, load_schema, plugin_params
from .targets import REGISTRY as TARGET_KINDS
from .targets import kind_class, target_kind
from .targets.base import check_block


def validate_config(config: dict, schema: dict | None = None) -> dict:
    """Return a default-filled copy of ``config``; raise ConfigError on the first problem."""
    schema = schema or load_schema()
    cfg = copy.deepcopy(config) if config else {}
    apply_remote_presets(cfg, schema)
    # Two passes: defaults for nested objects are filled once their parent default exists.
    for _ in range(2):
        error = best_match(DefaultingValidator(schema).iter_errors(cfg))
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


def _check_references(cfg: dict) -> None:
    """Every name the config uses is defined, and each section's keys fit the others (in this order:
    the first problem found is the one reported)."""
    _check_attacker(cfg)
    _check_target_kinds(cfg)
    _check_stores(cfg)
    _derive_controls(cfg)
    _check_folds(cfg)
    _check_frameworks(cfg)
    built = _build_defenses(cfg)
    needs_llm = _check_target_defenses(cfg, built)
    _check_target_attacks(cfg)
    _check_audit(cfg)
    _check_gate(cfg)
    _check_utility(cfg)
    _check_campaigns(cfg)
    _check_dataset_inference(cfg)
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


def _check_generator_endpoints(cfg: dict) -> None:
    """``base_url`` is given for, and only for, the generators of backend 'openai'."""
    for name, g in cfg.get("generators", {}).items():
        if g["backend"] == "openai" and "base_url" not in g:
            raise ConfigError(f"config key generators.{name}.base_url: required for backend 'openai'")
        if g["backend"] != "openai" and "base_url" in g:
            raise ConfigError(
                f"config key generators.{name}.base_url: only used with backend 'openai' (backend is {g['backend']!r})"
            )


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


def _check_target_kinds(cfg: dict) -> None:
    """Every target's kind is registered and its entry fits it (``ragmi.targets``: the block of the
    kind's own keys, and the kind's own checks); the datasets each target names; the file of every
    dataset of source 'candidates'."""
    _check_candidates_files(cfg)
    kinds = {n: kind_class(n)() for n in TARGET_KINDS}
    blocks = {k.block: n for n, k in kinds.items() if k.block}
    for name, t in cfg["targets"].items():
        _check_target_datasets(cfg, name, t)
        if t["kind"] not in kinds:
            kind_class(t["kind"], f"targets.{name}.kind")  # raises, naming the known kinds
        check_block(kinds[t["kind"]], name, t, blocks)
        kinds[t["kind"]].check(cfg, name, t)


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
        if not target_kind(t).holds_store:
            kinds = [n for n in sorted(TARGET_KINDS) if kind_class(n).holds_store]
            raise ConfigError(
                f"{where}: only a {' or '.join(kinds)} target (kind {' or '.join(kinds)}) plays the game in a store"
            )
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


def _derive_controls(cfg: dict) -> None:
    """Add the negative-control targets of every undefended target (``controls``)."""
    controls = cfg["controls"]
    for i, a in enumerate(controls["attacks"] or []):
        if a not in cfg["attacks"]:
            raise ConfigError(f"config key controls.attacks.{i}: {a!r} is not configured under 'attacks'")
    for name, t in sorted(cfg["targets"].items()):
        if t["defenses"] or t["control"] != "none" or t["database"] != "members" or target_kind(t).own_pipeline:
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
    for name, t in cfg["targets"].items():
        key = f"targets.{name}.framework"
        if target_kind(t).own_pipeline:  # the service runs its own pipeline: ragmi cannot choose its framework
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
        if fw.needs_backend and gen["backend"] != fw.needs_backend:
            raise ConfigError(
                f"config key {key}: {fw.name} {fw.needs_backend_why}, so it needs a generator with backend "
                f"{fw.needs_backend} (generator {t['generator']!r} is {gen['backend']})"
            )
        fw.check(key)


def _check_models(cfg: dict) -> None:
    """Every model the config names is a packaged model, an existing folder or a plausible Hub id."""
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
    defenses = cfg.setdefault("defenses", {})
    built = {}
    for name, spec in defenses.items():
        d = build_defense(name, spec)
        defenses[name] = {"kind": d.kind, **({"hooks": list(d.hooks)} if "hooks" in spec else {}), **d.params}
        built[name] = d
    return built


def _check_target_defenses(cfg: dict, built: dict) -> bool:
    """The defenses each target lists are defined, a defense that needs the whole database's scores
    sits on a dense flat-index retriever, and one that reads the scores as cosines on a retriever whose
    scores are cosines; whether any used defense needs the defender LLM."""
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
            if d.needs_cosine_scores and not cosine_scores(r):
                setting = f"dense/{r.get('index')}" if r.get("kind") == "dense" else str(r.get("kind"))
                raise ConfigError(
                    f"config key targets.{tname}.defenses.{i}: defense {dname!r} ({d.kind}) reads the retrieval "
                    f"scores as cosine similarities, which only a dense retriever with index "
                    f"{' or '.join(COSINE_INDEXES)} gives (L2-normalised vectors); retriever {t['retriever']!r} is "
                    f"{setting}, whose scores are no cosine"
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
        if not target_kind(cfg["targets"][t]).takes_canaries(cfg["targets"][t]):
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


def _check_campaigns(cfg: dict) -> None:
    """The campaigns' attacks are registered (their parameters validated, defaults filled) and their
    targets defined; an attack with embedder ``target`` needs a target with a dense retriever of
    ragmi's (a service's own retriever is unknown)."""
    c = cfg["campaigns"]
    for i, t in enumerate(c["targets"]):
        if t not in cfg["targets"]:
            raise ConfigError(f"config key campaigns.targets.{i}: {t!r} is not defined under 'targets'")
    for name in list(c["attacks"]):
        cls = adaptive_class(name)
        c["attacks"][name] = plugin_params(
            "adaptive_attacks", name, c["attacks"][name] or {}, f"campaigns.attacks.{name}"
        )
        if not (cls.embedder_param and c["attacks"][name][cls.embedder_param] == "target"):
            continue
        for t in c["targets"]:
            r = cfg["retrievers"].get(cfg["targets"][t].get("retriever"))
            if r is None or r.get("kind") != "dense":
                what = f"retrieves with {r.get('kind')!r}" if r else "has no retriever of ragmi's (its own is unknown)"
                raise ConfigError(
                    f"config key campaigns.attacks.{name}.{cls.embedder_param}: 'target' (the retriever's own "
                    f"embedder) needs a dense retriever, and target {t!r} {what}; name an embedder"
                )
    if c["targets"] and not c["attacks"]:
        raise ConfigError("config key campaigns.attacks: no attack is given for the campaign targets")


def _check_dataset_inference(cfg: dict) -> None:
    """The dataset-inference targets are defined; a data owner's suspect and known-outside files come
    together and exist (their ids are checked against the candidates when the table is built)."""
    di = cfg["dataset_inference"]
    for i, t in enumerate(di["targets"] or []):
        if t not in cfg["targets"]:
            raise ConfigError(f"config key dataset_inference.targets.{i}: {t!r} is not defined under 'targets'")
    given = [k for k in ("suspect", "known_outside") if di[k] is not None]
    if len(given) == 1:
        other = "known_outside" if given[0] == "suspect" else "suspect"
        raise ConfigError(f"config key dataset_inference.{other}: required when dataset_inference.{given[0]} is set")
    for k in given:
        if not Path(di[k]).is_file():
            raise ConfigError(f"config key dataset_inference.{k}: file {di[k]} does not exist")


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
        check_outside_vocabulary({n: built[n].vocabulary for n in built})


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


def merge_config(base: dict, update: Mapping) -> dict:
    """``update`` merged into ``base`` as Snakemake merges config files: later keys win, a mapping
    merged into a mapping key by key (recursively; the nested mapping of ``base`` is copied, not
    changed). ``base`` itself is updated and returned."""
    for k, v in update.items():
        base[k] = merge_config(dict(base[k]), v) if isinstance(v, Mapping) and isinstance(base.get(k), Mapping) else v
    return base


def read_config_files(paths: Iterable[str | Path]) -> dict:
    """The config files merged in order as Snakemake merges several ``--configfile``
    (:func:`merge_config`), each read by :func:`read_config_file`."""
    cfg: dict = {}
    for p in paths:
        doc = read_config_file(p)
        if not isinstance(doc, Mapping):
            raise ConfigError(f"config file {p} does not hold a mapping")
        cfg = merge_config(cfg, doc)
    return cfg


def load_config(path: str | Path) -> dict:
    return validate_config(read_config_file(path))
