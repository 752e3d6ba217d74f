"""Rule canaries: one seed of the out-of-vocabulary e-mail canary experiment against one target."""

import pandas as pd

from ragmi.audit.canary_run import run_canary
from ragmi.io import write_json
from ragmi.workflow import run_step, target_spec


def main(smk, log):
    corpus = pd.read_parquet(smk.input.corpus)
    spec = target_spec(smk, index_dir="")
    seed = int(smk.wildcards.seed)
    res = run_canary(spec, corpus, seed, int(smk.params.max_tokens), smk.params.workdir, log)
    log(
        f"seed {seed}: {res['n_leaked']}/{res['n_canaries']} canaries recovered "
        f"({res['n_leaked_raw']} before the output hooks, {res['n_refused']} queries refused)"
    )
    write_json(res, smk.output.result)


run_step(snakemake, main)  # noqa: F821
