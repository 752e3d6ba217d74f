"""The tables over attack metrics: does each attack leak membership, and how do the attacks compare?

Declared here, in the order the registry lists them (:data:`TABLES`), each with its title and its notes
(printed under the Markdown table; the notes are the documentation of the table's columns):

* ``summary``: the headline table, one row per dataset × target × attack headline variant with a verdict
  (:mod:`ragmi.report.summary` builds and renders it);
* ``attack_comparison``: every attack's headline variant beside the papers' published numbers;
* ``rag_mia``: RAG-MIA's black- and gray-box variants with their parse rates;
* ``dcmi_ablation``: DCMI's calibration, θ and γ sweeps (DCMI Fig. 9), and its figure;
* ``query_budget``: IA against MEntA as the number of questions per candidate grows, and its figure;
* ``framework_comparison``: every attack on every RAG framework of the undefended targets (DCMI Tables 4
  and 10), built when one of them is not Standard RAG.

The frames come from :mod:`ragmi.report.comparison` and :mod:`ragmi.report.summary`.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..analysis import summary as summary_analysis
from ..analysis.readers import read_csvs
from ..plan import is_plain, runs
from . import summary
from .comparison import (
    FRAMEWORK_DISPLAY,
    ablation_frame,
    attach_controls,
    comparison_frame,
    framework_frame,
    load_published,
    query_budget_frame,
    target_defenses,
    target_frameworks,
)
from .declare import Figure, Files, MetricsOf, Table, lazy_plot, read_analysis
from .tables import plain_markdown


def _comparison(files: Files, config: Mapping) -> pd.DataFrame:
    df = comparison_frame(
        read_csvs(files["metrics"]),
        load_published(files["published"][0]),
        target_defenses(config),
        target_frameworks(config),
    )
    df = df.fillna({"published": "", "note": ""})
    return attach_controls(df, config["targets"])


def _rag_mia(files: Files, config: Mapping) -> pd.DataFrame:
    return _comparison(files, config).drop(columns="note")


def _dcmi_ablation(files: Files, config: Mapping) -> pd.DataFrame:
    return ablation_frame(read_csvs(files["metrics"]), "dcmi")


def _query_budget(files: Files, config: Mapping) -> pd.DataFrame:
    return query_budget_frame(read_csvs(files["metrics"]))


def framework_targets(config: Mapping) -> list[str]:
    """The undefended, non-control targets, when one of them has a framework other than standard
    (otherwise there is nothing to compare and the table is not built)."""
    targets = config["targets"]
    plain = [t for t, c in sorted(targets.items()) if is_plain(c)]
    return plain if any(targets[t]["framework"] != "standard" for t in plain) else []


def _framework_inputs(config: Mapping) -> dict[str, list[str]]:
    chosen = set(framework_targets(config))
    return {"metrics": [f"results/metrics/{d}/{t}/{a}.csv" for d, t, a in runs(config) if t in chosen]}


def _framework_comparison(files: Files, config: Mapping) -> pd.DataFrame:
    return framework_frame(
        read_csvs(files["metrics"]),
        load_published(files["published"][0]),
        target_frameworks(config),
        config["targets"],
    )


def _framework_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    return plain_markdown(df[list(FRAMEWORK_DISPLAY)], title, notes)


TABLES: tuple[Table, ...] = (
    Table(  # first: the table a reader opens first
        name="summary",
        title="Summary: does each attack leak membership on each target?",
        notes=(
            "One row per dataset × target × attack headline variant, for every target that is not a negative "
            "control, undefended targets first; a defended target's defenses in brackets. n eval = evaluation "
            "members/non-members; AUC with its 95% score interval (auc, auc_lo, auc_hi in the CSV).",
            "Two TPR figures: TPR@x%FPR (eval ROC) is read from the evaluation ROC at the lowest configured "
            "non-zero level x its non-members resolve (x·n ≥ 1; roc_tpr, roc_tpr_fpr in the CSV); the TPR at the "
            "reference threshold is the operational one, at the threshold chosen on the reference non-members for "
            "x% FPR (tpr, tpr_fpr), with the FPR it realised on the evaluation non-members (fpr_realized).",
            "Costs per candidate: queries sent to the target and tokens of those queries (prompt + output; the CSV "
            "has both parts).",
            "verdict: leaks = the AUC interval lies above 0.5; inverted = below 0.5 (the score ranks non-members "
            "higher); no evidence at this n = it contains 0.5; uninformative = the attack gave every evaluation "
            "candidate the same score or read no answer (uninformative_reason in the CSV); control failed = an "
            "informative negative control of the same dataset and variant (null database <base>--null-db, no "
            "retrieval <base>--no-retrieval, <base> the target or its undefended counterpart) rejects AUC = 0.5 "
            "family-wise (two-sided Mann–Whitney p, Holm-adjusted over every informative control of the run, below "
            "0.05), so the attack separates candidates by something other than membership of the database (the "
            "control applies the base target's fitted attack to the control's answers; the CSV's controls, "
            "controls_from and verdict_detail say which; a control excluding 0.5 per test but not after Holm is "
            "named in the detail); not computed = a skipped variant.",
            "verdict_holm (CSV; in the verdict cell of a leaking row): the cells read together, leaks when the "
            "one-sided Mann–Whitney p of AUC > 0.5 (auc_p_greater), Holm-adjusted over every informative computed "
            "cell of the run (auc_p_greater_holm), is below 0.05.",
        ),
        inputs=MetricsOf(),
        analysis=summary_analysis.run,
        build=read_analysis,
        markdown=summary.summary_markdown,
        config_keys=("targets",),
    ),
    Table(
        name="attack_comparison",
        title="Attack comparison: every attack on every dataset × target",
        notes=(
            "One row per attack's headline variant; sweeps and ablations are in dcmi_ablation and query_budget.",
            "menta/similarity is MEntA's similarity ablation (cosine ≥ 0.7 with the embedder), not its NLI "
            "entailment scorer: no NLI model installs offline here; menta/nli appears when configured.",
            "published = the paper's number for the same dataset source, generator model, variant and defense "
            "(config/published.yaml), each printed as '<metric>: paper <value>, ours <value [CI]>' beside the same "
            "metric of ours, with the paper's caveat where it left the setting open; numbers that are not the "
            "quantity ragmi computes (RAG-MIA's black-box AUC) are not shown (docs/provenance.md#published). "
            "A published TPR@x%FPR is shown beside ours read from the evaluation ROC ('eval ROC', n/e at 0%) and "
            "beside our TPR at the reference threshold for x% with the FPR it realised on the evaluation "
            "non-members (interval, n); a rule TPR beside the rule's FPR. "
            "note = where the numbers show the attack carries no information in this setting.",
            "Control columns (null-db / k=0 control AUC, in the CSV): the AUC of the row's negative control; "
            "'uninformative' for a control "
            "whose scores cannot tell candidates apart (constant scores, no answer read): it cannot fail, so it is "
            "never flagged and is no pass either; an informative control whose AUC interval excludes 0.5 is "
            "flagged in note.",
            "Costs are per candidate document: queries sent to the target, prompt and output tokens of those "
            "queries, and attacker-LLM tokens spent once in offline query generation.",
        ),
        inputs=MetricsOf(),
        build=_comparison,
        extra_columns=("published", "note"),
        published=True,
        config_keys=("targets", "defenses"),
    ),
    Table(
        name="rag_mia",
        title="RAG-MIA (Anderson et al.): black- and gray-box membership inference",
        notes=(
            "black = Yes/No parsed from the answer text: its decision rule gives the Rule TPR / Rule FPR columns, "
            "the paper's 'Black-Box TPR / FPR' (Table 2), and its AUC is the single-point AUC (1 + TPR − FPR) / 2; "
            "gray = ensemble of attack models on the Yes/No logits at the first generated Yes/No token (RAG-MIA §3), trained on the reference "
            "set and cross-fitted (every document scored by the one fold ensemble trained without its fold), "
            "its rule the ensemble's predicted class (mean probability "
            "> 0.5); gray-pyes = P(Yes)/(P(Yes)+P(No)) without training and without a rule.",
            "no_answer_rate = share of evaluation answers with neither Yes nor No (counted as non-member, RAG-MIA "
            "Appendix C); no_yes_no_rate = share of evaluation answers in which no generated token reads Yes or No "
            "(gray box: P(Yes) read at the floor of token 0; elsewhere P(Yes) is read at the first generated Yes/No "
            "token, as DCMI's code reads it, not at an earlier position whose top-K merely lists one); candidate_retrieved_rate = share of member candidates whose own document was "
            "retrieved (RAG-MIA Appendix B).",
        ),
        inputs=MetricsOf(frozenset({"rag_mia"})),
        build=_rag_mia,
        extra_columns=("published",),
        published=True,
        config_keys=("targets", "defenses"),
    ),
    Table(
        name="dcmi_ablation",
        title="DCMI ablation (DCMI Fig. 9): with/without calibration, θ sweep, γ sweep",
        notes=(
            "calibration: dcmi/adv1 (calibrated, θ and γ chosen on the reference set, in-fold), dcmi/adv2 "
            "(θ = 0.06, threshold = Q3 of reference non-members, in-fold) and dcmi/calibration=none (P(Yes) of "
            "the original query).",
            "theta=…: calibrated score at that perturbation magnitude; its decision C > γ uses the γ chosen on "
            "the reference set, in-fold (each document decided by the choice made on the other folds' reference "
            "documents). gamma=…: calibrated score at θ = 0.06 with the decision C > γ: Accuracy (decision "
            "rule) and Rule TPR / FPR are that decision's (DCMI Fig. 9c); AUC and the best-threshold accuracy do "
            "not depend on γ.",
        ),
        inputs=MetricsOf(frozenset({"dcmi"})),
        build=_dcmi_ablation,
        figures=(
            Figure(
                "dcmi_sweep", "results/figures/dcmi_sweep.png", "report/dcmi_sweep.rst", lazy_plot("plot_dcmi_sweep")
            ),
        ),
    ),
    Table(
        name="query_budget",
        title="Query budget: IA vs MEntA as the number of questions per candidate grows",
        notes=(
            "n_questions = the first n questions asked per candidate (the same questions at every budget); "
            "queries/candidate and tokens/candidate are the cost of that budget.",
        ),
        inputs=MetricsOf(frozenset({"ia", "menta"})),
        build=_query_budget,
        figures=(
            Figure(
                "query_budget", "results/figures/query_budget.png", "report/budget.rst", lazy_plot("plot_query_budget")
            ),
        ),
    ),
    Table(
        name="framework_comparison",
        title="RAG frameworks (DCMI Tables 4 and 10): every attack on every framework of the undefended targets",
        notes=(
            "One row per dataset × attack headline variant × framework (DCMI's order: Standard RAG, LongLLMLingua, "
            "Selective-Context, Spring, IRCoT), for the targets without defenses that are not negative controls; "
            "built when one of them has a framework other than standard.",
            "AUC and accuracy (the variant's own decision rule) on the evaluation set with 95% intervals (AUC: score "
            "interval of the Mann–Whitney statistic; accuracy: Clopper–Pearson); n eval = members/non-members.",
            "published AUC / accuracy: DCMI Table 10 / Table 4 (Adversary 3: dcmi/adv3 and RAG-MIA's black box) for "
            "the same dataset source, generator model (DCMI Table 8: LLMLingua with GPT-3.5-turbo, IRCoT with "
            "Flan-T5-Large, the others with Llama-2-7B-chat), variant and framework (config/published.yaml).",
            "Costs per candidate (queries, prompt and output tokens, IRCoT's extra generations included) are in the "
            "CSV and in attack_comparison.",
        ),
        inputs=_framework_inputs,
        build=_framework_comparison,
        published=True,
        markdown=_framework_markdown,
        config_keys=("targets",),
    ),
)
