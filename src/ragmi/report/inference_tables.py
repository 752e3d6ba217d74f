"""The frames of the inference tables: dataset inference (is a *set* of documents in the database?) and
the empirical ε audit of the DP defenses (can a defense's claimed ε be refuted?).

The statistics are :mod:`ragmi.dataset_inference` and :mod:`ragmi.epsilon_audit`; this module reads the
score files and the split, and shapes the rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from .. import dataset_inference as di
from .. import epsilon_audit as ea
from ..errors import ConfigError
from .cells import DASH
from .comparison import is_main_variant

CALIBRATION_ALPHA = 0.05  # the level at which the test's false-positive rate is measured
# An ε claim the audit has no trial for: the exponential mechanism's draws, an output perturbation that is no DP
NO_TRIAL = ea.NO_TRIAL

MIN_CALIBRATION_POOL = 4  # two non-members a side: fewer and no split can be tested
# The one row of a target whose attacks' scores are all constant on the reference candidates
NOTHING_TO_COMBINE = {
    "suspect_set": "members",
    "verdict": di.UNINFORMATIVE,
    "reason": "every attack's scores are constant on the reference candidates: nothing to combine",
    "calibration_pool": 0,
    "calibration_splits": 0,
}

# What the combined score is built from (dataset_inference.evidence): every attack's headline variants, or
# only those that read the answers' text (what a black-box service gives a data owner)
EVIDENCE = {"all": "all attacks", "text": "answer text only"}

DI_COLUMNS = [
    "dataset",
    "target",
    "evidence",
    *di.ROW_COLUMNS,
    "calibration_rate",
    "calibration_lo",
    "calibration_hi",
    "calibration_splits",
    "calibration_pool",
    "calibrated",
]


def read_ids(path: str | Path) -> list[str]:
    """The doc_ids of a data owner's file: CSV or parquet with a ``doc_id`` column, or text with one id per
    line (blank lines skipped)."""
    p = Path(path)
    if p.suffix == ".parquet":
        df = pd.read_parquet(p)
    elif p.suffix in (".csv", ".tsv"):
        df = pd.read_csv(p, sep="\t" if p.suffix == ".tsv" else ",", dtype=str)
    else:
        return [line.strip() for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    if "doc_id" not in df.columns:
        raise ConfigError(f"file {p} has no doc_id column (columns: {', '.join(map(str, df.columns))})")
    return [str(x) for x in df["doc_id"]]


def _group_scores(scores: Mapping, dataset: str, target: str, evidence: str = "all") -> list[pd.DataFrame]:
    """The target's score frames restricted to the headline variants (an ablation sweep's variants, named
    with ``=``, are the same attack again) and, for ``evidence`` ``text``, to those that read only the
    answers' text."""
    from ..attacks import attack_channels

    out = []
    for (d, t, attack), df in sorted(scores.items()):
        if (d, t) != (dataset, target):
            continue
        keep = [
            v
            for v in df["variant"].unique()
            if is_main_variant(v) and (evidence == "all" or attack_channels(attack, v) == ("text",))
        ]
        if keep:
            out.append(df[df["variant"].isin(keep)])
    return out


def dataset_inference_frame(
    scores: Mapping,
    candidates: Mapping[str, pd.DataFrame],
    runs: Sequence[tuple[str, str]],
    params: Mapping,
    seed: int,
    user: tuple[list[str], list[str]] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, target, suspect set): :func:`ragmi.dataset_inference.dataset_inference` on
    every attack's scores of the target (the combiner fitted on the reference candidates), the default
    suspect sets, plus the data owner's (``user``: suspect and known-outside doc_ids among the
    evaluation candidates) when given; the calibration columns repeat, per target, the test's
    false-positive rate at 0.05 over ``params["calibration_splits"]`` seeded splits of the evaluation
    non-members' combined scores."""
    rows = []
    for (dataset, target), evidence in itertools.product(runs, params["evidence"]):
        frames = _group_scores(scores, dataset, target, evidence)
        if not frames:
            continue
        if evidence != "all" and "all" in params["evidence"]:
            if {v for f in frames for v in f["variant"].unique()} == {
                v for f in _group_scores(scores, dataset, target) for v in f["variant"].unique()
            }:
                continue  # the same variants as the "all" rows (a target without log-probabilities)
        cand = candidates[dataset]
        ref_ids = cand.loc[cand["role"] == "reference", "doc_id"]
        head = {"dataset": dataset, "target": target, "evidence": EVIDENCE[evidence]}
        if di.feature_matrix(frames, ref_ids).shape[1] == 0:  # every score constant on the reference set
            rows.append({**head, **NOTHING_TO_COMBINE})
            continue
        kw = dict(alpha=float(params["alpha"]), draws=int(params["draws"]), seed=int(seed))
        parts = [di.dataset_inference(frames, cand, f_values=tuple(params["f_values"]), **kw)]
        if user is not None:
            ev = set(cand.loc[cand["role"] == "eval", "doc_id"])
            for what, ids in zip(("suspect", "known_outside"), user):
                outside = [i for i in ids if i not in ev]
                if outside:
                    raise ConfigError(
                        f"config key dataset_inference.{what}: {len(outside)} of its doc_ids are not evaluation "
                        f"candidates of dataset {dataset!r} (e.g. {outside[0]!r}); only those were queried and "
                        "scored by models fitted elsewhere"
                    )
            parts.append(di.dataset_inference(frames, cand, suspect_ids=user[0], outside_ids=user[1], **kw))
        cal = calibration(frames, cand, int(params["calibration_splits"]), int(seed))
        for part in parts:
            for r in part.to_dict("records"):
                rows.append({**head, **r, **cal})
    return pd.DataFrame(rows, columns=DI_COLUMNS)


def calibration(frames: list[pd.DataFrame], cand: pd.DataFrame, n_splits: int, seed: int) -> dict:
    """The test's false-positive rate at 0.05 on the evaluation non-members' combined scores (the combiner
    fitted on the reference candidates, as in the reported rows), :func:`ragmi.dataset_inference.calibrate`."""
    ref = cand[cand["role"] == "reference"]
    feats = di.feature_matrix(frames, ref["doc_id"])
    labels = ref.set_index("doc_id")["label"]
    comb = di.fit_combiner(feats, labels[labels.index.isin(feats.index)], random_state=seed)
    non = cand.loc[(cand["role"] == "eval") & (cand["label"] == 0), "doc_id"]
    pool = comb.score(feats.loc[feats.index.isin(non)])
    if len(pool) < MIN_CALIBRATION_POOL:
        return {
            "calibration_rate": float("nan"),
            "calibration_lo": float("nan"),
            "calibration_hi": float("nan"),
            "calibration_splits": 0,
            "calibration_pool": len(pool),
            "calibrated": None,
        }
    c = di.calibrate(pool.to_numpy(), n_splits=n_splits, alpha=CALIBRATION_ALPHA, seed=seed)
    return {
        "calibration_rate": c["rate"],
        "calibration_lo": c["rate_lo"],
        "calibration_hi": c["rate_hi"],
        "calibration_splits": c["n_splits"],
        "calibration_pool": c["n_pool"],
        "calibrated": c["calibrated"],
    }


def _p(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    return f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


def calibration_words(r: Mapping) -> str:
    """What a target's calibration says: within sampling error of 0.05; conservative (fewer false positives,
    its small p-values still hold); or anti-conservative, the one that makes its p-values untrustworthy."""
    if r["calibrated"]:
        return "within sampling error of 0.05"
    if r["calibration_hi"] < CALIBRATION_ALPHA:
        return "conservative: fewer false positives than 0.05 (a small p still holds; the test may miss a set)"
    return "**anti-conservative: more false positives than 0.05; its p-values are not to be trusted**"


def _count(x) -> str:
    return DASH if pd.isna(x) else str(int(x))


def dataset_inference_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The rows a data owner reads (dataset, target, suspect set, its size and members, p, verdict, the
    smallest set that reaches the level), then one calibration line per target, then the notes."""
    several = df["dataset"].nunique() > 1
    kinds = df["evidence"].nunique() > 1
    head = (["dataset"] if several else []) + ["target"] + (["scores from"] if kinds else [])
    head += ["suspect set", "n suspect (members) / outside"]
    head += ["p (one-sided Welch)", "verdict", "smallest set with p < α"]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in df.to_dict("records"):
        size = _count(r["min_suspect_size"])
        verdict = r["verdict"] + (f" ({r['reason']})" if isinstance(r["reason"], str) and r["reason"] else "")
        cells = ([r["dataset"]] if several else []) + [r["target"]] + ([r["evidence"]] if kinds else [])
        cells += [r["suspect_set"]]
        cells += [f"{_count(r['n_suspect'])} ({_count(r['n_suspect_members'])}) / {_count(r['n_outside'])}"]
        cells += [_p(r["p_value"]), verdict, size]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    lines += ["", "Calibration of the test (false-positive rate at α = 0.05 over seeded splits of non-members):", ""]
    for (d, t, e), g in df.groupby(["dataset", "target", "evidence"], sort=True):
        r = g.iloc[0]
        t = f"{t} ({e})" if kinds else t
        if not r["calibration_splits"]:
            lines.append(f"- {d}/{t}: not calibrated ({int(r['calibration_pool'])} evaluation non-members; 4 needed)")
            continue
        lines.append(
            f"- {d}/{t}: {r['calibration_rate']:.3f} [{r['calibration_lo']:.3f}, {r['calibration_hi']:.3f}] over "
            f"{int(r['calibration_splits'])} splits of {int(r['calibration_pool'])} evaluation non-members: "
            + calibration_words(r)
        )
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Empirical ε
# --------------------------------------------------------------------------------------------
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
    nan = float("nan")
    rows = []
    for name, d in sorted(defenses.items()):
        claim = ea.declared_epsilon(d)
        base = {"dataset": DASH, "target": DASH, "defense": name, "kind": d.kind}
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
            continue
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
    for dataset, target, names in attacked:
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
    out = pd.DataFrame(rows)
    return out.reindex(columns=EPS_COLUMNS) if len(out) else pd.DataFrame(columns=EPS_COLUMNS)


def _num(x, fmt: str = ".2f") -> str:
    return DASH if x is None or x != x else format(x, fmt)


def epsilon_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    head = [
        "defense",
        "target",
        "bound from",
        "claimed ε (accounting)",
        "unit (queries per trial)",
        "compared with",
        "Δ declared / trial / measured",
        "ε lower bound",
        "could certify up to",
        "correct mechanism: median (5–95%)",
        "TPR / FPR",
        "verdict",
    ]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in df.to_dict("records"):
        eps = DASH if pd.isna(r["eps_lb"]) else f"{r['eps_lb']:.2f} ({r['confidence']:.0%})"
        rates = (
            DASH
            if pd.isna(r["tpr"])
            else f"{r['tpr']:.2f} / {r['fpr']:.2f} (n {int(r['n_members'])}+{int(r['n_nonmembers'])})"
        )
        target = r["target"] if r["dataset"] == DASH else f"{r['dataset']}/{r['target']}"
        deltas = DASH
        if not pd.isna(r.get("delta_declared", float("nan"))):
            deltas = " / ".join(_num(r[c], ".3g") for c in ("delta_declared", "delta_trial", "delta_measured"))
        correct = DASH
        if not pd.isna(r.get("correct_median", float("nan"))):
            correct = f"{r['correct_median']:.2f} ({r['correct_q05']:.2f}–{r['correct_q95']:.2f})"
        unit = r.get("unit")
        cells = [
            f"{r['defense']} ({r['kind']})",
            target,
            r["source"],
            f"{r['claimed_eps']:g} ({r['accounting']})",
            DASH if unit is None or unit != unit or unit == "" else unit,
            _num(r.get("claim_in_unit"), "g"),
            deltas,
            eps,
            _num(r.get("eps_certifiable")),
            correct,
            rates,
            r["verdict"],
        ]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    rel = df.drop_duplicates("defense")[["defense", "relation"]].to_dict("records")
    lines += ["", "The neighbouring relation each defense's claim is stated for:", ""]
    lines += [f"- {r['defense']}: {r['relation']}" for r in rel]
    measured = df.dropna(subset=["delta_measured"]).drop_duplicates(["defense", "dataset", "target"])
    if len(measured):
        lines += ["", "Δ measured on the real retriever (a maximum over what was tried, not a certificate):", ""]
        lines += [
            f"- {r['defense']} on {r['dataset']}/{r['target']}: {r['delta_tried']}" for r in measured.to_dict("records")
        ]
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
