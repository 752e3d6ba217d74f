"""Rule store_cleanup: once every query of the target is answered, remove exactly what store_insert
inserted and check the collection is as it was (ragmi.stores.base.cleanup)."""

from ragmi.stores import open_store
from ragmi.stores.base import cleanup
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    cleanup(open_store(p.store, p.spec), p.manifest, smk.output.record, log=log)


run_step(snakemake, main)  # noqa: F821
