# ragmi: membership inference against retrieval-augmented generation.
#   snakemake --cores all                                # embedded default (config/config.yaml)
#   snakemake --cores 2 results/tables/rag_mia.md        # one table
#   snakemake -n --profile profiles/slurm                # SLURM dry run
from snakemake.utils import min_version

min_version("9.0")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/stores.smk"
include: "rules/corpus.smk"
include: "rules/index.smk"
include: "rules/generate.smk"
include: "rules/score.smk"
include: "rules/audit.smk"
include: "rules/utility.smk"
include: "rules/epsilon.smk"
include: "rules/campaigns.smk"
include: "rules/tables.smk"
include: "rules/gate.smk"
include: "rules/results.smk"


# On a cluster (profiles/slurm) the light steps run inside the Snakemake process instead of as jobs of
# their own: each takes seconds, where a job costs a queue wait, two Snakemake start-ups and a
# scheduler round trip (and a Hub download runs where the network is).  No effect on a local run.
localrules:
    corpus,
    split,
    split_candidates,
    null_database,
    queries,
    metrics,
    table,
    attack_figures,
    roc_all_attacks,
    leakage,
    utility_score,


workflow.localrules(*(f"figure_{f.name}" for t in TABLES.values() for f in t.figures))

# Priorities (local runs): the jobs that talk to the vLLM server take all of generation.threads, so they
# run one at a time; priority >= 1 runs them back to back, with the jobs they need (corpus, split,
# index), and the one-core jobs after them (score, metrics, tables, figures, leakage) wait and then run
# side by side instead of one at a time between two model jobs. prepare and queries (priority 2) come
# first, so that every generate job is known before the one-core jobs start: Snakemake starts a
# two-core job only when both cores are free, and a stream of one-core jobs would keep it waiting.
# prepare_model (priority 3) starts first of all: it also starts the server (generation.start_server_early).


# A failed run removes every membership game it left in a store (docs/vector-stores.md); after a
# SIGKILL, when this cannot run: python -m ragmi store-cleanup --results results
onerror:
    if config["stores"]:
        from ragmi.stores.cli import main as store_cleanup

        store_cleanup(["--results", "results"])


# The end of a run: the verdicts in a few lines and where to read on (ragmi.report.run_summary; also
# `python -m ragmi summary`). Printed when this run's DAG has the summary table; never fails the run.
onsuccess:
    try:
        from ragmi.report.run_summary import end_of_run

        end_of_run("results", built=[str(f) for job in workflow.dag.jobs for f in job.output])
    except Exception as e:
        print(f"ragmi: no end-of-run summary ({type(e).__name__}: {e})")


rule all:
    input:
        final_outputs(),
    default_target: True
