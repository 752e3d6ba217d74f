"""The ε audit's analysis: per DP defense, trials of its hook on neighbouring inputs (the declared Δ's
pair and each attacked target's measured pair) and the bounds from the attacks' scores, beside the ε it
claims (table ``epsilon_audit``: :mod:`ragmi.report.inference_registry` declares it,
:func:`ragmi.report.inference_tables.epsilon_markdown` prints it).

The statistics are :mod:`ragmi.epsilon_audit`; a defense says what it claims itself
(``Defense.epsilon_claim``, :mod:`ragmi.defenses.claims`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .. import epsilon_audit as ea
from ..attacks.base import is_main_variant
from ..plan import target_attacks, target_datasets
from .readers import read_scores, score_pairs

# An ε claim the audit has no trial for: the exponential mechanism's draws, an output perturbation that is no DP
NO_TRIAL = ea.NO_TRIAL
# The dataset and target of a row that drives the hook on the declared Δ (no target's): printed as is
NO_TARGET = "–"

EPS_COLUMNS = ["dataset", "target", "kind", "source", *ea.AUDIT_COLUMNS]


def _measured(sensitivity: pd.DataFrame | None, name: str) -> list[dict]:
    """The rule epsilon_sensitivity's rows of defense ``name`` (:mod:`ragmi.epsilon_sensitivity`)."""
    if sensitivity is None or not len(sensitivity):
        return []
    return sensitivity[sensitivity["defense"] == name].to_dict("records")


def _tried_words(m: dict) -> str:
    return (
        f"max over {int(m['n_queries'])} attack queries × {int(m['n_docs'])} documents removed or added "
        f"({int(m['n_pairs'])} pairs that move the top {int(m['noised'])}, L1): {m['change']} {m['doc_id']} "
        f"for query {m['query_id']}"
    )


def _turns(value) -> int | None:
    return None if value is None or value != value else int(value)


def epsilon_frame(
    defenses: Mapping[str, object],
    attacked: Sequence[tuple[str, str, list[str]]],
    scores: Mapping,
    confidence: float,
    trials: int,
    seed: int,
    sensitivity: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Rows of the ε audit.  ``defenses``: {name: built defense} of every configured defense that declares
    an ε (:func:`ragmi.epsilon_audit.declared_epsilon`).  ``sensitivity``: the rule epsilon_sensitivity's
    rows (:mod:`ragmi.epsilon_sensitivity`: per dataset × attacked target × DP defense, the largest change
    of the noised scores when one document is removed or added, measured on the target's retriever, the
    pair that realises it and the attack's queries per candidate T).

    Per defense with a hook trial (:func:`ragmi.epsilon_audit.has_trial`): rows ``mechanism`` from
    :func:`ragmi.epsilon_audit.trial_rows`, driven on two vectors the declared Δ apart (source ``mechanism,
    declared Δ``; one query per trial, CA-DP with its own T only) and on the measured pair of each target it
    defends (source ``mechanism, <dataset>/<target> retriever``; per query and per document, CA-DP per
    candidate, T the attacks'); a target whose retriever was not measured: a row ``mechanism, not measured``
    saying why.  A defense without such a trial: one row :data:`ragmi.epsilon_audit.NO_TRIAL`.
    Per attacked target (``attacked``: (dataset, target, [its DP defenses])) and attack variant, a row
    ``attack <variant>``: the bound from its evaluation scores at thresholds chosen on the reference
    non-members' scores (never on the scores it bounds), under the document relation."""
    rows = []
    for name, d in sorted(defenses.items()):
        rows += _mechanism_rows(name, d, sensitivity, trials, confidence, seed)
    for dataset, target, names in attacked:
        rows += _attack_rows(dataset, target, names, defenses, scores, confidence)
    out = pd.DataFrame(rows)
    return out.reindex(columns=EPS_COLUMNS) if len(out) else pd.DataFrame(columns=EPS_COLUMNS)


def _mechanism_rows(name: str, d, sensitivity, trials: int, confidence: float, seed: int) -> list[dict]:
    """The rows of one DP defense's hook trials: on the declared Δ's pair, then on each measured pair."""
    nan = float("nan")
    rows: list[dict] = []
    claim = ea.declared_epsilon(d)
    base = {"dataset": NO_TARGET, "target": NO_TARGET, "defense": name, "kind": d.kind}
    if not ea.has_trial(d):  # listed all the same: the reader sees every ε claim, and that it was not driven
        rows.append(
            {
                **base,
                "source": "mechanism",
                "claimed_eps": claim.claimed_eps,
                "accounting": claim.accounting,
                "relation": claim.relation,
                "comparable": False,
                "verdict": ea.NO_TRIAL,
            }
        )
        return rows
    # the declared Δ's pair tests the claim at its full Δ (the most power against mis-scaled noise) ...
    v1, v0 = ea.declared_pair(float(d.params["sensitivity"]))
    out = ea.trial_rows(d, v1, v0, None, trials, confidence, seed, delta_measured=nan)
    rows += [{**base, "source": "mechanism, declared Δ", **r} for r in out]
    # ... the real retriever's pair catches a declared Δ below the retriever's
    for m in _measured(sensitivity, name):
        where = {"dataset": m["dataset"], "target": m["target"]}
        if m.get("delta_measured") is None or m["delta_measured"] != m["delta_measured"]:
            row = {**base, **where, "source": "mechanism, not measured", "claimed_eps": claim.claimed_eps}
            row.update(accounting=claim.accounting, relation=claim.relation, comparable=False)
            rows.append({**row, "delta_tried": m["note"], "verdict": ea.NO_TRIAL})
            continue
        out = ea.trial_rows(
            d,
            m["scores_d"],
            m["scores_neighbour"],
            _turns(m.get("turns")),
            trials,
            confidence,
            seed,
            delta_measured=float(m["delta_measured"]),
            delta_tried=_tried_words(m),
        )
        source = f"mechanism, {m['dataset']}/{m['target']} retriever"
        rows += [{**base, **where, "source": source, **r} for r in out]
    return rows


def _attack_rows(
    dataset: str, target: str, names: list[str], defenses: Mapping, scores: Mapping, confidence: float
) -> list[dict]:
    """The rows ``attack <variant>`` of one attacked target: each headline variant's bound from its
    evaluation scores at thresholds chosen on the reference non-members' scores, per DP defense."""
    rows: list[dict] = []
    for (ds, t, _attack), df in sorted(scores.items()):
        if (ds, t) != (dataset, target):
            continue
        for variant, g in df.groupby("variant", sort=True):
            if not is_main_variant(variant):
                continue
            ref_non = g.loc[(g["role"] == "reference") & (g["label"] == 0), "score"].to_numpy(float)
            ev = g[g["role"] == "eval"]
            thresholds = ea.reference_thresholds(ref_non)
            if not thresholds or ev["label"].nunique() < 2:
                continue
            bound = ea.epsilon_lower_bound(
                ev.loc[ev["label"] == 1, "score"].to_numpy(float),
                ev.loc[ev["label"] == 0, "score"].to_numpy(float),
                thresholds,
                confidence=confidence,
            )
            for name in names:
                row = ea.audit_defense(defenses[name], bound, unit="document presence: one run per candidate")
                rows.append(
                    {
                        "dataset": dataset,
                        "target": target,
                        "defense": name,
                        "kind": defenses[name].kind,
                        "source": f"attack {variant}",
                        **row,
                    }
                )
    return rows


def dp_names(config: Mapping) -> list[str]:
    """The configured defenses whose kind declares an ε claim (its class defines ``epsilon_claim``):
    asked of the classes, nothing built (Snakemake asks this while it builds the DAG)."""
    from ..defenses import defense_class
    from ..defenses.base import Defense

    return sorted(
        name
        for name, spec in (config.get("defenses") or {}).items()
        if defense_class(spec["kind"]).epsilon_claim is not Defense.epsilon_claim
    )


def dp_defenses(config: Mapping) -> dict:
    """{name: built defense} of every configured defense that declares an ε (the analysis rule builds them
    from the validated entries)."""
    from ..defenses import build_defense
    from ..epsilon_audit import declared_epsilon

    out = {}
    for name in dp_names(config):
        d = build_defense(name, config["defenses"][name], validated=True)
        if declared_epsilon(d) is not None:
            out[name] = d
    return out


def attacked_dp(config: Mapping, dp) -> list[tuple[str, str, list[str]]]:
    """(dataset, target, its DP defenses) of every attacked target with a defense of ``dp`` (names:
    :func:`dp_names`)."""
    out = []
    for t, c in sorted(config["targets"].items()):
        names = [n for n in c.get("defenses") or [] if n in dp]
        if names and target_attacks(config, t):
            out += [(d, t, names) for d in target_datasets(config, t)]
    return out


def run(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``epsilon_audit``: ``files`` ``scores``, ``candidates``
    and ``sensitivity`` (rule epsilon_sensitivity's outputs); ``config`` its keys ``targets``,
    ``defenses``, ``seed`` and ``audit.epsilon_*``."""
    scores = read_scores(files["scores"], files["candidates"]) if "scores" in files else {}
    dp = dp_defenses(config)
    attacked = [
        (d, t, [n for n in config["targets"][t]["defenses"] if n in dp])
        for d, t in score_pairs(files.get("scores", []))
    ]
    sens = [pd.read_parquet(p) for p in files.get("sensitivity", [])]
    return epsilon_frame(
        dp,
        attacked,
        scores,
        confidence=float(config["audit"]["epsilon_confidence"]),
        trials=int(config["audit"]["epsilon_trials"]),
        seed=int(config["seed"]),
        sensitivity=pd.concat(sens, ignore_index=True) if sens else None,
    )
