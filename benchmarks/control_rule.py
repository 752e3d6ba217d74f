"""The run-level false-alarm rate of the negative-control rule, over run shapes: Holm over the run's
controls (``control failed`` today) against the former rule (any 95% AUC interval excluding 0.5).

Every control is a true null (members and non-members scored alike), so any ``control failed`` is
spurious.  For each number of informative controls m, candidate size n + n and dependence (independent
controls; ``shared``: groups of ``--group`` controls, the variants of one attack on one control target,
reading the same answers: one ranking per group), ``--reps`` seeded replicates of
:func:`ragmi.analysis.summary.control_false_alarm_rates` (the footnote's simulation, larger).

Prints one line per shape: ``m n holm_independent holm_shared old_independent old_shared`` and the
simulation's 95% error.  Measured (``--reps 20000 --controls 10 20 40 --sizes 20 50``, 2026-12-05,
2-core AMD EPYC shared with other jobs, 267 s; error at most ±0.7 points), Holm independent / shared,
former rule independent / shared:

    m=10  n=20+20: Holm 4.6% / 1.5%,  former rule 40% / 15%
    m=20  n=20+20: Holm 4.6% / 1.3%,  former rule 64% / 22%
    m=40  n=20+20: Holm 4.6% / 1.2%,  former rule 87% / 40%
    m=10  n=50+50: Holm 4.8% / 1.4%,  former rule 40% / 14%
    m=20  n=50+50: Holm 4.7% / 1.2%,  former rule 64% / 22%
    m=40  n=50+50: Holm 4.7% / 1.0%,  former rule 87% / 40%

Run: ``.venv/bin/python benchmarks/control_rule.py [--reps 20000] [--controls 10 20 40] [--sizes 20 50]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def main(argv=None) -> int:
    from ragmi.analysis.summary import control_false_alarm_rates
    from ragmi.metrics import Z95

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20000)
    ap.add_argument("--controls", type=int, nargs="+", default=[10, 20, 40])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50])
    ap.add_argument("--group", type=int, default=4, help="controls per shared-answers group")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    err = Z95 * math.sqrt(0.25 / args.reps)
    print(f"reps={args.reps} group={args.group} (95% simulation error at most ±{err:.1%})")
    start = time.perf_counter()
    for n in args.sizes:
        for m in args.controls:
            r = control_false_alarm_rates(
                [(n, n)] * m, [i // args.group for i in range(m)], n_rep=args.reps, seed=args.seed
            )
            print(
                f"m={m:<3d} n={n}+{n}: Holm {r['holm_independent']:.1%} / {r['holm_shared']:.1%},  "
                f"former rule {r['old_independent']:.0%} / {r['old_shared']:.0%}"
            )
    print(f"{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
