"""Rule canaries: one seed of the out-of-vocabulary e-mail canary experiment against one target; for a
target with a store, against the service while its collection holds the canaries the membership game
planted (rules/stores.smk)."""

import pandas as pd

from ragmi.audit.canary_run import canary_exclude, run_canary, run_canary_remote, store_canary_experiment
from ragmi.io import write_json
from ragmi.workflow import run_step, target_spec


def main(smk, log):
    corpus = pd.read_parquet(smk.input.corpus)
    spec = target_spec(smk, index_dir="")
    seed = int(smk.wildcards.seed)
    if "store_inserted" in smk.input.keys():
        exp = store_canary_experiment(corpus, canary_exclude(smk), seed, int(smk.params.max_tokens))
        log(f"seed {seed}: {len(exp.queries)} canary queries to the service of store target {spec.name}")
        res = run_canary_remote(spec, exp, log)
    else:
        res = run_canary(spec, corpus, seed, int(smk.params.max_tokens), smk.params.workdir, log)
    log(
        f"seed {seed}: {res['n_leaked']}/{res['n_canaries']} canaries recovered "
        f"({res['n_leaked_raw']} before the output hooks, {res['n_refused']} queries refused)"
    )
    write_json(res, smk.output.result)


run_step(snakemake, main)  # noqa: F821
