"""The knowledge bases of the knowledge-extraction benchmark (KEB), read from its own data files.

Qi et al., "Benchmarking Knowledge-Extraction Attacks and Defenses on Retrieval-Augmented
Generation" (KDD 2026, arXiv 2602.09319); code: github.com/charlieqi02/
RAG-Knowledge-Extraction-Attack-and-Defense-Benchmark, ``kedatasets/_data_load.py``
(``load_from_local``, ``load_HealthCareMagic``) and ``kedatasets/_utils.py`` (``split_text``,
``index_qas``).  A document is one entry of the benchmark's ``index_content`` and its ``doc_id`` is
that entry's key, so what an attack extracts can be matched against the benchmark's own ids.

Spec keys (``datasets.<name>``)::

    source: keb
    dataset: HealthCareMagic      # HealthCareMagic, Enron, HarryPotter or Pokemon (required)
    path: /data/keb               # the benchmark's data folder, its DATA_PATH (required)
    max_docs: 500                 # optional: the first N entries, as the benchmark's debug_len

Files, relative to ``path`` (the benchmark's names and formats):

* ``HealthCareMagic/HealthCareMagic-100k.json``: a JSON array of strings ``"<human>: ... <bot>: ..."``.
  Each is split into query and answer as ``split_text`` does (``\\r\\n`` -> ``\\n``, strip, the regex
  ``<human>:\\s*(.*?)\\s*<bot>:\\s*(.*)\\s*$``; failing it, a split at the first ``<bot>:``; failing
  that, the query is "").  The knowledge base is ``id2q`` of ``index_qas``: each distinct query
  (exact string comparison) once, in order of first appearance, ids ``"0"``, ``"1"``, ...  The doctor's
  answers are not in it.
* ``Enron/emails.csv``: column ``message``, one document per row, id = row index (``"0"``, ...).
* ``HarryPotter/HarryPotterQA-26k.csv``: column ``context``, one document per row, id = row index.
* ``Pokemon/Pokemon-1k.csv``: ``" ".join([name, type_1, type_2, caption])`` after empty cells become
  "" (``fillna('')``; an empty ``type_2`` leaves two spaces), id = row index.

CSV files are read with pandas' default missing-value rule, as the benchmark's ``pd.read_csv(file)``
does (empty cells and markers such as ``NA`` are missing), but every cell as a string (the benchmark
would parse a column of numbers as numbers).  ``title`` and ``human_turn`` are "": a HealthCareMagic
document is the patient's message alone (no doctor reply), so it is not a dialogue; RAG-MIA's sample,
the human part, is then the whole text, which is what an empty ``human_turn`` makes it quote.

Where ragmi departs from the benchmark's loader:

1. :func:`ragmi.datasets.normalize` runs afterwards, as for every source: it strips each text, drops
   empty documents (a HealthCareMagic entry whose query did not parse, which the benchmark indexes as
   id ``q`` with text "", or a CSV row whose cell is missing, which the benchmark indexes as a float
   NaN), and drops a later document whose text equals an earlier one once whitespace runs are
   collapsed and case is folded (the benchmark keeps every row of the CSVs, e.g. a HarryPotter
   context repeated for several questions, and HealthCareMagic queries that differ only in case or
   inner whitespace).  Kept documents keep the benchmark's ids, so the corpus is a subset of its
   ``index_content`` with the same keys.
2. Files are decoded as UTF-8 (the benchmark opens the JSON with the platform's default encoding).
3. ``max_docs`` keeps the first N entries (ids ``"0"`` .. ``"N-1"``) before that cleaning, like the
   benchmark's ``debug_len``; the benchmark's other datasets (the ``...Chunk`` variants) are not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ragmi.datasets.local import require_columns
from ragmi.errors import ConfigError, DataError

# dataset -> its file under the data folder (kedatasets/_data_load.py, load_from_local)
FILES = {
    "HealthCareMagic": "HealthCareMagic/HealthCareMagic-100k.json",
    "Enron": "Enron/emails.csv",
    "HarryPotter": "HarryPotter/HarryPotterQA-26k.csv",
    "Pokemon": "Pokemon/Pokemon-1k.csv",
}
DATASETS = tuple(FILES)
POKEMON_COLUMNS = ("name", "type_1", "type_2", "caption")

# kedatasets/_data_load.py, load_HealthCareMagic
QA_PATTERN = re.compile(r"<human>:\s*(.*?)\s*<bot>:\s*(.*)\s*$", re.DOTALL)


def split_text(text) -> tuple[str, str]:
    """(human, bot) of one HealthCareMagic string, as the benchmark's ``_utils.split_text``."""
    if text is None:
        return "", ""
    s = str(text).replace("\r\n", "\n").strip()
    m = QA_PATTERN.search(s)
    if m:
        return m.group(1).strip(), m.group(2).strip()
    idx = s.find("<bot>:")
    if idx != -1:
        return s[:idx].replace("<human>:", "").strip(), s[idx + len("<bot>:") :].strip()
    return "", s


def unique_queries(entries: list) -> dict[str, str]:
    """``id2q`` of the benchmark's ``index_qas``: each distinct query once, ids by first appearance."""
    id2q: dict[str, str] = {}
    seen: set[str] = set()
    for raw in entries:
        query, _ = split_text(raw)
        if query not in seen:
            seen.add(query)
            id2q[str(len(id2q))] = query
    return id2q


def _file(name: str, spec: Mapping) -> Path:
    for key in ("dataset", "path"):
        if not spec.get(key):
            raise ConfigError(f"datasets.{name}.{key} is required for source 'keb'.")
    dataset = spec["dataset"]
    if dataset not in FILES:
        raise ConfigError(f"datasets.{name}.dataset is {dataset!r}, which is not one of: {', '.join(DATASETS)}.")
    p = Path(spec["path"]).expanduser() / FILES[dataset]
    if not p.is_file():
        raise DataError(
            f"datasets.{name}: file {p} does not exist (the benchmark's {dataset} file under "
            f"datasets.{name}.path, its data folder)."
        )
    return p


def _read_csv(p: Path, name: str, columns) -> pd.DataFrame:
    try:
        df = pd.read_csv(p, dtype=str, encoding="utf-8")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"datasets.{name}: file {p} could not be read as csv ({exc}).") from exc
    require_columns(df, columns, name, f"file {p}")
    return df.reset_index(drop=True)


def _read_healthcaremagic(p: Path, name: str) -> dict[str, str]:
    try:
        entries = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise DataError(f"datasets.{name}: file {p} could not be read as json ({exc}).") from exc
    if not isinstance(entries, list):
        raise DataError(
            f"datasets.{name}: file {p} is not a JSON array of '<human>: ... <bot>: ...' strings "
            f"(found a {type(entries).__name__})."
        )
    return unique_queries(entries)


def index_content(name: str, spec: Mapping) -> dict[str, object]:
    """The benchmark's ``index_content`` (id -> document) of ``spec['dataset']``, in its order."""
    p = _file(name, spec)
    dataset = spec["dataset"]
    if dataset == "HealthCareMagic":
        return _read_healthcaremagic(p, name)
    if dataset == "Pokemon":
        df = _read_csv(p, name, POKEMON_COLUMNS).fillna("")
        text = df["name"] + " " + df["type_1"] + " " + df["type_2"] + " " + df["caption"]
    else:
        column = "message" if dataset == "Enron" else "context"
        text = _read_csv(p, name, (column,))[column]
    return {str(i): v for i, v in enumerate(text)}


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    """``doc_id`` (the benchmark's index key) and ``text`` of one KEB dataset (not yet normalised)."""
    max_docs = spec.get("max_docs")
    if max_docs is not None and (isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1):
        raise ConfigError(f"datasets.{name}.max_docs must be a positive integer (got {max_docs!r}).")
    content = index_content(name, spec)
    ids = list(content)[:max_docs]
    return pd.DataFrame({"doc_id": ids, "text": [content[i] for i in ids], "title": "", "human_turn": ""})
