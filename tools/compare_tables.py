"""Compare two runs' tables, modulo the renames of the "one place for every value" refactor
(documents under test: targets -> candidates).

    python tools/compare_tables.py BEFORE_DIR AFTER_DIR [--new-columns]

BEFORE_DIR and AFTER_DIR are Snakemake working directories of the same config; it prints, per table,
whether the CSV (every column, full precision) and the Markdown rows are identical, and exits 1 on a
difference.  With ``--new-columns`` the columns of AFTER's tables that BEFORE's lack (a CSV column, a
Markdown header cell) are named and left out of the comparison, so that it checks "identical except
for the new columns"; every column of BEFORE must still be in AFTER, with the same text in every row.
"""

import csv
import io
import pathlib
import re
import sys

RENAMES = [
    ("queries_per_target", "queries_per_candidate"),
    ("prompt_tokens_per_target", "prompt_tokens_per_candidate"),
    ("output_tokens_per_target", "output_tokens_per_candidate"),
    ("attacker_llm_tokens_per_target", "attacker_llm_tokens_per_candidate"),
    ("target_retrieved_rate", "candidate_retrieved_rate"),
    ("failed rewrites than asked) for 100% of targets", "failed rewrites than asked) for 100% of candidates"),
]
args = [a for a in sys.argv[1:] if a != "--new-columns"]
NEW_COLUMNS = "--new-columns" in sys.argv[1:]
base, after = map(pathlib.Path, args[:2])
_CELL = re.compile(r"(?<!\\)\|")


def csv_without_new(a: str, b: str) -> str:
    """``a`` (AFTER's CSV text) restricted to the columns of ``b`` (BEFORE's), in b's order."""
    ra, rb = list(csv.reader(io.StringIO(a))), list(csv.reader(io.StringIO(b)))
    if not ra or not rb:
        return a
    keep = [ra[0].index(c) for c in rb[0] if c in ra[0]]
    new = [c for c in ra[0] if c not in rb[0]]
    if new:
        print(f"  new CSV columns left out: {', '.join(new)}")
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([[r[i] for i in keep] for r in ra])
    return out.getvalue()


def md_without_new(a: list[str], b: list[str]) -> list[str]:
    """AFTER's Markdown lines with the table columns whose header BEFORE lacks removed."""
    ha = next((x for x in a if x.startswith("| dataset")), None)
    hb = next((x for x in b if x.startswith("| dataset")), None)
    if ha is None or hb is None:
        return a
    cells_a = [c.strip() for c in _CELL.split(ha)[1:-1]]
    cells_b = {c.strip() for c in _CELL.split(hb)[1:-1]}
    drop = {i for i, c in enumerate(cells_a) if c not in cells_b}
    if not drop:
        return a
    print(f"  new Markdown columns left out: {', '.join(cells_a[i] for i in sorted(drop))}")
    width = len(cells_a)
    out = []
    for x in a:
        parts = _CELL.split(x)
        if x.startswith("|") and len(parts) == width + 2:
            kept = [p for i, p in enumerate(parts[1:-1]) if i not in drop]
            x = "|" + "|".join(kept) + "|"
        out.append(x)
    return out


for d in (base, after):
    if not sorted((d / "results/tables").glob("*.csv")):
        sys.exit(f"compare_tables: no tables in {d / 'results/tables'} (give the Snakemake working directories)")
ok = True
for f in sorted((base / "results/tables").glob("*.csv")):
    a = (after / "results/tables" / f.name).read_text()
    b = f.read_text()
    for old, new in RENAMES:
        b = b.replace(old, new)
    if NEW_COLUMNS:
        a = csv_without_new(a, b)
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
    if NEW_COLUMNS:
        a = md_without_new(a, b)
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
