"""Rule corpus: load one configured dataset, normalise it, write parquet + cleaning stats."""

from ragmi.datasets import load_corpus
from ragmi.io import atomic_write_parquet, write_json
from ragmi.rag.fit import long_documents
from ragmi.workflow import run_step


def main(smk, log):
    p = smk.params
    df, stats = load_corpus(p.name, dict(p.spec), int(p.seed))
    log(
        f"dataset {p.name}: {stats['n_docs']} documents ({stats['n_duplicates_dropped']} duplicates and "
        f"{stats['n_empty_dropped']} empty texts dropped)"
    )
    for line in long_documents(df, [tuple(c) for c in p.contexts]):
        log(line)
    atomic_write_parquet(df, smk.output.corpus)
    write_json(stats, smk.output.stats)


run_step(snakemake, main)  # noqa: F821
