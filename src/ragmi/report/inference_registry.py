"""The inference tables: what a data owner and a DP auditor conclude from the attacks' scores.

Declared here, in the order the registry lists them (:data:`TABLES`), each with its title and its notes
(printed under the Markdown table; the notes are the documentation of the table's columns):

* ``dataset_inference``: is a *set* of documents in the target's retrieval database (a p-value per
  suspect set), with the test's own calibration, and its figure;
* ``epsilon_audit``: the empirical lower bound on ε of every DP defense, beside the ε it claims.

Their rows are computed by :mod:`ragmi.analysis.dataset_inference` and :mod:`ragmi.analysis.epsilon`
(rule ``analysis``); :mod:`ragmi.report.inference_tables` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..analysis import dataset_inference as di_analysis
from ..analysis import epsilon as eps_analysis
from ..analysis.dataset_inference import NULL_DB
from ..analysis.epsilon import attacked_dp, dp_names
from ..plan import runs, target_attacks
from . import inference_tables
from .declare import Figure, Table, lazy_plot, read_analysis


def di_targets(config: Mapping) -> list[str]:
    """``dataset_inference.targets``, or every target that runs attacks; none when disabled."""
    di = config.get("dataset_inference") or {}  # tables and tests also hand the registry partial configs
    if not di.get("enabled"):
        return []
    chosen = di["targets"]
    if chosen is None:
        chosen = [t for t in config["targets"] if target_attacks(config, t)]
    return sorted(chosen)


def di_runs(config: Mapping) -> list[tuple[str, str]]:
    chosen = set(di_targets(config))
    return sorted({(d, t) for d, t, _a in runs(config) if t in chosen})


def _score_inputs(config: Mapping, pairs) -> dict[str, list[str]]:
    pairs = set(pairs)
    scores = [f"results/scores/{d}/{t}/{a}.parquet" for d, t, a in runs(config) if (d, t) in pairs]
    datasets = sorted({d for d, _t in pairs})
    return {"scores": scores, "candidates": [f"results/split/{d}/candidates.parquet" for d in datasets]}


def _di_inputs(config: Mapping) -> dict[str, list[str]]:
    """The chosen targets' scores, and their null-database controls' (the difference design reads them
    even where dataset_inference.targets leaves the control out), the candidates (with their text: the
    distribution-shift sets are cut by length and topic) and the data owner's files."""
    chosen = di_runs(config)
    every = {(d, t) for d, t, _a in runs(config)}
    controls = {(d, t + NULL_DB) for d, t in chosen if (d, t + NULL_DB) in every}
    files = _score_inputs(config, set(chosen) | controls)
    di = config["dataset_inference"] if files["scores"] else {}
    if di.get("suspect") is not None:
        files["user_sets"] = [di["suspect"], di["known_outside"]]
    return files


def sensitivity_path(dataset: str, target: str) -> str:
    """The rule epsilon_sensitivity's output (rules/epsilon.smk): Δ measured on the target's retriever."""
    return f"results/epsilon/{dataset}/{target}.parquet"


def _eps_inputs(config: Mapping) -> dict[str, list[str]]:
    dp = dp_names(config)
    if not dp:
        return {"defenses": []}  # nothing declares an ε: the table is not built
    attacked = attacked_dp(config, dp)
    if not attacked:
        return {}
    files = _score_inputs(config, [(d, t) for d, t, _n in attacked])
    files["sensitivity"] = [sensitivity_path(d, t) for d, t, _n in attacked]
    return files


TABLES = (
    Table(
        name="dataset_inference",
        title="Dataset inference: is this set of documents in the target's retrieval database?",
        notes=(
            "One row per dataset × target × evidence × suspect set.  Every attack's per-document scores of the "
            "target (its headline variants: all attacks, or only those that read the answers' text, what a "
            "black-box service without log-probabilities gives; dataset_inference.evidence) are combined by an L2 "
            "logistic regression fitted on the reference candidates only (their out-of-fold "
            "scores; labels the adversary knows), then applied to the evaluation candidates, which no fitted part "
            'has seen (Maini et al., NeurIPS 2024, "LLM Dataset Inference: Did you train on my dataset?").',
            "The test: an exact one-sided Wilcoxon-Mann-Whitney test that the suspect set's combined scores "
            "exceed the known-outside set's (scipy's exact distribution without ties; with ties every split "
            "enumerated, or B = 9999 seeded permutations, p = (1 + #)/(B + 1)); p_floor = 1/C(n_s + n_o, n_o) "
            "(and 1/(B + 1) by Monte Carlo) is the smallest p the sets allow, and a p at its floor is printed "
            '"≤ floor". Verdict "in the database" when p < α (dataset_inference.alpha, 0.01 by default), else "no '
            'evidence"; "uninformative" with its reason when the test cannot be computed or the sets are too '
            "small to reach α. p_welch (the one-sided Welch t-test) is a secondary column, printed only where "
            "both sides have at least 10 documents and Shapiro-Wilk does not reject normality at 0.05 on either "
            "side (else NaN, welch_reason says why).",
            "p Holm: Holm's step-down adjustment over every finite p of this table (all datasets, targets, "
            "evidence, designs and shift rows: one family); verdict (Holm) reads it at α and controls the "
            "family-wise error rate.",
            "Sets (from the split, seeded): known outside = a fixed half of the evaluation non-members; suspect = "
            "the evaluation members (members), the other half of the evaluation non-members (non-members: "
            "expected no evidence), or a mixture of the suspect non-members and a few members so that a fraction "
            "f of the suspect set is in the database; user = dataset_inference.suspect against "
            "dataset_inference.known_outside.",
            "Smallest set with p < α: the smallest number of suspect documents at which at least half of the "
            "seeded subsamples (dataset_inference.draws per size) reach p < α; — when the whole set does not.",
            "A small p says that the suspect set as a whole is in the database (more member-like than documents "
            "known to be outside), not which of its documents are; a large p is no evidence, not proof of "
            "absence: a mixture with few members, or a weak attack, can miss a set that is there.",
            "Distribution shift (shift ≠ none): suspect sets of evaluation NON-members that differ from the "
            "outside set: the longest third of the texts against the rest, each TF-IDF k-means topic cluster "
            "(dataset_inference.shift_topics) against the others, and another dataset's non-members against this "
            "one's; every rejection is a false positive (Duan et al. 2024, \"Do membership inference attacks work "
            'on large language models?"; Maini et al. 2024). design raw tests the combined scores; design '
            "null-db difference, where the target's null-database control has scores, tests each document's "
            "combined score on the target minus on the control (the same combiner), so that what the document "
            "itself brings (length, topic) cancels.",
            "Calibration: the exact test's false-positive rate at α on the reference non-members (disjoint from "
            "every tested set), their combined scores cross-fitted over dataset_inference.calibration_folds folds "
            "of the reference candidates, cut into disjoint splits of the smallest balanced size that can reach "
            "α (5 + 5 at 0.01): k of n independent tests with the 95% Clopper-Pearson interval on n. Random "
            "splits of one pool are exchangeable, so it checks the pipeline (no leak of the split into the "
            "scores), not a shifted suspect set (the shift rows do that).",
        ),
        inputs=_di_inputs,
        analysis=di_analysis.run,
        build=read_analysis,
        markdown=inference_tables.dataset_inference_markdown,
        figures=(
            Figure(
                "dataset_inference",
                "results/figures/dataset_inference.png",
                "report/dataset_inference.rst",
                lazy_plot("plot_dataset_inference"),
            ),
        ),
        config_keys=("seed", "dataset_inference"),
    ),
    Table(
        name="epsilon_audit",
        title="Empirical ε: lower bounds on the privacy loss of every DP defense, beside the ε it claims",
        notes=(
            "ε lower bound: for an ε-DP mechanism every test on its output has TPR ≤ e^ε·FPR and 1 − FPR ≤ "
            "e^ε·(1 − TPR); with one-sided Clopper–Pearson bounds on both rates (TPR from below, FPR from above) "
            "the larger of ln(TPR_lo / FPR_hi) and ln((1 − FPR_hi) / (1 − TPR_lo)), maximised over the thresholds "
            "tried, is a lower bound on the true ε with the confidence shown (audit.epsilon_confidence, Bonferroni "
            "over the 2 × thresholds bounds) — the DP-auditing bound of Jagielski et al. (NeurIPS 2020) and Nasr "
            "et al. (IEEE S&P 2021).",
            'Verdicts: "exceeds its claim" when the bound lies above the claim in the trial\'s unit (a violation at '
            'the stated confidence); "not refuted" when it lies at or below: the audit fails to refute the claim, '
            "which is not evidence that the claim holds (a weak test or too few trials gives a small bound for any "
            'mechanism); "bound not comparable" when the trial is not under the claim\'s relation or unit; "no '
            'trial of this hook" when the audit cannot drive it.',
            "mechanism: the audit drives a copy of the defense's retrieval hook (the configured one is not changed) "
            "on two neighbouring score vectors, audit.epsilon_trials runs each, thresholds on the log-likelihood "
            'ratio chosen on as many separate runs.  Two pairs: "declared Δ", two vectors the declared Δ apart '
            '(the claim at its full Δ: the most power against mis-scaled noise); and "<dataset>/<target> '
            'retriever", on each attacked target the defense protects, the scores its noise covers (DP-R, '
            "CA-DP: the first pool candidates; Private-RAG: the top k) for the database D and D with one "
            "document removed or added, measured on the target's own retriever over the attacks' queries (rule "
            "epsilon_sensitivity, audit.epsilon_sensitivity_queries and audit.epsilon_sensitivity_added), the "
            "pair that moves them most in L1: a defense whose declared Δ understates the retriever's is driven "
            "past its Δ and shows it.  Δ measured: the largest L1 change over the queries and documents tried (a "
            "lower bound on the sensitivity, not a certificate).",
            "Unit: DP-R and Private-RAG claim ε per query: a one-query trial compared with ε, and a trial of the "
            "T queries an attack sends about one document compared with T·ε (basic composition; T from the "
            "attacks' query files).  CA-DP claims ε per candidate over its T queries (ε/T each): a T-query trial "
            "compared with ε; T unknown (no attack queries the target, turns: attack) gives no trial.",
            "could certify up to: the largest bound these trials and thresholds can give (TPR = 1, FPR = 0); "
            "correct mechanism: the median and 5–95% range of the same procedure's bound over 200 seeded "
            "replicates of a Laplace mechanism exactly at its claim on the same pair (scale max(Δ declared, Δ of "
            "the pair) / ε per query): what a correct defense would show at this n.",
            "attack <variant>: the attack's evaluation members against evaluation non-members at thresholds "
            "chosen on the reference non-members' scores (never on the scores it bounds): a bound for document "
            'presence, which none of these defenses claims a guarantee for, so it is printed but "bound not '
            'comparable", never a flag; it says how far the document-level leak is from what an ε-DP guarantee '
            "for document presence would allow.",
            "no trial of this hook: the exponential mechanism's draws and the DP-style output perturbation are "
            "listed with the ε they state, but the audit has no neighbouring-input trial for them.",
        ),
        inputs=_eps_inputs,
        analysis=eps_analysis.run,
        build=read_analysis,
        markdown=inference_tables.epsilon_markdown,
        config_keys=(
            "targets",
            "defenses",
            "seed",
            "audit.epsilon_confidence",
            "audit.epsilon_trials",
        ),
    ),
)
