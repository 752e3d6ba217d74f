"""The headline table ``summary``: does each attack's headline variant leak membership on each target?

One row per (dataset, target, attack headline variant) over every target that is not a negative
control: the defenses, n, AUC with its 95% interval, two TPR figures (below), queries and tokens per
candidate, and a verdict:

* ``leaks``: the AUC interval lies above 0.5;
* ``inverted``: it lies below 0.5 (the score ranks non-members higher: informative, the wrong way);
* ``no evidence at this n``: it contains 0.5 (an attack with a small true AUC cannot be told from
  chance at this n: the footnote gives the AUC detected with 50% and with 80% power,
  :func:`ragmi.metrics.min_detectable_auc`, :func:`ragmi.metrics.min_detectable_auc_power`);
* ``uninformative``, overriding those three: the attack gave every evaluation candidate the same
  score, or could read no answer (``informative`` of ragmi.metrics: e.g. every answer was "No."): its
  AUC of 0.5 says nothing about the sample, only that this attack read nothing from this target;
* ``control failed``, overriding the others but ``uninformative``: a negative control of the same
  dataset and variant (``<base>--null-db``, ``<base>--no-retrieval``, where ``<base>`` is the target
  itself or, for a defended target, its undefended counterpart, whose controls it inherits) is
  *informative* and rejects AUC = 0.5 family-wise: its two-sided Mann–Whitney p (``auc_p``,
  ragmi.metrics.auc_pvalues), Holm-adjusted over every informative control of the run
  (ragmi.multiplicity.holm), is below 0.05.  The attack then separates members from non-members by
  something other than membership of the database.  A control whose interval excludes 0.5 per test
  but not after Holm does not fail the cell: the detail says so and the footnote counts it.  The
  run-level chance of a spurious ``control failed`` is thereby at most 5% whatever the number of
  controls (Holm 1979); the footnote gives it as simulated with the run's own controls
  (:func:`control_false_alarm_rates`), beside that of the former rule (any 95% interval excluding 0.5).
  A control scores the base target's fitted attack on the control's answers (ragmi.plan.control_base),
  so it controls the reported rule;
* ``not computed``: the variant was skipped (e.g. a gray-box variant on a target without
  log-probabilities).

The two TPR figures are named for what they are: ``roc_tpr`` is the field's TPR at x% FPR read from
the evaluation ROC (x the lowest configured non-zero level with x·n ≥ 1 evaluation non-members; the
threshold is chosen on the evaluation set, as LiRA and MIMIR report it), and ``tpr`` is the
operational TPR at the threshold chosen on the *reference* set for x% FPR there, printed with the FPR it
realises on the evaluation non-members (``fpr_realized``, with its interval).  A cell is never labelled
with an FPR it did not realise.

Beside the per-cell verdict, ``verdict_holm`` reads the run's cells family-wise: a cell ``leaks``
there when its one-sided p of AUC > 0.5 (``auc_p_greater``), Holm-adjusted over every informative
computed cell of the run (``auc_p_greater_holm``), is below 0.05; else ``no evidence after Holm``
(``uninformative``, ``not computed`` and ``control failed`` carry over).

The frame (and CSV) is deterministic in its inputs: no resampling happens here; the footnote's
simulation is seeded and runs here too (its rates ride on the frame, ``attrs["control_false_alarm"]``).
:func:`run` is the analysis of rule ``analysis``; :mod:`ragmi.report.summary` prints the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..attacks.base import is_main_variant
from ..cells import format_ci
from ..costs import OUTPUT_TOKENS, PROMPT_TOKENS, QUERIES
from ..metric_rows import auc_verdict, fpr_keys, is_informative, lowest_tpr, roc_tpr, to_float
from ..metrics import EXACT_MWU_MAX_PAIRS, Z95, auc_pvalues_from_auc, min_detectable_auc, min_detectable_auc_power
from ..multiplicity import holm
from ..plan import baseline_targets
from .readers import read_csvs

CONTROL_SUFFIX = {"null_database": "--null-db", "no_retrieval": "--no-retrieval"}


def control_excludes_chance(row) -> bool:
    """Whether a control row's AUC interval excludes 0.5 (False when it has none)."""
    lo, hi = row.get("auc_lo"), row.get("auc_hi")
    return bool(pd.notna(lo) and pd.notna(hi) and (lo > 0.5 or hi < 0.5))


VERDICTS = ("leaks", "inverted", "no evidence at this n", "uninformative", "control failed", "not computed")


CONTROL_SHORT = {"null_database": "null-db", "no_retrieval": "k=0"}


TOKENS = "tokens_per_candidate"


FAMILY_ALPHA = 0.05  # the family-wise level of the control rule and of verdict_holm, fixed in advance


SIM_REPLICATES = 2000  # replicates of the footnote's false-alarm simulation


SIM_SEED = 0


COLUMNS = [
    "dataset",
    "target",
    "defenses",
    "attack",
    "variant",
    "n_members",
    "n_nonmembers",
    "n_ref_members",
    "n_ref_nonmembers",
    "auc",
    "auc_lo",
    "auc_hi",
    "roc_tpr_fpr",
    "roc_tpr",
    "roc_tpr_lo",
    "roc_tpr_hi",
    "tpr_fpr",
    "tpr",
    "tpr_lo",
    "tpr_hi",
    "fpr_realized",
    "fpr_realized_lo",
    "fpr_realized_hi",
    "tpr_note",
    "tpr_retrieved",
    "tpr_retrieved_lo",
    "tpr_retrieved_hi",
    "n_retrieved_members",
    QUERIES,
    PROMPT_TOKENS,
    OUTPUT_TOKENS,
    TOKENS,
    "controls",
    "controls_from",
    "n_informative_controls",
    "n_uninformative_controls",
    "informative",
    "uninformative_reason",
    "min_detectable_auc",
    "min_detectable_auc_80",
    "auc_p",
    "auc_p_greater",
    "auc_p_greater_holm",
    "informative_controls",
    "control_p_null_database",
    "control_p_no_retrieval",
    "n_run_controls",
    "controls_failed_per_test",
    "controls_failed_holm",
    "verdict",
    "verdict_holm",
    "verdict_detail",
]


def summary_frame(metrics: pd.DataFrame, targets: Mapping) -> pd.DataFrame:
    """The summary rows (columns :data:`COLUMNS`) from the concatenated metrics CSVs of every run
    (controls included: their AUCs decide ``control failed``) and the validated ``targets`` section; the
    controls' simulated false-alarm rates (:func:`false_alarm`) in ``attrs[FALSE_ALARM]`` when the run has
    an informative control."""
    base_of = baseline_targets(targets)  # a defended target reads its undefended counterpart's controls
    m = metrics[metrics["variant"].astype(str).map(is_main_variant)]
    key = {(r["dataset"], r["target"], r["variant"]): r for _, r in m.iterrows()}
    keys = fpr_keys(metrics.columns)
    family = _control_family(key, targets)
    family_p = dict(zip(family, holm([row_pvalues(key[k])[0] for k in family])))
    rows = [
        _summary_row(r, keys, targets, base_of, key, family_p, len(family))
        for _, r in m.iterrows()
        if _control(targets, r["target"]) == "none"
    ]
    out = pd.DataFrame(rows, columns=COLUMNS)
    _add_holm_verdicts(out)
    for c in _INTEGER_COLUMNS:
        out[c] = out[c].astype("Int64")  # integers in the CSV (50, not 50.0); missing stays empty
    # undefended targets first (the defended ones compare against them), then by target and attack
    order = out["defenses"].astype(str).ne("")
    out = out.assign(_d=order).sort_values(["dataset", "_d", "target"], kind="stable").drop(columns="_d")
    out = out.reset_index(drop=True)
    sim = false_alarm(out)
    if sim is not None:
        out.attrs[FALSE_ALARM] = sim
    return out


_INTEGER_COLUMNS = (
    "n_members",
    "n_nonmembers",
    "n_ref_members",
    "n_ref_nonmembers",
    "n_retrieved_members",
    "n_informative_controls",
    "n_uninformative_controls",
    "n_run_controls",
    "controls_failed_per_test",
    "controls_failed_holm",
)


def _control(targets: Mapping, t) -> str:
    """Target ``t``'s control kind (``"none"`` for a target that is no negative control)."""
    return targets[t]["control"] if t in targets else "none"


def _control_family(key: Mapping, targets: Mapping) -> list[tuple]:
    """The family of the control rule: every informative control row of the run (headline variants),
    each attached to a main row of its base target (as :func:`_read_controls` reads them)."""
    return [
        k
        for k, c in key.items()
        if _control(targets, k[1]) in CONTROL_SUFFIX
        and str(k[1]).endswith(CONTROL_SUFFIX[_control(targets, k[1])])
        and (k[0], str(k[1])[: -len(CONTROL_SUFFIX[_control(targets, k[1])])], k[2]) in key
        and is_informative(c)
    ]


@dataclass
class _ControlReading:
    """What a summary row's negative controls say."""

    controls: list[str] = field(default_factory=list)  # one cell per control, e.g. "null-db AUC 0.52 [...]"
    failed: list[str] = field(default_factory=list)  # controls that exclude 0.5 after Holm
    per_test: list[str] = field(default_factory=list)  # controls that exclude 0.5 per test only
    kinds: list[str] = field(default_factory=list)  # the informative controls' short names
    control_p: dict = field(default_factory=lambda: dict.fromkeys(CONTROL_SUFFIX, float("nan")))
    n_inf: int = 0
    n_uninf: int = 0


def _read_controls(r, t, base, key: Mapping, targets: Mapping, family_p: Mapping, n_family: int) -> _ControlReading:
    """The negative controls of row ``r`` (target ``t``), those of ``base``, read against the run's family."""
    out = _ControlReading()
    for kind, suffix in CONTROL_SUFFIX.items():
        if base is None:
            break
        ck = (r["dataset"], base + suffix, r["variant"])
        c = key.get(ck)
        if c is None or _control(targets, base + suffix) != kind:
            continue
        if not is_informative(c):
            out.n_uninf += 1
            out.controls.append(f"{CONTROL_SHORT[kind]} uninformative")
            continue
        out.n_inf += 1
        out.kinds.append(CONTROL_SHORT[kind])
        cell = f"{CONTROL_SHORT[kind]} AUC {format_ci(c.get('auc'), c.get('auc_lo'), c.get('auc_hi'))}"
        out.controls.append(cell)
        p_raw = row_pvalues(c)[0]
        out.control_p[kind] = p_raw
        adjusted = family_p.get(ck, float("nan"))
        if adjusted < FAMILY_ALPHA:
            out.failed.append(
                f"{cell}{_inherited(base, t)} excludes 0.5 after Holm (p = {_p(p_raw)}, adjusted {_p(adjusted)})"
            )
        elif control_excludes_chance(c):
            out.per_test.append(
                f"{cell}{_inherited(base, t)}: excludes 0.5 per test (p = {_p(p_raw)}), not after Holm over the "
                f"run's {n_family} controls (adjusted p = {_p(adjusted)})"
            )
    return out


def _verdict(r, auc: float, lo: float, hi: float, informative: bool, reason: str, ctl: _ControlReading):
    """(verdict, verdict_detail) of a summary row (module docstring)."""
    skipped = r.get("skipped")
    if isinstance(skipped, str) and skipped or math.isnan(auc) or math.isnan(lo) or math.isnan(hi):
        return "not computed", skipped if isinstance(skipped, str) and skipped else "no AUC interval"
    if not informative:
        return "uninformative", reason
    if ctl.failed:
        return "control failed", "; ".join(ctl.failed + ctl.per_test) + f" (own verdict: {auc_verdict(lo, hi)})"
    return auc_verdict(lo, hi), "; ".join(ctl.per_test)


def _tpr_columns(r, keys) -> dict:
    """The row's two TPR figures (module docstring): the evaluation ROC's and the operational one."""
    level, tpr, tpr_lo, tpr_hi, tpr_note = lowest_tpr(r, keys)
    fpr_r = [
        to_float(r.get(f"fpr_realized_{_key(level)}{s}")) if level == level else float("nan")
        for s in ("", "_lo", "_hi")
    ]
    roc_level, roc, roc_lo, roc_hi = roc_tpr(r, keys)
    return {
        "roc_tpr_fpr": roc_level,
        "roc_tpr": roc,
        "roc_tpr_lo": roc_lo,
        "roc_tpr_hi": roc_hi,
        "tpr_fpr": level,
        "tpr": tpr,
        "tpr_lo": tpr_lo,
        "tpr_hi": tpr_hi,
        "fpr_realized": fpr_r[0],
        "fpr_realized_lo": fpr_r[1],
        "fpr_realized_hi": fpr_r[2],
        "tpr_note": tpr_note,
    }


def _summary_row(r, keys, targets: Mapping, base_of: Mapping, key: Mapping, family_p: Mapping, n_family: int) -> dict:
    """The summary row of the main metrics row ``r`` of a target that is no negative control."""
    t = r["target"]
    tpr_columns = _tpr_columns(r, keys)
    pt, ot = to_float(r.get(PROMPT_TOKENS)), to_float(r.get(OUTPUT_TOKENS))
    tokens = float("nan") if math.isnan(pt) and math.isnan(ot) else float(np.nansum([pt, ot]))
    auc, lo, hi = to_float(r.get("auc")), to_float(r.get("auc_lo")), to_float(r.get("auc_hi"))
    nm, nn = to_float(r.get("n_members")), to_float(r.get("n_nonmembers"))
    base = base_of.get(t, t)
    ctl = _read_controls(r, t, base, key, targets, family_p, n_family)
    informative = is_informative(r)
    reason = "" if informative else str(r.get("uninformative_reason") or "constant scores")
    verdict, detail = _verdict(r, auc, lo, hi, informative, reason, ctl)
    p_two, p_greater = row_pvalues(r) if verdict != "not computed" else (float("nan"), float("nan"))
    defs = targets[t]["defenses"] if t in targets else []
    ok = nm >= 1 and nn >= 1
    return {
        "dataset": r["dataset"],
        "target": t,
        "defenses": ", ".join(defs),
        "attack": r["attack"],
        "variant": r["variant"],
        "n_members": nm,
        "n_nonmembers": nn,
        "n_ref_members": to_float(r.get("n_ref_members")),
        "n_ref_nonmembers": to_float(r.get("n_ref_nonmembers")),
        "auc": auc,
        "auc_lo": lo,
        "auc_hi": hi,
        **tpr_columns,
        # TPR | retrieved at the reference threshold (ragmi.metrics.retrieved_tpr): in the CSV only
        **{c: to_float(r.get(c)) for c in ("tpr_retrieved", "tpr_retrieved_lo", "tpr_retrieved_hi")},
        "n_retrieved_members": to_float(r.get("n_retrieved_members")),
        QUERIES: to_float(r.get(QUERIES)),
        PROMPT_TOKENS: pt,
        OUTPUT_TOKENS: ot,
        TOKENS: tokens,
        "controls": "; ".join(ctl.controls),
        "controls_from": base if base is not None and ctl.controls else "",
        "n_informative_controls": ctl.n_inf,
        "n_uninformative_controls": ctl.n_uninf,
        "informative": informative,
        "uninformative_reason": reason,
        "min_detectable_auc": min_detectable_auc(int(nm), int(nn)) if ok else float("nan"),
        "min_detectable_auc_80": min_detectable_auc_power(int(nm), int(nn), 0.8) if ok else float("nan"),
        "auc_p": p_two,
        "auc_p_greater": p_greater,
        "auc_p_greater_holm": float("nan"),  # filled by _add_holm_verdicts, over the run's cells
        "informative_controls": ", ".join(ctl.kinds),
        "control_p_null_database": ctl.control_p["null_database"],
        "control_p_no_retrieval": ctl.control_p["no_retrieval"],
        "n_run_controls": n_family,
        "controls_failed_per_test": len(ctl.per_test) + len(ctl.failed),
        "controls_failed_holm": len(ctl.failed),
        "verdict": verdict,
        "verdict_holm": "",
        "verdict_detail": detail,
    }


def _add_holm_verdicts(out: pd.DataFrame) -> None:
    """Fill ``auc_p_greater_holm`` and ``verdict_holm``: the family-wise reading of the cells, Holm over
    every informative computed cell's one-sided p."""
    tested = out["verdict"].isin(["leaks", "inverted", "no evidence at this n", "control failed"]).to_numpy()
    adjusted = holm(np.where(tested, out["auc_p_greater"].to_numpy(float), np.nan))
    out["auc_p_greater_holm"] = adjusted
    out["verdict_holm"] = [
        v
        if v in ("uninformative", "not computed", "control failed")
        else ("leaks" if a < FAMILY_ALPHA else "no evidence after Holm")
        for v, a in zip(out["verdict"], adjusted)
    ]


def _inherited(base, target) -> str:
    return f" (of {base})" if base is not None and base != target else ""


def row_pvalues(r) -> tuple[float, float]:
    """``(auc_p, auc_p_greater)`` of a metrics row: its Mann–Whitney p-values (ragmi.metrics.auc_pvalues),
    or, for a row written before they existed, the normal approximation from its AUC and sizes
    (ragmi.metrics.auc_pvalues_from_auc)."""
    p, g = to_float(r.get("auc_p")), to_float(r.get("auc_p_greater"))
    if math.isnan(p) or math.isnan(g):
        return auc_pvalues_from_auc(to_float(r.get("auc")), *_sizes(r))
    return p, g


def _sizes(r) -> tuple[int, int]:
    nm, nn = to_float(r.get("n_members")), to_float(r.get("n_nonmembers"))
    return (0 if math.isnan(nm) else int(nm)), (0 if math.isnan(nn) else int(nn))


def control_false_alarm_rates(
    sizes, groups, alpha: float = FAMILY_ALPHA, n_rep: int = SIM_REPLICATES, seed: int = SIM_SEED
) -> dict[str, float]:
    """The run-level rate of a spurious ``control failed``: controls that are true nulls (members and
    non-members scored alike), with the run's own number of controls and their sizes
    (``sizes``: one ``(n_members, n_nonmembers)`` per informative control), ``n_rep`` seeded replicates.

    Two dependence structures bound the truth: ``independent`` (every control draws its own scores) and
    ``shared`` (the controls of one ``groups`` label, e.g. the variants of one attack on one control
    target, which read the same answers, draw the same scores: one ranking per group).  For each, the
    share of replicates where the Holm rule (:func:`ragmi.multiplicity.holm` over the controls' two-sided
    p, family-wise ``alpha``) rejects at least one control (``holm_*``) and where the former rule (any 95%
    score interval excluding 0.5, ragmi.metrics.auc_ci) does (``old_*``).  p-values as
    :func:`ragmi.metrics.auc_pvalues` computes them for untied scores (exact up to
    :data:`ragmi.metrics.EXACT_MWU_MAX_PAIRS` pairs)."""
    from scipy import stats

    from ..metrics import newcombe_variance

    sizes = [(int(a), int(b)) for a, b in sizes]
    if not sizes:
        return {}
    rng = np.random.default_rng(seed)
    labels = list(groups)
    out = {}
    for case in ("independent", "shared"):
        p = np.empty((n_rep, len(sizes)))
        old = np.zeros((n_rep, len(sizes)), dtype=bool)
        drawn: dict = {}
        for j, (nm, nn) in enumerate(sizes):
            share = (labels[j], nm, nn) if case == "shared" else None
            if share is not None and share in drawn:
                p[:, j], old[:, j] = drawn[share]
                continue
            x, y = rng.normal(size=(n_rep, nm)), rng.normal(size=(n_rep, nn))
            method = "exact" if nm * nn <= EXACT_MWU_MAX_PAIRS else "asymptotic"
            res = stats.mannwhitneyu(x, y, alternative="two-sided", method=method, axis=-1)
            auc = res.statistic / (nm * nn)
            p[:, j] = res.pvalue
            old[:, j] = np.abs(auc - 0.5) > Z95 * float(np.sqrt(newcombe_variance(0.5, nm, nn)))
            if share is not None:
                drawn[share] = (p[:, j].copy(), old[:, j].copy())
        # Holm rejects at least one test exactly when the smallest p is below alpha / m
        out[f"holm_{case}"] = float(np.mean(p.min(axis=1) < alpha / len(sizes)))
        out[f"old_{case}"] = float(np.mean(old.any(axis=1)))
    return out


FALSE_ALARM = "control_false_alarm"  # the frame's attrs key of :func:`false_alarm`


def false_alarm(df: pd.DataFrame) -> dict | None:
    """The run-level chance of a spurious ``control failed`` were every informative control a true null,
    simulated with the run's own controls and sizes (:func:`control_false_alarm_rates`): ``{"rates": …,
    "n_controls": …}``, or None without an informative control."""
    own = df[df["controls_from"].astype(str).eq(df["target"].astype(str))]
    if not int(own["n_informative_controls"].fillna(0).sum()):
        return None
    sizes, groups = [], []
    for _, r in own.iterrows():
        for kind in [k for k in str(r["informative_controls"] or "").split(", ") if k]:
            sizes.append(_sizes(r))
            groups.append((r["dataset"], r["target"], r["attack"], kind))
    ok = [i for i, (a, b) in enumerate(sizes) if a >= 1 and b >= 1]
    rates = control_false_alarm_rates([sizes[i] for i in ok], [groups[i] for i in ok])
    return {"rates": rates, "n_controls": len(ok)} if rates else None


def run(files: Mapping[str, Sequence[str]], config: Mapping) -> pd.DataFrame:
    """The analysis of rule ``analysis`` for table ``summary``: ``files`` ``metrics`` (every run's);
    ``config`` its key ``targets``.  The simulated false-alarm rates of the controls ride on the frame
    (``attrs[FALSE_ALARM]``, kept in the parquet) for the footnote."""
    return summary_frame(read_csvs(files["metrics"]), config["targets"])


def _p(x: float) -> str:
    return "n/a" if x != x else (f"{x:.0e}" if x < 0.001 else f"{x:.2g}")


def _key(level: float) -> str:
    return f"{round(float(level) * 100, 6):g}"
