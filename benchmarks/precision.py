"""Precision as an audited variable: the same configuration run in float32 and in bfloat16 on one machine,
back to back, and every summary cell compared (ragmi.precision_audit).

    .venv/bin/python benchmarks/precision.py [--configfile config/config.yaml [config/real_corpus.yaml]]
                                             [--workdir DIR] [--cores all] [--out precision.csv]
    .venv/bin/python benchmarks/precision.py --compare DIR_A DIR_B [--out precision.csv]

The first form makes ``DIR/float32`` and ``DIR/bfloat16`` (default ``results/benchmarks/precision``),
each with a config overlay that sets every generator's ``dtype`` and nothing else, a ``resources`` link
to the repository's (``make run-real``'s corpus lives there) and a response cache of its own, and runs
``snakemake --directory`` in each, float32 first, timing both.  The second form only compares two
results trees (each a directory holding ``results/``).  Both write one row per summary cell (the paired
ΔAUC of bf16 - fp32 over the same evaluation candidates with its 95% interval, each run's verdict,
whether it moved and whether the move lies within the paired interval) to ``--out`` and print the one
sentence the README quotes.  ``make run-real``'s corpus must have been built first (``make real-corpus``).

The measurement needs a CPU that computes bf16 natively (``amx_bf16`` or ``avx512_bf16``: ragmi.hardware);
on another CPU bf16 is emulated, which answers the question about verdicts but says nothing of speed."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ragmi.precision_audit import compare_runs, one_sentence  # noqa: E402

DTYPES = ("float32", "bfloat16")


def overlay(configfiles: list[str], dtype: str) -> dict:
    """The config overlay that sets every generator's dtype (the generators of the merged configfiles)."""
    gens: dict = {}
    for f in configfiles:
        gens.update((yaml.safe_load(Path(f).read_text()) or {}).get("generators") or {})
    if not gens:
        raise SystemExit(f"benchmarks/precision.py: no generators in {', '.join(configfiles)}")
    return {"generators": {name: {"dtype": dtype} for name in gens}}


def run_one(workdir: Path, configfiles: list[str], dtype: str, cores: str, dry_run: bool = False) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay(configfiles, dtype)))
    link = workdir / "resources"
    if not link.exists() and (ROOT / "resources").is_dir():
        link.symlink_to(ROOT / "resources")
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        cores,
        "--configfile",
        *[str(Path(f).resolve()) for f in configfiles],
        str(workdir / "overlay.yaml"),
        *(["--dry-run"] if dry_run else []),
    ]
    print(f"{dtype}: {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, stdout=subprocess.DEVNULL if dry_run else None)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(
            f"benchmarks/precision.py: the {dtype} run failed (exit {proc.returncode}); see {workdir}/logs"
        )
    print(f"{dtype}: {seconds:.0f} s", flush=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", nargs="+", default=[str(ROOT / "config/config.yaml")])
    ap.add_argument("--workdir", default=str(ROOT / "results/benchmarks/precision"))
    ap.add_argument("--cores", default="all")
    ap.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"), help="only compare two results trees")
    ap.add_argument("--dry-run", action="store_true", help="only plan both runs (snakemake --dry-run), compare nothing")
    ap.add_argument("--out", default=None, help="CSV of the comparison (default: <workdir>/precision.csv)")
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (Path(p) for p in args.compare)
        labels = (a.name, b.name)
        out = Path(args.out or "precision.csv")
    else:
        work = Path(args.workdir)
        seconds = {d: run_one(work / d, args.configfile, d, args.cores, args.dry_run) for d in DTYPES}
        if args.dry_run:
            return 0
        a, b = work / DTYPES[0], work / DTYPES[1]
        labels = DTYPES
        out = Path(args.out or work / "precision.csv")
        print(
            f"wall time: float32 {seconds['float32']:.0f} s, bfloat16 {seconds['bfloat16']:.0f} s "
            f"({seconds['bfloat16'] / seconds['float32']:.2f}x)"
        )
    df = compare_runs(a, b)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    moved = df[df["verdict_moved"].fillna(False).astype(bool)]
    for _, r in moved.iterrows():
        delta = (
            ""
            if r["delta_auc"] != r["delta_auc"]
            else f" ΔAUC {r['delta_auc']:+.3f} [{r['delta_lo']:+.3f}, {r['delta_hi']:+.3f}]"
        )
        print(
            f"  {r['dataset']}/{r['target']} {r['variant']}: {r['verdict_a']} -> {r['verdict_b']} ({r['reading']}){delta}"
        )
    print(one_sentence(df, *labels))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
