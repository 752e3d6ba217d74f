"""A blind-target simulation of every fitted attack part: does a threshold placed on the reference
scores keep its false-positive rate on the evaluation candidates?

On a blind target the attack's features of members and non-members come from one distribution, so
every candidate is exchangeable.  Per replicate, for every attack with a fitted part (RAG-MIA's
gray-box ensemble, S²MIA-M's classifier and S²MIA-T's thresholds, DCMI's θ/γ/τ, MBA's γ), two
procedures score the same features:

* ``new``: ragmi's cross-fitting (ragmi.attacks.folds): every row scored or decided by the one part
  fitted on the reference rows of the other folds, an evaluation row's fold hashed from its doc_id;
* ``old``: the procedure at the branch point, reimplemented here: RAG-MIA and S²MIA-M score an
  evaluation row by the MEAN of the K fold parts (stratified folds); DCMI, MBA and S²MIA-T choose
  their θ, γ, τ or thresholds on all reference rows and decide every row with that one choice.

Measured per (variant, procedure), as means over replicates with a 95% interval (mean ± 1.96 ·
sd / sqrt(replicates)):

* ``fpr_at_5``: the evaluation non-members' rate at or above ``ragmi.metrics.threshold_at_fpr`` of the
  reference non-members' scores at 5% (variants whose score is continuous); exchangeable scores give
  ``floor(0.05 n) / (n + 1)`` for n reference non-members (``expected_fpr_at_5``);
* ``decision_gap``: the evaluation non-members' decision rate minus the reference non-members' (what
  the reference set reports as the decision rule's FPR); 0 in expectation when both are decided by
  the same procedure.

The test suite (tests/test_crossfit.py) runs it at >= 500 replicates with cheap parts (``--cheap``:
a bootstrap ensemble of linear discriminants for RAG-MIA, one for S²MIA-M); without ``--cheap`` the
parts are ragmi's own (RAG-MIA's ``ensemble_scores`` of ``--ensemble-size`` sklearn models, S²MIA's
configured classifier), at the sizes given.

Run: ``.venv/bin/python benchmarks/crossfit.py [--reps 500] [--n-ref 60] [--n-eval 60] [--folds 5]
[--ensemble-size 40] [--cheap] [--out results/benchmarks/crossfit.json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from ragmi.attacks import rag_mia as rag_mia_module  # noqa: E402
from ragmi.attacks.dcmi import DCMI, best_threshold  # noqa: E402
from ragmi.attacks.mba import MBA, gamma_decisions, select_gamma  # noqa: E402
from ragmi.attacks.rag_mia import RagMIA  # noqa: E402
from ragmi.attacks.s2mia import S2MIA, min_margin, threshold_search  # noqa: E402
from ragmi.metrics import threshold_at_fpr  # noqa: E402

FPR = 0.05


# ---------------------------------------------------------------------------------------------
# cheap parts (vectorised numpy): continuous scores that fit noise, fold by fold
# ---------------------------------------------------------------------------------------------
def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def linear_score(x_train, y_train, x_test) -> np.ndarray:
    """A linear discriminant: the difference of the class means, standardised, through a sigmoid."""
    mu, sd = x_train.mean(0), x_train.std(0) + 1e-9
    z_train, z_test = (x_train - mu) / sd, (x_test - mu) / sd
    w = z_train[y_train == 1].mean(0) - z_train[y_train == 0].mean(0)
    return _sigmoid(3.0 * z_test @ w)


def cheap_ensemble(x_train, y_train, x_test, size: int, seed: int) -> np.ndarray:
    """RAG-MIA's ``ensemble_scores`` with linear discriminants on bootstrap samples (same signature)."""
    rng = np.random.default_rng(seed)
    x_train, y_train, x_test = np.asarray(x_train), np.asarray(y_train), np.asarray(x_test)
    out = np.zeros(len(x_test))
    for _ in range(size):
        for _attempt in range(20):
            idx = rng.integers(0, len(y_train), len(y_train))
            if 0 < y_train[idx].sum() < len(idx):
                break
        out += linear_score(x_train[idx], y_train[idx], x_test)
    return out / size


class CheapClassifier:
    """S²MIA-M's classifier as a linear discriminant (fit / predict_proba)."""

    def fit(self, x, y):
        self.x, self.y = np.asarray(x, float), np.asarray(y, int)
        return self

    def predict_proba(self, x):
        p = linear_score(self.x, self.y, np.asarray(x, float))
        return np.column_stack([1 - p, p])


@contextmanager
def cheap_rag_mia(enabled: bool):
    real = rag_mia_module.ensemble_scores
    if enabled:
        rag_mia_module.ensemble_scores = cheap_ensemble
    try:
        yield
    finally:
        rag_mia_module.ensemble_scores = real


# ---------------------------------------------------------------------------------------------
# the branch point's procedures, reimplemented
# ---------------------------------------------------------------------------------------------
def old_mean_of_folds(fit_predict, x, is_ref, y_ref, folds: int, seed: int) -> np.ndarray:
    """Out of fold (stratified K-fold) for reference rows, the MEAN of the K fold parts for the others."""
    x_ref, x_eval = x[is_ref], x[~is_ref]
    oof, ev = np.zeros(len(y_ref)), np.zeros(len(x_eval))
    rng = np.random.default_rng(seed)
    fold = np.zeros(len(y_ref), dtype=int)
    for c in (0, 1):  # stratified: each class shuffled and dealt (sklearn's StratifiedKFold, shuffled)
        idx = rng.permutation(np.flatnonzero(y_ref == c))
        fold[idx] = np.arange(len(idx)) % folds
    for k in range(folds):
        tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
        pred = fit_predict(x_ref[tr], y_ref[tr], np.concatenate([x_ref[te], x_eval]), seed + k + 1)
        oof[te], ev = pred[: len(te)], ev + pred[len(te) :]
    out = np.zeros(len(x))
    out[is_ref], out[~is_ref] = oof, ev / folds
    return out


# ---------------------------------------------------------------------------------------------
# one replicate
# ---------------------------------------------------------------------------------------------
def design(n_ref: int, n_eval: int):
    """(doc_ids, reference labels, is_ref, y_ref, reference non-member mask, evaluation non-member mask)."""
    ids = [f"rm{i}" for i in range(n_ref)] + [f"rn{i}" for i in range(n_ref)]
    ids += [f"em{i}" for i in range(n_eval)] + [f"en{i}" for i in range(n_eval)]
    ref = {d: int(d[1] == "m") for d in ids if d[0] == "r"}
    is_ref = np.array([d[0] == "r" for d in ids])
    y_ref = np.array([ref[d] for d in ids if d in ref])
    ref_non = np.array([d.startswith("rn") for d in ids])
    ev_non = np.array([d.startswith("en") for d in ids])
    return ids, ref, is_ref, y_ref, ref_non, ev_non


class Simulation:
    def __init__(self, n_ref=60, n_eval=60, folds=5, ensemble_size=3, cheap=True):
        self.n_ref, self.n_eval, self.folds, self.size, self.cheap = n_ref, n_eval, folds, ensemble_size, cheap
        self.ids, self.ref, self.is_ref, self.y_ref, self.ref_non, self.ev_non = design(n_ref, n_eval)
        self.rag = RagMIA({"templates": [2], "ensemble_size": ensemble_size, "cv_folds": folds})
        self.s2 = S2MIA({"cv_folds": folds, "n_estimators": 20})
        if cheap:
            self.s2._make_classifier = lambda seed: CheapClassifier()
        self.dcmi = DCMI({"cv_folds": folds})
        self.mba = MBA({"cv_folds": folds})

    # the measures of one variant under one procedure
    def measure(self, score=None, decision=None) -> dict:
        out = {}
        if score is not None:
            t = threshold_at_fpr(score[self.ref_non], FPR)
            out["fpr_at_5"] = float(np.mean(score[self.ev_non] >= t))
        if decision is not None:
            out["decision_gap"] = float(decision[self.ev_non].mean() - decision[self.ref_non].mean())
        return out

    def replicate(self, rep: int, attacks=("rag_mia", "s2mia", "dcmi", "mba")) -> dict:
        """{variant: {procedure: {measure: value}}} for one blind replicate."""
        rng = np.random.default_rng([20261205, rep])
        n = len(self.ids)
        res = {}
        for a in (self.rag, self.s2, self.dcmi, self.mba):
            a.seed = rep
        if "rag_mia" in attacks:
            py = rng.beta(2.0, 5.0, n)
            pn = (1 - py) * rng.uniform(0.5, 1.0, n)
            x = np.column_stack([np.log(py / (1 - py)), np.log(pn / (1 - pn)), np.log(py) - np.log(pn)])
            with cheap_rag_mia(self.cheap):
                new = self.rag._crossfit(self.ids, x, self.ref, 2)[0]
                fp = lambda xt, yt, xs, s: rag_mia_module.ensemble_scores(xt, yt, xs, self.size, s)  # noqa: E731
                old = old_mean_of_folds(fp, x, self.is_ref, self.y_ref, self.folds, rep)
            res["rag_mia/gray"] = {
                "new": self.measure(new, (new > 0.5).astype(int)),
                "old": self.measure(old, (old > 0.5).astype(int)),
            }
        if "s2mia" in attacks:
            s, ppl = rng.beta(1.0, 4.0, n), np.exp(rng.normal(1.5, 0.5, n))
            x = np.column_stack([s, ppl])
            new = self.s2.model_scores(x, self.ids, self.ref)[0]

            def fp(xt, yt, xs, seed):
                return self.s2._make_classifier(seed).fit(xt, yt).predict_proba(xs)[:, 1]

            old = old_mean_of_folds(fp, x, self.is_ref, self.y_ref, self.folds, rep)
            res["s2mia/M"] = {
                "new": self.measure(new, (new > 0.5).astype(int)),
                "old": self.measure(old, (old > 0.5).astype(int)),
            }
            t = self.s2.threshold_scores(s, ppl, self.ids, self.ref)
            ts, tp, _ = threshold_search(s[self.is_ref], ppl[self.is_ref], self.y_ref)
            old_score = min_margin(s, ppl, ts, tp, s[self.is_ref], ppl[self.is_ref])
            res["s2mia/T"] = {
                "new": self.measure(t["score"].to_numpy(), t["decision"].to_numpy()),
                "old": self.measure(old_score, ((s >= ts) & (ppl <= tp)).astype(int)),
            }
        if "dcmi" in attacks:
            cal = {th: rng.normal(0.1, 0.15, n) for th in self.dcmi.all_thetas()}
            fit = self.dcmi.fitted_choices(self.ids, cal, self.ref)
            thetas = self.dcmi.thetas
            pick = ([thetas.index(th) for th in fit["adv1_theta"]], np.arange(n))
            s1 = np.stack([cal[th] for th in thetas])[pick]
            t2 = self.dcmi.theta_adv2
            # the branch point: one choice on all reference rows
            best = None
            for th in thetas:
                g, ok = best_threshold(cal[th][self.is_ref], self.y_ref, self.dcmi.gammas)
                if best is None or ok > best[2]:
                    best = (th, g, ok)
            tau = float(np.percentile(cal[t2][self.is_ref][self.y_ref == 0], 75))
            th0 = thetas[0]
            g0 = best_threshold(cal[th0][self.is_ref], self.y_ref, self.dcmi.gammas)[0]
            res["dcmi/adv1"] = {
                "new": self.measure(s1, (s1 > fit["adv1_gamma"]).astype(int)),
                "old": self.measure(cal[best[0]], (cal[best[0]] > best[1]).astype(int)),
            }
            res["dcmi/adv2"] = {
                "new": self.measure(None, (cal[t2] > fit["adv2_tau"]).astype(int)),
                "old": self.measure(None, (cal[t2] > tau).astype(int)),
            }
            res[f"dcmi/theta={th0:.2f}"] = {
                "new": self.measure(None, (cal[th0] > fit["theta_gamma"][th0]).astype(int)),
                "old": self.measure(None, (cal[th0] > g0).astype(int)),
            }
        if "mba" in attacks:
            p = rng.beta(2.0, 3.0, n)
            frac = rng.binomial(10, p) / 10
            gamma = self.mba.crossfit_gamma(frac, self.ids, self.ref)[0]
            g_old = select_gamma(frac[self.is_ref], self.y_ref, self.mba.params["gamma_grid"])[0]
            res["mba/gamma"] = {
                "new": self.measure(None, gamma_decisions(frac, gamma)),
                "old": self.measure(None, gamma_decisions(frac, g_old)),
            }
        return res

    def expected_fpr_at_5(self) -> float:
        return math.floor(FPR * self.n_ref + 1e-9) / (self.n_ref + 1)


def summarise(reps: list[dict]) -> dict:
    """{variant: {procedure: {measure: {mean, lo, hi, sd, n}}}} over replicates."""
    out: dict = {}
    for variant in reps[0]:
        for proc in reps[0][variant]:
            for m in reps[0][variant][proc]:
                v = np.array([r[variant][proc][m] for r in reps])
                se = float(v.std(ddof=1) / math.sqrt(len(v)))
                out.setdefault(variant, {}).setdefault(proc, {})[m] = {
                    "mean": float(v.mean()),
                    "lo": float(v.mean() - 1.96 * se),
                    "hi": float(v.mean() + 1.96 * se),
                    "se": se,
                    "n": len(v),
                }
    return out


def run(reps=500, n_ref=60, n_eval=60, folds=5, ensemble_size=3, cheap=True, attacks=None) -> dict:
    sim = Simulation(n_ref, n_eval, folds, ensemble_size, cheap)
    attacks = tuple(attacks or ("rag_mia", "s2mia", "dcmi", "mba"))
    t0 = time.perf_counter()
    rows = [sim.replicate(r, attacks) for r in range(reps)]
    return {
        "replicates": reps,
        "n_ref_per_class": n_ref,
        "n_eval_per_class": n_eval,
        "folds": folds,
        "ensemble_size": ensemble_size,
        "cheap": cheap,
        "nominal_fpr": FPR,
        "expected_fpr_at_5": sim.expected_fpr_at_5(),
        "seconds": round(time.perf_counter() - t0, 1),
        "results": summarise(rows),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--n-ref", type=int, default=60, help="reference candidates per class")
    ap.add_argument("--n-eval", type=int, default=60, help="evaluation candidates per class")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--ensemble-size", type=int, default=40, help="RAG-MIA's ensemble (the schema's default: 40)")
    ap.add_argument("--cheap", action="store_true", help="linear discriminants instead of ragmi's own models")
    ap.add_argument("--attacks", nargs="*", default=None, help="rag_mia s2mia dcmi mba (default: all)")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "crossfit.json"))
    a = ap.parse_args(argv)
    res = run(a.reps, a.n_ref, a.n_eval, a.folds, a.ensemble_size, a.cheap, a.attacks)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(
        f"{res['replicates']} replicates, {a.n_ref}+{a.n_ref} reference, {a.n_eval}+{a.n_eval} evaluation, "
        f"K={a.folds}; exchangeable FPR at the 5% threshold: {res['expected_fpr_at_5']:.4f} ({res['seconds']} s)"
    )
    for variant, procs in res["results"].items():
        for proc, ms in procs.items():
            cells = [f"{m} {v['mean']:+.4f} [{v['lo']:+.4f}, {v['hi']:+.4f}]" for m, v in ms.items()]
            print(f"  {variant:18s} {proc}: " + "; ".join(cells))
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
