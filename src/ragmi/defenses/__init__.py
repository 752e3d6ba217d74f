"""Privacy defenses of the target RAG system, one module each (interface: ``ragmi.defenses.base``).

Adding a defense: a module with one :class:`~ragmi.defenses.base.Defense` subclass, one line in
:data:`REGISTRY`, and its parameter schema under ``$defs.defenses.<kind>`` in config/schema.yaml.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..schema import Registry, plugin_params

REGISTRY = {
    # kind: (module, class)
    "instruction_rag_mia": ("instruction_rag_mia", "InstructionRagMia"),
    "instruction_dcmi": ("instruction_dcmi", "InstructionDcmi"),
    "instruction_menta": ("instruction_menta", "InstructionMenta"),
    "query_paraphrase": ("query_paraphrase", "QueryParaphrase"),
    "entity_triples": ("entity_triples", "EntityTriples"),
    "llm_detector": ("llm_detector", "LlmDetector"),
    "mirabel": ("mirabel", "Mirabel"),
    "rerank": ("rerank", "Rerank"),
    "dp_output": ("dp_output", "DpOutput"),
    "exp_mechanism": ("exp_mechanism", "ExpMechanism"),
    "dp_retrieval": ("dp_retrieval", "DpRetrieval"),
    "ca_dp": ("ca_dp", "CaDp"),
    "private_rag": ("private_rag", "PrivateRag"),
    "pad": ("pad", "Pad"),
    "lprag": ("lprag", "Lprag"),
    "score_threshold": ("score_threshold", "ScoreThreshold"),
    "system_block": ("system_block", "SystemBlock"),
    "summary": ("summary", "Summary"),
    "query_block": ("query_block", "QueryBlock"),
}


_LOOKUP = Registry(__name__, REGISTRY, lambda kind, known, _where: f"unknown defense kind {kind!r}; known: {known}")


def defense_class(kind: str):
    return _LOOKUP.cls(kind)


def build_defense(name: str, spec: dict, validated: bool = False):
    """A defense from its config entry ``defenses.<name>``: ``kind``, optionally ``hooks`` (a subset
    of the kind's declared hooks to run, e.g. LPRAG on the content hook only), and the kind's
    parameters; ``validated``: the entry comes from a validated configuration (defaults filled,
    checked: ``ragmi.config``) and is used as given."""
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind is None:
        raise ConfigError(f"config key defenses.{name}.kind: required")
    cls = defense_class(kind)
    hooks = spec.pop("hooks", None)
    params = spec if validated else plugin_params("defenses", kind, spec, where=f"defenses.{name}")
    defense = cls(name, params)
    if hooks is not None:
        if not validated and (not hooks or any(h not in cls.hooks for h in hooks)):
            raise ConfigError(
                f"config key defenses.{name}.hooks: {kind} acts on {', '.join(cls.hooks)} only "
                f"(got {', '.join(map(str, hooks)) or 'none'})"
            )
        defense.hooks = tuple(h for h in cls.hooks if h in hooks)
    return defense
