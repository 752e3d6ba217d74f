"""Every table the pipeline writes, declared once.

A :class:`Table` says what the table is called, its title and notes, which files it reads (a
function of the validated config), how its frame is built from those files, which columns the
Markdown version adds after the metric and cost columns, whether it is compared with published
numbers, and which figures are drawn from the same frame.  The Snakemake rules
(``rules/tables.smk``: one rule ``table`` with a ``{table}`` wildcard, one ``figure_<name>`` rule per
declared figure), the default targets (``final_outputs()`` in ``rules/common.smk``) and
``workflow_scripts/table.py`` all read :data:`TABLES`; nothing else names a table.

Adding a table: write its frame builder (``(files, config) -> DataFrame``, where ``files`` maps each input
name to its list of paths), append a :class:`Table` to :data:`TABLES` with the ``config_keys`` the builder
reads (it is given those only, and the table reruns when one of them changes), and say what it shows in
``report/tables.rst`` if needed.  ``inputs`` may return any named lists of files, e.g.
``{"audit": [...], "metrics": [...]}``; the table is built when every list is non-empty.
For tables over attack metrics, :class:`MetricsOf` gives the metrics CSVs of the configured attacks
the table reads; a table whose frame has no metric columns sets ``markdown`` to its own renderer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..attacks import attack_channels
from ..audit import detection as audit_detection
from ..audit import plan as audit_plan
from ..audit.inventory import NOT_LIVE, effective_channels_of
from ..config import SCHEMA_PATH, is_plain, is_remote, runs
from ..costs import COST_COLUMNS
from ..errors import ConfigError
from ..io import atomic_write_text
from ..utility import plan as utility_plan
from . import audit_tables, summary, utility_tables
from .comparison import (
    CONTROL_COLUMNS,
    FRAMEWORK_DISPLAY,
    ablation_frame,
    attach_controls,
    audit_published,
    comparison_frame,
    framework_frame,
    is_main_variant,
    load_published,
    published_cell,
    query_budget_frame,
    target_defenses,
    target_frameworks,
)
from .tables import markdown_table


def _plot(name: str) -> Callable[[pd.DataFrame, str, str], None]:
    """ragmi.report.plots.<name>, imported when a figure is drawn: matplotlib and the metrics it pulls in
    cost the Snakefile, which imports this registry, about 0.7 s at every start."""

    def draw(frame: pd.DataFrame, out_png: str, title: str) -> None:
        from . import plots

        getattr(plots, name)(frame, out_png, title)

    draw.__name__ = draw.__qualname__ = name
    return draw


# Published numbers of the papers (see the file's header), read by tables with published=True.
PUBLISHED = str(SCHEMA_PATH.parent / "published.yaml")

Files = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Figure:
    """A figure drawn from a table's frame by ``draw(frame, out_png, table_title)``."""

    name: str  # the rule is figure_<name>
    path: str  # output file
    caption: str  # report caption (reStructuredText), relative to the repository root
    draw: Callable[[pd.DataFrame, str, str], None]


@dataclass(frozen=True)
class Table:
    """One table: ``results/tables/<name>.csv`` (every column) and ``.md`` (see ``write_tables``).

    ``inputs(config)`` names the files the table reads under a validated config; ``build(files,
    config)`` turns them into the table's frame.  ``markdown(frame, title, extra_columns=..., notes=...)``
    renders the Markdown text; the default, :func:`~ragmi.report.tables.markdown_table`, shows the
    metric columns, the cost columns of :data:`ragmi.costs.COST_COLUMNS` the frame has, then
    ``extra_columns``, and the protocol footnote before the table's notes.
    ``published``: the table compares with the papers' numbers; :data:`PUBLISHED` is added to its
    inputs under the name ``published``.
    ``config_keys``: the parts of the config ``build`` reads, top-level keys or dotted paths
    (``"audit.n_boot"``); ``build`` receives only those (:func:`table_config`), and so does the rule, whose
    params they are, so a table reruns when one of them changes and not when another key does.
    """

    name: str
    title: str
    notes: tuple[str, ...]
    inputs: Callable[[Mapping], dict[str, list[str]]]
    build: Callable[[Files, Mapping], pd.DataFrame]
    extra_columns: tuple[str, ...] = ()
    published: bool = False
    figures: tuple[Figure, ...] = ()
    markdown: Callable[..., str] = markdown_table
    config_keys: tuple[str, ...] = ()

    def figure(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"table {self.name!r} declares no figure {name!r}")


@dataclass(frozen=True)
class MetricsOf:
    """Inputs of a table over attack metrics: ``results/metrics/{dataset}/{target}/{attack}.csv``
    for every (dataset, target, attack) the configuration runs (``ragmi.config.runs``) whose attack is
    in ``attacks`` (every attack when ``attacks`` is None), in the order dataset, target, attack."""

    attacks: frozenset[str] | None = None

    def __call__(self, config: Mapping) -> dict[str, list[str]]:
        return {
            "metrics": [
                f"results/metrics/{d}/{t}/{a}.csv"
                for d, t, a in runs(config)
                if self.attacks is None or a in self.attacks
            ]
        }

    def __str__(self) -> str:
        if self.attacks is None:
            return "the metrics of every configured attack"
        return f"the metrics of attack {' or '.join(sorted(self.attacks))}"


def read_metrics(paths: Sequence[str]) -> pd.DataFrame:
    """The metrics CSVs of ``paths``, one frame, in the order given."""
    return pd.concat([pd.read_csv(f) for f in paths], ignore_index=True)


def _comparison(files: Files, config: Mapping) -> pd.DataFrame:
    df = comparison_frame(
        read_metrics(files["metrics"]),
        load_published(files["published"][0]),
        target_defenses(config),
        target_frameworks(config),
    )
    df = df.fillna({"published": "", "note": ""})
    return attach_controls(df, config["targets"])


def _rag_mia(files: Files, config: Mapping) -> pd.DataFrame:
    return _comparison(files, config).drop(columns="note")


def _dcmi_ablation(files: Files, config: Mapping) -> pd.DataFrame:
    return ablation_frame(read_metrics(files["metrics"]), "dcmi")


def _query_budget(files: Files, config: Mapping) -> pd.DataFrame:
    return query_budget_frame(read_metrics(files["metrics"]))


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
        read_metrics(files["metrics"]),
        load_published(files["published"][0]),
        target_frameworks(config),
        config["targets"],
    )


def _framework_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    return audit_tables.plain_markdown(df[list(FRAMEWORK_DISPLAY)], title, notes)


def _summary(files: Files, config: Mapping) -> pd.DataFrame:
    return summary.summary_frame(read_metrics(files["metrics"]), config["targets"])


_TABLES = [
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
            "retrieval <base>--no-retrieval, <base> the target or its undefended counterpart) has an AUC interval "
            "excluding 0.5, so the attack separates candidates by something other than membership of the database "
            "(the control applies the base target's fitted attack to the control's answers; the CSV's controls, "
            "controls_from and verdict_detail say which); not computed = a skipped variant.",
        ),
        inputs=MetricsOf(),
        build=_summary,
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
            "note = where the numbers show the attack carries no information in this setting.",
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
            "set with out-of-fold reference scores, its rule the ensemble's predicted class (mean probability "
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
            "calibration: dcmi/adv1 (calibrated, θ and γ chosen on the reference set), dcmi/adv2 (θ = 0.06, "
            "threshold = Q3 of reference non-members) and dcmi/calibration=none (P(Yes) of the original query).",
            "theta=…: calibrated score at that perturbation magnitude; its decision C > γ uses the γ chosen on "
            "the reference set. gamma=…: calibrated score at θ = 0.06 with the decision C > γ: Accuracy (decision "
            "rule) and Rule TPR / FPR are that decision's (DCMI Fig. 9c); AUC and the best-threshold accuracy do "
            "not depend on γ.",
        ),
        inputs=MetricsOf(frozenset({"dcmi"})),
        build=_dcmi_ablation,
        figures=(
            Figure("dcmi_sweep", "results/figures/dcmi_sweep.png", "report/dcmi_sweep.rst", _plot("plot_dcmi_sweep")),
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
            Figure("query_budget", "results/figures/query_budget.png", "report/budget.rst", _plot("plot_query_budget")),
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
]


def _read_csvs(paths: Sequence[str]) -> pd.DataFrame:
    return pd.concat([pd.read_csv(f) for f in paths], ignore_index=True)


def _defense_statuses(hooks: pd.DataFrame) -> dict:
    """{target: "defense: status; …"} from the hook inventory rows."""
    out: dict = {}
    for (target, defense), g in hooks.groupby(["target", "defense"], sort=True):
        out.setdefault(target, []).append(f"{defense}: {g['defense_status'].iloc[0]}")
    return {t: "; ".join(v) for t, v in out.items()}


def _with_audit_published(df: pd.DataFrame, files: Files, config: Mapping, table: str) -> pd.DataFrame:
    published, defenses = load_published(files["published"][0]), target_defenses(config)
    df["published"] = [audit_published(published, table, defenses.get(t, ())) for t in df["target"]]
    return df


def _hook_inventory(files: Files, config: Mapping) -> pd.DataFrame:
    df = audit_tables.hook_inventory_frame(_read_csvs(files["hooks"]))
    published = load_published(files["published"][0])  # per row: that defense's kind
    df["published"] = [audit_published(published, "hook_inventory", [(k, {})]) for k in df["kind"]]
    return df


def _leakage_dashboard(files: Files, config: Mapping) -> pd.DataFrame:
    mi = read_metrics(files["metrics"])
    mi = mi[mi["variant"].map(is_main_variant)].groupby(["dataset", "target"], sort=True).head(1)
    df = audit_tables.leakage_dashboard_frame(
        _read_csvs(files["leakage"]),
        mi,
        _defense_statuses(_read_csvs(files["hooks"])),
        audit_tables.baseline_targets(config["targets"]),
        n_boot=config["audit"]["n_boot"],
        seed=config["seed"],
        entangled=scorer_entanglement(config),
        pools=audit_tables.target_pools(config["targets"], config["defenses"]),
    )
    df["published"] = audit_tables.dashboard_published(df, load_published(files["published"][0]))
    return df


def scorer_entanglement(config: Mapping) -> dict:
    """{target: {NELstrict column: vocabulary strings}}: the columns whose reduction under the target's
    defenses the scorer's own rules would produce (``ragmi.nel.entangled_columns`` of each
    defense's declared vocabulary)."""
    from ..defenses import build_defense
    from ..nel import entangled_columns

    out = {}
    for t, c in config["targets"].items():
        vocab = [v for d in c["defenses"] for v in build_defense(d, config["defenses"][d]).vocabulary]
        ent = entangled_columns(vocab)
        if ent:
            out[t] = ent
    return out


def _canaries(files: Files, config: Mapping) -> pd.DataFrame:
    rows = [json.loads(Path(f).read_text()) for f in files["canaries"]]
    df = audit_tables.canaries_frame(pd.DataFrame(rows), audit_tables.baseline_targets(config["targets"]))
    return _with_audit_published(df, files, config, "canaries")


def read_scores(score_paths: Sequence[str], candidate_paths: Sequence[str]) -> dict:
    """{(dataset, target, attack): scores frame with doc_id, variant, score, label, role} from
    ``results/scores/{dataset}/{target}/{attack}.parquet`` and ``results/split/{dataset}/candidates.parquet``
    (the path's last parts name them).  The skipped-variant rows (score NaN) are dropped; labels and
    roles come from the candidates when the scores frame lacks them."""
    from ..attacks.base import split_skipped

    candidates = {Path(p).parent.name: p for p in candidate_paths}
    cache: dict = {}
    out = {}
    for p in score_paths:
        parts = Path(p).parts
        dataset, target, attack = parts[-3], parts[-2], Path(p).stem
        df, _ = split_skipped(pd.read_parquet(p))
        df = df[df["score"].notna()]
        if not {"label", "role"} <= set(df.columns):
            if dataset not in cache:
                cache[dataset] = pd.read_parquet(candidates[dataset], columns=["doc_id", "label", "role"])
            df = df.drop(columns=[c for c in ("label", "role") if c in df]).merge(
                cache[dataset], on="doc_id", how="inner", validate="many_to_one"
            )
        out[(dataset, target, attack)] = df
    return out


def _defense_effect_pairs(config: Mapping) -> set:
    """The defended targets and their undefended targets: the targets whose scores the table reads."""
    base = audit_tables.baseline_targets(config["targets"])
    defended = {t for t, c in config["targets"].items() if c["defenses"]}
    return defended | {base[t] for t in defended if base.get(t)}


def _defense_effect_inputs(config: Mapping) -> dict[str, list[str]]:
    if not audit_plan.audited(config):
        return {"metrics": [], "hooks": [], "scores": [], "candidates": []}
    chosen = _defense_effect_pairs(config)
    pairs = [(d, t, a) for d, t, a in runs(config) if t in chosen]
    return {
        "metrics": audit_plan.metrics_files(config),
        "hooks": audit_plan.hooks_files(config),
        "scores": [f"results/scores/{d}/{t}/{a}.parquet" for d, t, a in pairs],
        "candidates": [f"results/split/{d}/candidates.parquet" for d in sorted({d for d, _, _ in pairs})],
    }


def _defense_effect(files: Files, config: Mapping) -> pd.DataFrame:
    hooks = _read_csvs(files["hooks"])
    channels = {}
    for (target, defense), g in hooks.groupby(["target", "defense"], sort=True):
        active = g.loc[~g["status"].isin(NOT_LIVE), "hook"].tolist()  # scores-only / untested hooks reach nothing
        channels[(target, defense)] = effective_channels_of(g["logprobs"].iloc[0], active)
    metrics = read_metrics(files["metrics"])
    controls = [t for t, c in config["targets"].items() if c["control"] != "none"]
    df = audit_tables.defense_effect_frame(
        metrics[~metrics["target"].isin(controls)],
        {t: c["defenses"] for t, c in config["targets"].items()},
        channels,
        attack_channels,
        audit_tables.baseline_targets(config["targets"]),
        scores=read_scores(files.get("scores", ()), files.get("candidates", ())),
        n_boot=int(config["metrics"]["n_boot"]),
        seed=int(config["seed"]),
    )
    published, defenses = load_published(files["published"][0]), target_defenses(config)
    frameworks = target_frameworks(config)
    df["published"] = [
        published_cell(r, published, defenses.get(r["target"], ()), frameworks.get(r["target"], "standard"))
        for _, r in df.iterrows()
    ]
    return df


_TABLES += [
    Table(
        name="hook_inventory",
        title="Hook inventory (Mind the Hook Table I): which hooks each defense really acts on",
        notes=(
            "A hook's fire rate is the share of queries whose hook output differs from its input: on generic "
            "probes built to trigger it (verbatim members, yes/no and extraction prompts, retrieved documents and "
            "answers carrying an e-mail address, a phone number, an identifier and a person name) and on the "
            "attack queries of this run.",
            "active: fires on ≥ 95% of the attack queries (of the probes for a target that runs no attack; a randomised defense as soon as it fires at all); "
            "pattern-limited: fires, on fewer; inactive: never fires — the run stops on an inactive hook "
            "unless audit.fail_on_inactive_hook is false.",
            "status: end-to-end = an active pre-generation hook and an active output hook; retrieval-only = "
            "active hooks before generation only (query, retrieval, content or template); prompt-only = the "
            "template hook alone; output-only; "
            "pattern-limited = its only active hooks are pattern-limited; inactive.",
        ),
        inputs=lambda cfg: {"hooks": audit_plan.hooks_files(cfg)},
        build=_hook_inventory,
        markdown=audit_tables.plain_table,
        published=True,
    ),
    Table(
        name="leakage_dashboard",
        title="Leakage dashboard (Mind the Hook Table II): generated-text leakage and MI, pooled per defense kind and per target",
        notes=(
            "Two blocks. pooled: one row per defense kind (ε variants of one kind, every dataset and every "
            "extraction prompt pooled, as Mind the Hook §V pools its runs per defense; none = the undefended "
            "targets); the published values (Mind the Hook Table II, pooled) are compared on these rows only. "
            "per target: one row per (dataset, target), the pool it belongs to named.",
            "runs (distinct): the n of the row's bootstrap — its runs after runs with identical outputs "
            "(outputs_digest; e.g. ε variants of a non-DP defense under greedy decoding) are collapsed; "
            "runs (raw): before collapsing.",
            "NEL/run: NELstrict entities (EMAIL_REAL, PERSON_NAME) in the answers of one extraction run, i.e. one "
            "extraction prompt over every candidate; an entity already in the attacker's query is not counted. "
            "Brackets: 95% run-level bootstrap interval (the run is the resampling unit; runs with identical "
            "outputs counted once), to read descriptively.",
            "Δ e-mails/run, Δ names/run (Email change, Name change in the CSV): the change of the mean count per run, "
            "defended − undefended, with the relative change, signed as it goes: '−23 e-mails/run (−100%)' is 23 "
            "fewer e-mail addresses per run, all of them (a minus sign = less leakage); against the undefended "
            "target with the same retriever, generator, k and template; on a pooled row, against the undefended runs of the same cells "
            "(each defended run's dataset and extraction prompt on its target's undefended counterpart; "
            "'over m matched runs' where only m of the pool's runs have one); n/a (scorer-entangled) where the target's defenses write strings "
            "NELstrict can only score as placeholders or ambiguous (LPRAG's fixed one-word names and example.* "
            "domains: ragmi.nel.entangled_columns), so the reduction would come from the scoring rules, not "
            "from the defense (Mind the Hook Table II, n/a (SE)); the canaries table validates the e-mail channel "
            "out of the scorer's path.",
            "verbatim reproduced: share of the retrieved documents an answer reproduces (longest common "
            "substring ≥ 50 characters or ROUGE-L recall ≥ 0.5), averaged over runs.",
            "MI AUC: the headline variant of audit.mi_attack on the same target (evaluation set, stratified "
            "bootstrap CI); a pooled row gives the range over its targets' AUCs, which are not pooled.",
            "published (under All columns): Mind the Hook's own cells, in the paper's convention, where a reduction "
            "is positive ('email +100.0%' is every e-mail removed), the opposite sign of the Δ columns.",
        ),
        inputs=lambda cfg: {
            "leakage": audit_plan.leakage_files(cfg),
            "hooks": audit_plan.hooks_files(cfg),
            "metrics": audit_plan.mi_metrics_files(cfg),
        },
        build=_leakage_dashboard,
        markdown=audit_tables.dashboard_markdown,
        published=True,
        config_keys=("targets", "defenses", "audit.n_boot", "seed"),
    ),
    Table(
        name="canaries",
        title="Out-of-vocabulary e-mail canaries (Mind the Hook Table III): exact-match recovery",
        notes=(
            "Each seed: a 50-document knowledge base with one operator_N@acmetest-internal.canary address per "
            "document, indexed with the target's own retriever, and a 50-query pool (10 shared extraction "
            "prompts, 40 targeted prompts that never contain the canary's prefix or domain); a canary counts "
            "when its whole address appears verbatim in an answer.",
            "before output hooks: the same count on the generator's raw text, so an output defense's effect is "
            "visible as the gap.",
            "Fisher p: one-sided exact test of the target's total against the undefended target's, treating "
            "canaries as independent (they are grouped by seed: read the per-seed pattern first).",
            "A remote target with a store: one seed (the first of audit.canary_seeds), its knowledge base planted "
            "in the service's own collection by the membership game and the query pool sent to the service; its "
            "before-output-hooks count is the service's answer (docs/vector-stores.md).",
        ),
        inputs=lambda cfg: {"canaries": audit_plan.canary_files(cfg)},
        build=_canaries,
        markdown=audit_tables.plain_table,
        published=True,
        figures=(Figure("canaries", "results/figures/canaries.png", "report/canaries.rst", _plot("plot_canaries")),),
        config_keys=("targets", "defenses"),
    ),
    Table(
        name="defense_effect",
        title="Defense effect: every attack's headline variant on every target, against the undefended target",
        notes=(
            "effect: ΔAUC = AUC(defended) − AUC(undefended) against the undefended target with the same "
            "retriever, generator, k and template, on the evaluation candidates both scored (from the per-candidate "
            "score files), with its 95% paired stratified bootstrap interval (members and non-members resampled "
            "separately, the same resampled candidates for both targets, percentiles 2.5/97.5; delta_auc, "
            "delta_auc_lo, delta_auc_hi, n_paired_members, n_paired_nonmembers in the CSV); then ΔTPR at the lowest "
            "non-zero FPR level (point difference, delta_tpr), left out where either reference set cannot resolve "
            "that level.",
            "verdict: reduces = the ΔAUC interval lies below 0; increases = above 0; no detectable change = it "
            "contains 0; indirect = the channels the defense's active hooks can change (retrieval set, context, "
            "prompt, text, log-probabilities) and the channels the attack reads do not overlap, so a change is not "
            "an effect of the defense (ΔAUC still printed, for information); baseline = an undefended target; not "
            "compared = no undefended target, or no scores of both on the same candidates.",
        ),
        inputs=_defense_effect_inputs,
        build=_defense_effect,
        extra_columns=("defenses", "channels", "effect", "verdict", "published"),
        published=True,
        figures=(
            Figure(
                "defense_effect",
                "results/figures/defense_effect.png",
                "report/defense_effect.rst",
                _plot("plot_defense_effect"),
            ),
        ),
        config_keys=("targets", "defenses", "metrics.n_boot", "seed"),
    ),
]


def _detection(files: Files, config: Mapping) -> pd.DataFrame:
    flags = pd.concat([pd.read_parquet(f) for f in files["flags"]], ignore_index=True)
    return audit_detection.detection_frame(flags)


def _detection_markdown(df: pd.DataFrame, title: str, extra_columns=(), notes=()) -> str:
    cols = ["dataset", "target", "defense", "attack", "labelling", "n_attack", "recall [95% CI]", "n_benign"]
    return audit_tables.plain_table(df[[*cols, "FPR [95% CI]"]], title, notes=notes)


_TABLES += [
    Table(
        name="detection",
        title="Query-level detection (MEntA Tables 7-8): detector recall on attack queries, FPR on benign queries",
        notes=(
            "One row per (dataset, target, detector, attack, labelling), for every attacked target with Mirabel or "
            "the LLM detector; each query's verdict is the detector's own (the flagged entry of its hook trace), "
            "a query refused before the detector saw it has none and is left out.",
            "recall: share of the attack's queries flagged (n_attack of them: every query the attack sent this "
            "target; MEntA samples 1,000 per attack and dataset). FPR: share of the negatives flagged (n_benign): "
            "the dataset's benign queries, audit.detection_benign_queries of them (default 50; MEntA: 1,000 from "
            "the BEIR query sets), ordinary questions naming one or two topics of a corpus document, none quoting it.",
            "labelling: non-member attack queries positive = every attack query is an attack (MEntA Table 7); "
            "negative = only queries about a member are to be caught, those about a non-member count with the "
            "benign queries (Mirabel, Choi et al.); n_attack and n_benign then count the positives and negatives.",
            "Brackets: 95% Wilson score intervals, the query as the unit (an attack's queries about one candidate "
            "are not independent: read them as descriptive).",
        ),
        inputs=lambda cfg: {"flags": audit_detection.detection_files(cfg)},
        build=_detection,
        markdown=_detection_markdown,
    ),
]


def _utility_inputs(config: Mapping) -> dict[str, list[str]]:
    return {"utility": utility_plan.scores_files(config)}


def _privacy_utility_inputs(config: Mapping) -> dict[str, list[str]]:
    """The per-question utility scores of every utility run; the metrics and score files of the attacks
    run on those targets; their canaries and leakage files where the audit writes them (lists that
    would be empty are left out: the table is built whenever there are utility scores)."""
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
    return {k: v for k, v in files.items() if v}


def _remote_targets(config: Mapping) -> set:
    return {t for t, c in config["targets"].items() if is_remote(c)}


def _utility(files: Files, config: Mapping) -> pd.DataFrame:
    return utility_tables.utility_frame(
        utility_tables.read_utility_scores(files["utility"]),
        config["targets"],
        audit_tables.baseline_targets(config["targets"]),
        _remote_targets(config),
        n_boot=int(config["metrics"]["n_boot"]),
        seed=int(config["utility"]["seed"]),
    )


def _privacy_utility(files: Files, config: Mapping) -> pd.DataFrame:
    u = _utility(files, config)
    canaries = (
        pd.DataFrame([json.loads(Path(f).read_text()) for f in files["canaries"]]) if files.get("canaries") else None
    )
    return utility_tables.privacy_utility_frame(
        u,
        read_metrics(files["metrics"]) if files.get("metrics") else None,
        read_scores(files.get("scores", ()), files.get("candidates", ())),
        canaries,
        _read_csvs(files["leakage"]) if files.get("leakage") else None,
        config["utility"]["headline_variant"],
        config["utility"]["headline_metric"],
        n_boot=int(config["metrics"]["n_boot"]),
        seed=int(config["seed"]),
    )


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


_TABLES += [
    Table(
        name="utility",
        title="Utility: how well each target answers benign questions whose answers are in its database",
        notes=_UTILITY_NOTES,
        inputs=_utility_inputs,
        build=_utility,
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
            "Pareto: per dataset, undefended target and measure, a target is on the front when no other target of the "
            "group has at least its utility and at most its AUC, one of them strictly (the undefended target "
            "included: deploying no defense is an option). Point estimates: a front decided by differences that read "
            "'no detectable change' is not a finding at this n.",
            *_UTILITY_NOTES,
        ),
        inputs=_privacy_utility_inputs,
        build=_privacy_utility,
        markdown=utility_tables.privacy_utility_markdown,
        figures=(
            Figure(
                "privacy_utility",
                "results/figures/privacy_utility.png",
                "report/privacy_utility.rst",
                utility_tables.plot_privacy_utility,  # imports matplotlib when it draws
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
]

TABLES: dict[str, Table] = {t.name: t for t in _TABLES}


def built(table: Table, config: Mapping) -> bool:
    """Whether ``config`` gives the table something to read: every input list is non-empty."""
    return all(table.inputs(config).values())


def input_files(name: str, config: Mapping) -> dict[str, list[str]]:
    """The named input files of table ``name`` under ``config`` (with ``published`` if it compares)."""
    table = TABLES[name]
    files = dict(table.inputs(config))
    empty = sorted(k for k, v in files.items() if not v)
    if empty:
        what = table.inputs if isinstance(table.inputs, MetricsOf) else f"{', '.join(empty)} files"
        raise ConfigError(f"table {name!r} reads {what}; this configuration has none")
    if table.published:
        files["published"] = [PUBLISHED]
    return files


def _declared(table: Table, config: Mapping) -> dict:
    out: dict = {}
    for key in table.config_keys:
        *parents, leaf = key.split(".")
        src, dst = config, out
        for p in parents:
            if p not in src:
                break
            src, dst = src[p], dst.setdefault(p, {})
        else:
            if leaf in src:
                dst[leaf] = src[leaf]
    return out


def table_config(name: str, config: Mapping) -> dict:
    """The parts of ``config`` table ``name`` reads (its ``config_keys``), nested as in ``config``: the
    params of its rules, so that changing another key (an attack's parameters, say) reruns no table
    whose inputs did not change."""
    return _declared(TABLES[name], config)


def outputs(config: Mapping) -> list[str]:
    """Markdown tables and figures of every table ``config`` builds, in registry order."""
    out = []
    for t in TABLES.values():
        if built(t, config):
            out.append(f"results/tables/{t.name}.md")
            out += [f.path for f in t.figures]
    return out


def write_table(table: Table, files: Files, config: Mapping, out_csv: str, out_md: str) -> pd.DataFrame:
    """Build ``table``'s frame from ``files``; write it as a full-precision CSV (every column) and as
    Markdown, both atomically.  ``build`` sees only the table's ``config_keys`` of ``config``."""
    df = table.build(files, _declared(table, config))
    extra = [c for c in COST_COLUMNS if c in df] + [c for c in CONTROL_COLUMNS.values() if c in df]
    extra += list(table.extra_columns)
    md = table.markdown(df, table.title, extra_columns=extra, notes=list(table.notes))
    atomic_write_text(df.to_csv(index=False, lineterminator="\n"), out_csv)
    atomic_write_text(md, out_md)
    return df


def draw_figure(table: Table, figure: str, files: Files, config: Mapping, out_png: str) -> pd.DataFrame:
    """Draw ``table``'s figure ``figure`` from the table's frame (built from ``files`` and the table's
    ``config_keys`` of ``config``)."""
    df = table.build(files, _declared(table, config))
    table.figure(figure).draw(df, out_png, table.title)
    return df
