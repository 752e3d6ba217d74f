"""Show DCMI's offline (WordNet) perturbations of a dataset's documents: the original and the
perturbed text side by side at each θ, the changed words in [brackets], then the words changed most
often.

    .venv/bin/python tools/show_perturbations.py [--config config/config.yaml] [--dataset synthetic]
        [--n 5] [--thetas 0.06 0.12] [--seed SEED] [--width 58] [--top 10] [--count-all] [--doc DOC_ID ...]

What it perturbs is what DCMI's ``prepare`` perturbs (``ragmi.attacks.dcmi.DCMI``): the sample
``title + " " + text`` (the text alone without a title) cut to ``attacks.dcmi.max_chars``, with
:class:`ragmi.attacks.perturb.WordNetPerturber` seeded with the run's ``seed`` (the attack's seed in
the pipeline) and keyed by the document id.  Defaults come from the config file: the dataset
``datasets.<name>`` (``synthetic`` when the config has one, else its first dataset), θ =
``attacks.dcmi.thetas`` ∪ ``theta_adv2``, ``attacks.dcmi.wordnet_dir``.  The embedded default's
corpus is ``ragmi.datasets.synthetic.generate(n_docs=200, seed=1234, length="compact")``.

``--n`` documents are drawn (seeded by ``--seed``) and shown; the counts are over those documents, or
over every document of the dataset with ``--count-all``.  ``--doc`` shows the named documents
instead of a sample.  The LLM perturber is not run here (it needs the attacker LLM).
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import random
import sys
import textwrap
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def marked(original: str, perturbed: str) -> tuple[str, str]:
    """Both texts with the words that differ (a word-level diff, whitespace-separated words) in
    [brackets]; line breaks are kept."""
    a, b = _split(original), _split(perturbed)
    wa = [t for t in a if not t.isspace()]
    wb = [t for t in b if not t.isspace()]
    sm = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    ca, cb = set(), set()
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag != "equal":
            ca.update(range(i1, i2))
            cb.update(range(j1, j2))
    return _join(a, ca), _join(b, cb)


def _split(s: str) -> list[str]:
    out, cur = [], ""
    for ch in s:
        if cur and ch.isspace() != cur[-1].isspace():
            out.append(cur)
            cur = ""
        cur += ch
    return out + ([cur] if cur else [])


def _join(tokens: list[str], changed: set[int]) -> str:
    out, i = [], 0
    for t in tokens:
        if t.isspace():
            out.append(t)
            continue
        out.append(f"[{t}]" if i in changed else t)
        i += 1
    return "".join(out)


def side_by_side(left: str, right: str, width: int) -> str:
    def wrap(s: str) -> list[str]:
        return [w for line in s.splitlines() for w in (textwrap.wrap(line, width) or [""])]

    rows = itertools.zip_longest(wrap(left), wrap(right), fillvalue="")
    return "\n".join(f"{a:<{width}} | {b}".rstrip() for a, b in rows)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--dataset", help="a dataset of the config (default: synthetic, else the first)")
    ap.add_argument("--n", type=int, default=5, help="documents to show (default 5)")
    ap.add_argument("--doc", nargs="+", default=None, help="show these document ids instead of a sample")
    ap.add_argument("--thetas", type=float, nargs="+", help="default: attacks.dcmi thetas and theta_adv2")
    ap.add_argument("--seed", type=int, help="the perturber's and the sample's seed (default: the config's seed)")
    ap.add_argument("--width", type=int, default=58, help="column width (default 58)")
    ap.add_argument("--top", type=int, default=10, help="most-changed words to list per θ (default 10)")
    ap.add_argument("--count-all", action="store_true", help="count the changed words over the whole dataset")
    args = ap.parse_args(argv)

    from ragmi.attacks.dcmi import DCMI
    from ragmi.attacks.perturb import WordNetPerturber
    from ragmi.config import load_config
    from ragmi.datasets import load_corpus

    cfg = load_config(args.config)
    name = args.dataset or ("synthetic" if "synthetic" in cfg["datasets"] else next(iter(cfg["datasets"])))
    if name not in cfg["datasets"]:
        ap.error(f"dataset {name!r} is not in {args.config} (datasets: {', '.join(cfg['datasets'])})")
    seed = int(cfg["seed"] if args.seed is None else args.seed)
    dcmi_params = dict((cfg.get("attacks") or {}).get("dcmi") or {})
    attack = DCMI(dcmi_params, seed=seed)  # the schema's defaults fill what the config leaves out
    thetas = sorted(set(args.thetas)) if args.thetas else attack.all_thetas()
    df, _ = load_corpus(name, cfg["datasets"][name], seed)
    samples = dict(zip(df["doc_id"], (attack.sample(t) for t in DCMI.candidate_texts(df))))
    if args.doc:
        missing = [d for d in args.doc if d not in samples]
        if missing:
            ap.error(f"not in dataset {name!r}: {', '.join(missing)}")
        shown = list(args.doc)
    else:
        ids = list(samples)
        shown = sorted(random.Random(seed).sample(ids, min(args.n, len(ids))))
    perturber = WordNetPerturber(seed=attack.seed, wordnet_dir=attack.params["wordnet_dir"])

    print(
        f"dataset {name} ({len(df)} documents), WordNet perturber, seed {attack.seed}, "
        f"θ {', '.join(f'{t:g}' for t in thetas)}; changed words in [brackets]"
    )
    for d in shown:
        text = samples[d]
        print(f"\n=== {d} ({len(text.split())} words) ===")
        for th in thetas:
            p = perturber.perturb(text, th, d)
            swaps = ", ".join(f"{a}->{b}" for a, b in p.swaps) or "none"
            print(f"θ = {th:g}: {p.n_swapped} of {p.n_requested} requested swapped ({swaps})")
            print(side_by_side(*marked(text, p.text), args.width))

    counted = list(samples) if args.count_all else shown
    docs = f"{len(counted)} document{'s' if len(counted) != 1 else ''}"
    print(f"\nmost-changed words over {docs} (original -> replacement: swaps)")
    for th in thetas:
        counts, total = Counter(), 0
        for d in counted:
            for a, b in perturber.perturb(samples[d], th, d).swaps:
                counts[(a.lower(), b.lower())] += 1
                total += 1
        entries = [f"{a}->{b}: {n}" for (a, b), n in counts.most_common(args.top)] or ["none"]
        lines = [f"θ = {th:g} ({total} swaps):"]
        for e in entries:  # wrapped between entries, at the width of the two columns
            if len(lines[-1]) + len(e) + 2 > 2 * args.width + 3:
                lines.append(" ")
            lines[-1] += f" {e},"
        print("\n".join(lines).rstrip(","))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
