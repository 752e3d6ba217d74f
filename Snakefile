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


rule all:
    input:
        final_outputs(),
    default_target: True
