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
from ..multiplicity import holm
from .cells import DASH
from .comparison import is_main_variant

# An ε claim the audit has no trial for: the exponential mechanism's draws, an output perturbation that is no DP
NO_TRIAL = ea.NO_TRIAL

NULL_DB = "--null-db"  # the suffix of a target's null-database control (ragmi.plan.CONTROLS)
RAW, DIFFERENCE = "raw", "null-db difference"  # the designs: combined score, or target minus null-db control
NO_SHIFT = "none"
# The one row of a target whose attacks' scores are all constant on the reference candidates
NOTHING_TO_COMBINE = {
    "shift": NO_SHIFT,
    "design": RAW,
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
    "shift",
    "design",
    *di.ROW_COLUMNS,
    "p_holm",
    "verdict_holm",
    "calibration_rate",
    "calibration_lo",
    "calibration_hi",
    "calibration_rejections",
    "calibration_splits",
    "calibration_split_size",
    "calibration_pool",
    "calibrated",
    "calibration_resolves",
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


def _check_user(user, cand: pd.DataFrame, dataset: str) -> None:
    ev = set(cand.loc[cand["role"] == "eval", "doc_id"])
    for what, ids in zip(("suspect", "known_outside"), user):
        outside = [i for i in ids if i not in ev]
        if outside:
            raise ConfigError(
                f"config key dataset_inference.{what}: {len(outside)} of its doc_ids are not evaluation "
                f"candidates of dataset {dataset!r} (e.g. {outside[0]!r}); only those were queried and "
                "scored by models fitted elsewhere"
            )


def _dataset_shift_sets(cand: pd.DataFrame, other: str, other_cand: pd.DataFrame, dataset: str) -> list[dict]:
    """Suspect = the other dataset's evaluation non-members (doc_ids ``"data:<other>::<id>"``), outside =
    this dataset's evaluation non-members: a set from another source, none of it in this database."""
    non = sorted(cand.loc[(cand["role"] == "eval") & (cand["label"] == 0), "doc_id"].astype(str))
    oc = other_cand
    theirs = sorted(f"data:{other}::{i}" for i in oc.loc[(oc["role"] == "eval") & (oc["label"] == 0), "doc_id"])
    if len(non) < 2 or len(theirs) < 2:
        return []
    st = di.user_sets(theirs, non, name=f"dataset: {other} vs {dataset}")[0]
    return [{**st, "f": 0.0, "f_target": 0.0, "n_suspect_members": 0, "shift": "dataset"}]


def _target_rows(
    scores: Mapping,
    candidates: Mapping[str, pd.DataFrame],
    runs: Sequence[tuple[str, str]],
    dataset: str,
    target: str,
    evidence: str,
    params: Mapping,
    seed: int,
    user,
) -> list[dict]:
    """The rows of one (dataset, target, evidence): the default and user sets and the shift sets, raw and,
    where the target has a null-database control with scores, as differences against it; the calibration
    columns on every row."""
    frames = _group_scores(scores, dataset, target, evidence)
    cand = candidates[dataset].assign(doc_id=lambda c: c["doc_id"].astype(str))
    ref_ids = cand.loc[cand["role"] == "reference", "doc_id"]
    head = {"dataset": dataset, "target": target, "evidence": EVIDENCE[evidence]}
    if di.feature_matrix(frames, ref_ids).shape[1] == 0:  # every score constant on the reference set
        return [{**head, **NOTHING_TO_COMBINE}]
    alpha = float(params["alpha"])
    others = {}
    null = _group_scores(scores, dataset, target + NULL_DB, evidence)
    if null:
        others["null"] = null
    other_datasets = sorted({d for d, t in runs if t == target and d != dataset and d in candidates})
    for d2 in other_datasets:
        f2 = _group_scores(scores, d2, target, evidence)
        if f2:
            others[f"data:{d2}"] = f2
    comb, feats, scored = di.fit_on_reference(frames, cand, others, seed=seed)
    ev = cand[cand["role"] == "eval"]
    combined = comb.score(feats.loc[feats.index.isin(ev["doc_id"])])
    sets = [
        {**s, "shift": NO_SHIFT} for s in di.default_sets(cand, combined, f_values=tuple(params["f_values"]), seed=seed)
    ]
    if user is not None:
        _check_user(user, cand, dataset)
        sets.append({**di.user_sets(user[0], user[1])[0], "shift": NO_SHIFT})
    shifted = di.shift_sets(ev[ev["label"] == 0], n_topics=int(params["shift_topics"]), seed=seed)
    raw_scores = combined
    for d2 in other_datasets:
        if f"data:{d2}" in scored:
            s2 = scored[f"data:{d2}"]
            raw_scores = pd.concat([raw_scores, s2.set_axis([f"data:{d2}::{i}" for i in s2.index])])
            shifted += _dataset_shift_sets(cand, d2, candidates[d2], dataset)
    designs = [(RAW, raw_scores, sets + shifted)]
    if "null" in scored:
        diff = di.difference_scores(combined, scored["null"])
        lacking = sorted(set(combined.index) - set(diff.index))
        if lacking:
            designs.append(
                (
                    DIFFERENCE,
                    None,
                    f"the null-db control has no score for {len(lacking)} evaluation candidates (e.g. {lacking[0]!r})",
                )
            )
        else:
            designs.append((DIFFERENCE, diff, sets + [s for s in shifted if s["shift"] != "dataset"]))
    tested = {i for s in sets + shifted for k in ("suspect_ids", "outside_ids") for i in s[k]}
    cal = calibration(feats, cand, alpha, int(params["calibration_folds"]), seed, tested)
    rows = []
    kw = dict(alpha=alpha, draws=int(params["draws"]), seed=int(seed))
    for design, sc, design_sets in designs:
        if sc is None:
            rows.append(
                {
                    **head,
                    "shift": NO_SHIFT,
                    "design": design,
                    "suspect_set": "members",
                    "verdict": di.UNINFORMATIVE,
                    "reason": design_sets,
                    **cal,
                }
            )
            continue
        part = di.dataset_inference_rows(design_sets, sc, comb.columns, **kw)
        for st, r in zip(design_sets, part.to_dict("records"), strict=True):
            rows.append({**head, "shift": st["shift"], "design": design, **r, **cal})
    return rows


def dataset_inference_frame(
    scores: Mapping,
    candidates: Mapping[str, pd.DataFrame],
    runs: Sequence[tuple[str, str]],
    params: Mapping,
    seed: int,
    user: tuple[list[str], list[str]] | None = None,
) -> pd.DataFrame:
    """One row per (dataset, target, evidence, shift, design, suspect set).

    Per (dataset, target, evidence): the combiner fitted on the reference candidates
    (:func:`ragmi.dataset_inference.fit_on_reference`), the default suspect sets, the data owner's
    (``user``: suspect and known-outside doc_ids among the evaluation candidates) when given, and the
    distribution-shift sets (``shift`` ≠ "none": suspect sets of non-members that differ from the outside
    set by length, topic or source, :func:`ragmi.dataset_inference.shift_sets`; every rejection there is
    a false positive).  ``design`` "raw" tests the combined scores; "null-db difference", where the target's
    null-database control (``<target>--null-db``) has scores, tests each document's combined score on the
    target minus on the control.  The calibration columns repeat, per target: the exact test's
    false-positive rate at α over independent, disjoint splits of the reference non-members' out-of-fold
    combined scores (:func:`calibration`).  ``p_holm``: Holm's adjustment over every finite ``p_value`` of
    the frame (one family), ``verdict_holm`` its verdict at α."""
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
        rows += _target_rows(scores, candidates, runs, dataset, target, evidence, params, seed, user)
    out = pd.DataFrame(rows, columns=DI_COLUMNS)
    return with_holm(out, float(params["alpha"]))


def with_holm(df: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``p_holm`` (:func:`ragmi.multiplicity.holm` over every finite ``p_value`` of ``df``: one family) and
    ``verdict_holm`` (its verdict at ``alpha``; "uninformative" where the row's verdict is)."""
    out = df.copy()
    out["p_holm"] = holm(pd.to_numeric(out["p_value"], errors="coerce").to_numpy(float)) if len(out) else []
    out["verdict_holm"] = [
        di.UNINFORMATIVE if v == di.UNINFORMATIVE else di.verdict(p, alpha)
        for v, p in zip(out["verdict"], out["p_holm"], strict=True)
    ]
    return out


def calibration(feats: pd.DataFrame, cand: pd.DataFrame, alpha: float, folds: int, seed: int, tested) -> dict:
    """The exact test's false-positive rate at ``alpha`` on documents disjoint from every tested set: the
    reference non-members, their combined scores cross-fitted over ``folds`` folds of the reference
    candidates (:func:`ragmi.dataset_inference.out_of_fold_scores`: no document scored by a combiner fitted
    on it), cut into independent disjoint splits (:func:`ragmi.dataset_inference.calibrate`)."""
    ref = cand[cand["role"] == "reference"]
    labels = ref.set_index("doc_id")["label"]
    labels = labels[labels.index.isin(feats.index)]
    oof = di.out_of_fold_scores(feats.loc[labels.index], labels, folds=folds, seed=seed)
    pool = oof[oof.index.isin(labels.index[labels == 0])]
    c = di.calibrate(pool, alpha=alpha, seed=seed, exclude_ids=tested)
    return {
        "calibration_rate": c["rate"],
        "calibration_lo": c["rate_lo"],
        "calibration_hi": c["rate_hi"],
        "calibration_rejections": c["rejections"],
        "calibration_splits": c["n_splits"],
        "calibration_split_size": c["split_size"],
        "calibration_pool": c["n_pool"],
        "calibrated": c["calibrated"],
        "calibration_resolves": c["resolves"],
        "calibration_ids": c["ids"],  # the pool's doc_ids (not a column: for the disjointness check)
    }


def _p(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    return f"{x:.1e}" if x < 0.001 else f"{x:.3f}"


def p_cell(p, floor) -> str:
    """A p-value as printed: "≤ <floor>" where it sits at the smallest value the sets allow (never a digit
    below it), else its value."""
    if p is None or p != p:
        return DASH
    if floor == floor and floor is not None and p <= floor * (1 + 1e-9):
        return f"≤ {_p(floor)}"
    return _p(p)


def calibration_words(r: Mapping) -> str:
    """What a target's calibration says, plainly: k of n independent tests and the interval; whether the
    interval can resolve α (it rarely can: a pool of a few dozen reference non-members gives a handful of
    disjoint tests); anti-conservative where the interval lies above α."""
    alpha = float(r.get("alpha", di.ALPHA))
    n, k = int(r["calibration_splits"]), int(r["calibration_rejections"])
    words = f"{k} of {n} independent tests rejected at α = {alpha:g}; 95% interval [{r['calibration_lo']:.2f}, {r['calibration_hi']:.2f}]"
    if r["calibration_lo"] > alpha:
        return words + ": **anti-conservative: more false positives than α; its p-values are not to be trusted**"
    if not r.get("calibration_resolves", False):
        return words + f": the interval cannot resolve α = {alpha:g} (consistent with it, and with rates far above it)"
    return words + ": within sampling error of α"


def _count(x) -> str:
    return DASH if pd.isna(x) else str(int(x))


def dataset_inference_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    """The rows a data owner reads (dataset, target, suspect set, its size and members, the exact p with its
    floor, the Holm p, both verdicts, the smallest set that reaches the level), then the distribution-shift
    rows with their false-positive count per design, then one calibration line per target, then the notes."""
    several = df["dataset"].nunique() > 1
    kinds = df["evidence"].nunique() > 1
    designs = df["design"].nunique() > 1
    head = (["dataset"] if several else []) + ["target"] + (["scores from"] if kinds else [])
    head += ["design"] if designs else []
    head += ["suspect set", "n suspect (members) / outside"]
    head += ["p (exact)", "p Holm", "verdict", "verdict (Holm)", "smallest set with p < α"]

    def table(rows: pd.DataFrame) -> list[str]:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for r in rows.to_dict("records"):
            verdict = r["verdict"] + (f" ({r['reason']})" if isinstance(r["reason"], str) and r["reason"] else "")
            cells = ([r["dataset"]] if several else []) + [r["target"]] + ([r["evidence"]] if kinds else [])
            cells += [r["design"]] if designs else []
            cells += [r["suspect_set"]]
            cells += [f"{_count(r['n_suspect'])} ({_count(r['n_suspect_members'])}) / {_count(r['n_outside'])}"]
            cells += [p_cell(r["p_value"], r["p_floor"]), _p(r["p_holm"]), verdict, r["verdict_holm"]]
            cells += [_count(r["min_suspect_size"])]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
        return lines

    main = df[df["shift"].fillna(NO_SHIFT) == NO_SHIFT]
    shift = df[df["shift"].fillna(NO_SHIFT) != NO_SHIFT]
    lines = [f"# {title}", ""] + table(main)
    if len(shift):
        lines += [
            "",
            "Distribution shift: suspect sets of NON-members that differ from the outside set (every "
            "rejection is a false positive):",
            "",
        ] + table(shift)
        lines += [""]
        for design, g in shift.groupby("design", sort=False):
            ok = g[g["p_value"].notna()]
            k, n = int((ok["p_value"] < ok["alpha"]).sum()), len(ok)
            if n:
                from ..metrics import clopper_pearson

                lo, hi = clopper_pearson(k, n)
                lines.append(
                    f"- {design}: {k} of {n} shifted non-member sets rejected at α (95% interval [{lo:.2f}, {hi:.2f}])"
                )
    lines += [
        "",
        "Calibration of the test (false-positive rate at α on reference non-members disjoint from every "
        "tested set, out-of-fold combined scores, independent disjoint splits):",
        "",
    ]
    for (d, t, e), g in df.groupby(["dataset", "target", "evidence"], sort=True):
        r = g.iloc[0]
        t = f"{t} ({e})" if kinds else t
        if not r["calibration_splits"] or r["calibration_splits"] != r["calibration_splits"]:
            size = r.get("calibration_split_size")
            need = f"{2 * int(size)} needed per independent split" if size == size and size else "nothing to combine"
            lines.append(f"- {d}/{t}: not calibrated ({int(r['calibration_pool'])} reference non-members; {need})")
            continue
        lines.append(
            f"- {d}/{t}: {int(r['calibration_splits'])} disjoint {int(r['calibration_split_size'])}+"
            f"{int(r['calibration_split_size'])} splits of {int(r['calibration_pool'])} reference non-members: "
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
