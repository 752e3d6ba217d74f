"""Compare two runs' tables, modulo the renames of the "one place for every value" refactor
(documents under test: targets -> candidates).

    python tools/compare_tables.py BEFORE_DIR AFTER_DIR

BEFORE_DIR and AFTER_DIR are Snakemake working directories of the same config; it prints, per table,
whether the CSV (every column, full precision) and the Markdown rows are identical, and exits 1 on a
difference.
"""

import pathlib
import sys

RENAMES = [
    ("queries_per_target", "queries_per_candidate"),
    ("prompt_tokens_per_target", "prompt_tokens_per_candidate"),
    ("output_tokens_per_target", "output_tokens_per_candidate"),
    ("attacker_llm_tokens_per_target", "attacker_llm_tokens_per_candidate"),
    ("target_retrieved_rate", "candidate_retrieved_rate"),
    ("failed rewrites than asked) for 100% of targets", "failed rewrites than asked) for 100% of candidates"),
]
base, after = map(pathlib.Path, sys.argv[1:3])
for d in (base, after):
    if not sorted((d / "results/tables").glob("*.csv")):
        sys.exit(f"compare_tables: no tables in {d / 'results/tables'} (give the Snakemake working directories)")
ok = True
for f in sorted((base / "results/tables").glob("*.csv")):
    a = (after / "results/tables" / f.name).read_text()
    b = f.read_text()
    for old, new in RENAMES:
        b = b.replace(old, new)
    same = a == b
    ok &= same
    print(f"{f.name}: {'identical' if same else 'DIFFERENT'} ({len(a.splitlines())} lines)")
    if not same:
        for x, y in zip(a.splitlines(), b.splitlines()):
            if x != y:
                print("  after :", x[:300])
                print("  before:", y[:300])
                break
for f in sorted((base / "results/tables").glob("*.md")):
    a = (after / "results/tables" / f.name).read_text().splitlines()
    b = f.read_text().splitlines()
    rows_a = [line for line in a if line.startswith("| ") and not line.startswith("| dataset")]
    rows_b = [line for line in b if line.startswith("| ") and not line.startswith("| dataset")]
    for old, new in RENAMES:
        rows_b = [line.replace(old, new) for line in rows_b]
    print(
        f"{f.name}: table rows {'identical' if rows_a == rows_b else 'DIFFERENT'} ({len(rows_a)} rows); "
        f"{sum(x != y for x, y in zip(a, b))} of {len(a)} lines differ in all (headers/notes renamed)"
    )
    ok &= rows_a == rows_b
print("ALL IDENTICAL" if ok else "DIFFERENCES")
sys.exit(0 if ok else 1)
