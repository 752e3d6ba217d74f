# ragmi: membership inference against retrieval-augmented generation.
#   snakemake --cores all                                # embedded default (config/config.yaml)
#   snakemake --cores 2 results/tables/rag_mia.md        # one table
#   snakemake -n --profile profiles/slurm                # SLURM dry run
from snakemake.utils import min_version

min_version("9.0")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/corpus.smk"
include: "rules/index.smk"
include: "rules/generate.smk"
include: "rules/score.smk"
include: "rules/audit.smk"
include: "rules/tables.smk"


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


workflow.localrules(*(f"figure_{f.name}" for t in TABLES.values() for f in t.figures))


rule all:
    input:
        final_outputs(),
    default_target: True
