"""Read-only questions about a validated configuration: what runs on which dataset, a control's
base target, a defended target's undefended baseline (what a target of each kind is:
:mod:`ragmi.targets`).

The workflow, the audit, the utility step, the report and the gate ask these; none of them needs the
validator (:mod:`ragmi.config`), which imports this module, never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping

from .targets import own_pipeline


def is_plain(target: dict) -> bool:
    """A validated target that is undefended and not a negative control: the attacks' baseline."""
    return not target["defenses"] and target["control"] == "none"


def default_generator(cfg: dict) -> str:
    """The generator of the first in-process target (the attacker's and defender's default); with
    only remote targets, the first configured generator."""
    local = [t for t in sorted(cfg["targets"]) if not own_pipeline(cfg["targets"][t])]
    if local:
        return cfg["targets"][local[0]]["generator"]
    return sorted(cfg.get("generators", {}))[0] if cfg.get("generators") else ""


def fold_requirements(cfg: dict, dataset: str | None = None) -> list[tuple[str, int]]:
    """(attack, cv_folds) of every run attack that scores its reference candidates out of fold (its
    class's ``out_of_fold``: RAG-MIA's gray-box ensemble, S²MIA's classifier and thresholds, DCMI's θ and
    thresholds, MBA's γ; ragmi.attacks.folds), on ``dataset`` or on
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


def store_target_of(cfg: dict, target: str) -> str | None:
    """The store a target plays the membership game in (``targets.<t>.store``), or None."""
    return cfg["targets"][target].get("store")


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


def target_attacks(cfg: dict, target: str) -> list[str]:
    """The attacks run against ``target``: its ``attacks`` list, or every configured attack."""
    chosen = cfg["targets"][target].get("attacks")
    return sorted(cfg["attacks"]) if chosen is None else sorted(chosen)


def generation_key(cfg: Mapping, target: str) -> tuple | None:
    """What decides the requests ``target`` sends its model for a query set: two targets with the same
    key send the same requests (a defense that acts on the output only acts after the response cache,
    so PAD's target sends the undefended target's).  None: the target generates on its own (a remote or
    python target) and shares nothing."""
    from .defenses import defense_class

    t = cfg["targets"][target]
    if own_pipeline(t):
        return None
    before_output = tuple(
        (d, repr(sorted(cfg["defenses"][d].items())))
        for d in t["defenses"]
        if set(defense_class(cfg["defenses"][d]["kind"]).hooks) != {"output"}
    )
    keys = ("generator", "retriever", "k", "template", "framework", "context_fit", "control", "database", "with_titles")
    return (*(t.get(k) for k in keys), repr(sorted((t.get("framework_params") or {}).items())), before_output)


def same_requests_as(cfg: Mapping, target: str) -> str | None:
    """The target that generates ``target``'s requests when another sends the same ones
    (:func:`generation_key`): the one with the fewest defenses (the undefended one, for PAD's target),
    then the first by name; None when ``target`` is that one or shares with none.  Its generate jobs run after that target's, so they read every answer from the
    response cache instead of waiting for another job's answers to the same prompts."""
    key = generation_key(cfg, target)
    if key is None:
        return None
    first = min((len(cfg["targets"][t]["defenses"]), t) for t in cfg["targets"] if generation_key(cfg, t) == key)[1]
    return None if first == target else first


def target_needs_defender(cfg: dict, target: str) -> bool:
    from .defenses import defense_class

    return any(defense_class(cfg["defenses"][d]["kind"]).needs_llm for d in cfg["targets"][target]["defenses"])


def dataset_contexts(cfg: dict, dataset: str) -> list[list]:
    """``[[generator, max_model_len], ...]`` of the in-process targets whose prompts
    ``targets.<t>.context_fit`` fits and that retrieve from ``dataset`` (the corpus job's warning)."""
    out = set()
    for name, t in cfg["targets"].items():
        if own_pipeline(t) or t["context_fit"] == "none" or dataset not in target_datasets(cfg, name):
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


def baseline_targets(targets: Mapping) -> dict:
    """{target: its undefended counterpart} — the undefended target with the same retriever,
    generator, k and template; an undefended target maps to itself; None when there is none."""

    def setting(t):
        # a remote target has no retriever or generator of ragmi's: never the baseline of a defended one
        return tuple(t.get(k) for k in ("retriever", "generator", "k", "template", "database"))

    out = {}
    for name, t in sorted(targets.items()):
        if not t["defenses"]:
            out[name] = name
            continue
        same = [n for n, u in sorted(targets.items()) if is_plain(u) and setting(u) == setting(t)]
        out[name] = same[0] if same else None
    return out


def campaign_runs(cfg: Mapping) -> list[tuple[str, str, str, int]]:
    """Every adaptive extraction campaign of the configuration: (dataset, target, attack, seed)."""
    c = cfg.get("campaigns") or {}
    return [
        (d, t, a, int(s))
        for t in c.get("targets") or []
        for d in target_datasets(cfg, t)
        for a in c.get("attacks") or {}
        for s in c.get("seeds") or []
    ]
