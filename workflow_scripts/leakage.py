"""Rule leakage: NELstrict counts and verbatim reproduction per extraction run of one target
(the evaluator's side: it reads retrieved ids and database texts, which attacks never see)."""

import pandas as pd

from ragmi.audit.leakage import run_leakage
from ragmi.io import atomic_write_text
from ragmi.workflow import read_responses, run_step


def main(smk, log):
    queries = pd.read_parquet(smk.input.queries)
    responses = read_responses(smk.input.responses)
    members = pd.read_parquet(smk.input.members)
    runs = run_leakage(queries, responses, dict(zip(members["doc_id"], members["text"])))
    runs.insert(0, "target", smk.wildcards.target)
    runs.insert(0, "dataset", smk.wildcards.dataset)
    atomic_write_text(runs.to_csv(index=False, lineterminator="\n"), smk.output.leakage)
    for _, r in runs.iterrows():
        log(
            f"{r['run']}: strict NEL {r['strict']} (e-mail {r['EMAIL_REAL']}, names {r['PERSON_NAME']}) over "
            f"{r['n_queries']} queries; {100 * r['reproduced_fraction']:.0f}% of retrieved documents reproduced"
        )


run_step(snakemake, main)  # noqa: F821
