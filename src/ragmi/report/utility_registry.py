"""The utility tables: what each target's answers are worth, and what each defense costs in answer quality
against what it saves in leakage.

Declared here, in the order the registry lists them (:data:`TABLES`), each with its title and its notes
(printed under the Markdown table; the notes are the documentation of the table's columns):

* ``utility``: how well each target answers benign questions whose answers are in its database;
* ``privacy_utility``: privacy against utility per defended target, with the Pareto front, and its figure.

The frames come from :mod:`ragmi.report.utility_tables`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..analysis import utility as utility_analysis
from ..audit import plan as audit_plan
from ..plan import campaign_runs
from ..utility import plan as utility_plan
from . import utility_tables
from .campaign_registry import coverage_path
from .declare import Figure, Table, lazy_plot, read_analysis


def _utility_inputs(config: Mapping) -> dict[str, list[str]]:
    return {"utility": utility_plan.scores_files(config)}


def _privacy_utility_inputs(config: Mapping) -> dict[str, list[str]]:
    """The per-question utility scores of every utility run; the metrics and score files of the attacks
    run on those targets; their canaries and leakage files where the audit writes them; the curves of
    the adaptive extraction campaigns run on them (lists that would be empty are left out: the table is
    built whenever there are utility scores)."""
    files = {"utility": utility_plan.scores_files(config)}
    if not files["utility"]:
        return files
    chosen = set(utility_plan.utility_targets(config))
    attack_runs = utility_plan.attack_runs(config)
    files["metrics"] = [f"results/metrics/{d}/{t}/{a}.csv" for d, t, a in attack_runs]
    files["scores"] = [f"results/scores/{d}/{t}/{a}.parquet" for d, t, a in attack_runs]
    files["candidates"] = [f"results/split/{d}/candidates.parquet" for d in sorted({d for d, _, _ in attack_runs})]
    files["canaries"] = [f for f in audit_plan.canary_files(config) if Path(f).parent.name in chosen]
    files["leakage"] = [f for f in audit_plan.leakage_files(config) if Path(f).parts[-3] in chosen]
    files["coverage"] = [coverage_path(*r) for r in campaign_runs(config) if r[1] in chosen]
    return {k: v for k, v in files.items() if v}


_UTILITY_NOTES = (
    "Questions: utility.n_questions benign questions per dataset, each about a different member document "
    "(members that are not attack candidates first), so every answer is in the database: the dataset's own "
    "question and answer where it has them (PubMedQA: question, long answer), else one question and a short "
    "reference answer written once by the attacker LLM and kept only when the answer is grounded in its document "
    "(results/utility/<dataset>/questions.parquet). Every target answers the same questions through its own "
    "retrieval, defenses and template (up to utility.max_tokens tokens).",
    "Measures (docs/provenance.md#utility): exact match, substring match (FlashRAG's 'acc': the normalised "
    "reference is a substring of the normalised answer) and token F1 against the reference answer, normalised as "
    "in SQuAD/FlashRAG (lower case, punctuation and a/an/the removed); faithfulness (lexical): the share of the "
    "answer's content words that occur in the database texts of the documents the target retrieved, an LLM-free "
    "stand-in for RAGAS faithfulness (supported claims / claims): a paraphrase counts as unsupported, a false "
    "recombination of context words as supported; an abstention ('unanswerable') makes no claim and is left out "
    "of faithfulness (n counts the answers scored). A remote target's retrieved texts are unknown: n/a.",
    "Brackets: 95% percentile bootstrap over the questions (metrics.n_boot resamples, seeded per cell); Δ = "
    "defended − undefended target (same retriever, generator, k, template) over the questions both answered "
    "(n paired), paired bootstrap (the same resampled questions for both). Δ utility: lower / higher when its "
    "interval excludes 0, else no detectable change (not evidence of no cost).",
)


TABLES: tuple[Table, ...] = (
    Table(
        name="utility",
        title="Utility: how well each target answers benign questions whose answers are in its database",
        notes=_UTILITY_NOTES,
        inputs=_utility_inputs,
        analysis=utility_analysis.run_utility,
        build=read_analysis,
        markdown=utility_tables.utility_markdown,
        config_keys=("targets", "utility.seed", "metrics.n_boot"),
    ),
    Table(
        name="privacy_utility",
        title="Privacy against utility: what each defense saves in leakage and costs in answer quality",
        notes=(
            "One row per dataset × target × utility measure (utility.targets, and the undefended counterpart of each "
            "defended one); utility and Δ utility as in the utility table.",
            "Leakage: the headline attack variant (utility.headline_variant; unset: per dataset and undefended target, "
            "the headline variant with the highest AUC lower bound on the undefended target, the surest leak a "
            "defense has to reduce) with its AUC and the TPR at the reference threshold of the lowest non-zero FPR "
            "level the reference set resolves (tpr_fpr in the CSV), with 95% intervals (AUC: score interval; TPR: "
            "Clopper–Pearson); Δ leakage: ΔAUC over the same evaluation "
            "candidates with the paired stratified bootstrap interval of defense_effect (the same numbers): lower / "
            "higher when it excludes 0, else no detectable change.",
            "canaries: out-of-vocabulary e-mail canaries recovered / planted over all canary seeds (audit."
            "canary_targets), with the one-sided Fisher p against the undefended target; NEL/run: NELstrict entities "
            "(e-mail addresses and person names new to the query) per distinct extraction leakage run, as the leakage "
            "dashboard counts them, and its difference from the undefended target (too few runs for an interval: "
            "descriptive).",
            "copied verbatim (where adaptive extraction campaigns ran on the targets: campaigns.targets, table "
            "coverage): the share of the knowledge base that the campaign of the attack which copied most on the "
            "undefended target (copy_variant, by the lower end of its interval; no random baseline) reproduced "
            "verbatim within its query budget, mean over the seeds [95%: as in the coverage table]; Δ: defended − "
            "undefended, the wider of Welch's t over the seeds and the MOVER combination of the pooled counts' "
            "Clopper–Pearson intervals; copied_change: lower / higher when that interval excludes 0, else no "
            "detectable change.",
            "Pareto: per dataset, undefended target and measure, a target is on the front when no other target of the "
            "group has at least its utility and at most its AUC, one of them strictly (the undefended target "
            "included: deploying no defense is an option). Point estimates: a front decided by differences that read "
            "'no detectable change' is not a finding at this n.",
            *_UTILITY_NOTES,
        ),
        inputs=_privacy_utility_inputs,
        analysis=utility_analysis.run_privacy_utility,
        build=read_analysis,
        markdown=utility_tables.privacy_utility_markdown,
        figures=(
            Figure(
                "privacy_utility",
                "results/figures/privacy_utility.png",
                "report/privacy_utility.rst",
                lazy_plot("plot_privacy_utility"),
            ),
        ),
        config_keys=(
            "targets",
            "utility.seed",
            "utility.headline_variant",
            "utility.headline_metric",
            "metrics.n_boot",
            "seed",
        ),
    ),
)
