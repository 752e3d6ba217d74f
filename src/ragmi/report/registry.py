"""Every table the pipeline writes: the families' declarations, assembled once, and the lookups.

Each table family declares its tables, with their titles, notes, inputs and frame builders, in a module
of its own, in the vocabulary of :mod:`ragmi.report.declare` (:class:`Table`, :class:`Figure`,
:class:`MetricsOf`):

* :mod:`ragmi.report.attack_registry`: the tables over attack metrics (summary, attack_comparison, rag_mia,
  dcmi_ablation, query_budget, framework_comparison);
* :mod:`ragmi.report.audit_registry`: the audit's tables (hook_inventory, leakage_dashboard, canaries,
  defense_effect, detection);
* :mod:`ragmi.report.utility_registry`: utility and privacy_utility;
* :mod:`ragmi.report.inference_registry`: dataset_inference and epsilon_audit;
* :mod:`ragmi.report.campaign_registry`: coverage (the adaptive extraction campaigns).

:data:`TABLES` lists them in that order.  The Snakemake rules (``rules/tables.smk``: one rule ``table`` with
a ``{table}`` wildcard, one ``figure_<name>`` rule per declared figure), the default targets
(``final_outputs()`` in ``rules/common.smk``) and ``workflow_scripts/table.py`` all read :data:`TABLES`
and the lookups below; nothing else names a table.

Adding a table: write its frame builder (``(files, config) -> DataFrame``, where ``files`` maps each input
name to its list of paths) in its family's module, append a :class:`Table` to that module's ``TABLES``
with the ``config_keys`` the builder reads (it is given those only, and the table reruns when one of them
changes), and say what it shows in ``report/tables.rst`` and ``docs/tables.md`` if needed.  ``inputs`` may
return any named lists of files, e.g. ``{"audit": [...], "metrics": [...]}``; the table is built when
every list is non-empty.  A table that computes (tests, trials, resampling) declares the function of
:mod:`ragmi.analysis` that does it (``analysis=``): rule ``analysis`` runs it on those inputs into
``results/analysis/<name>.parquet`` (:func:`analysis_path`), and the table and its figures read that file
alone (``build=read_analysis``).  For tables over attack metrics, :class:`MetricsOf` gives the metrics CSVs of
the configured attacks the table reads; a table whose frame has no metric columns sets ``markdown`` to
its own renderer.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..costs import COST_COLUMNS
from ..errors import ConfigError
from ..io import atomic_write_parquet, atomic_write_text
from ..schema import SCHEMA_PATH
from . import attack_registry, audit_registry, campaign_registry, inference_registry, utility_registry
from .comparison import CONTROL_COLUMNS
from .declare import Figure, Files, MetricsOf, Table

__all__ = [
    "PUBLISHED",
    "TABLES",
    "Figure",
    "Files",
    "MetricsOf",
    "Table",
    "analyses",
    "analysis_input_files",
    "analysis_path",
    "built",
    "draw_figure",
    "input_files",
    "outputs",
    "run_analysis",
    "table_config",
    "write_table",
]

# Published numbers of the papers (see the file's header), read by tables with published=True.
PUBLISHED = str(SCHEMA_PATH.parent / "published.yaml")

# Every table, in this order: the rules and outputs() follow it (summary first: the table a reader opens first).
TABLES: dict[str, Table] = {
    t.name: t
    for family in (attack_registry, audit_registry, utility_registry, inference_registry, campaign_registry)
    for t in family.TABLES
}


def built(table: Table, config: Mapping) -> bool:
    """Whether ``config`` gives the table something to read: every input list is non-empty."""
    return all(table.inputs(config).values())


def analysis_path(name: str) -> str:
    """Rule ``analysis``'s output for table ``name`` (a table that declares an ``analysis``)."""
    return f"results/analysis/{name}.parquet"


def analyses() -> list[str]:
    """The tables that declare an analysis (rule ``analysis``'s ``{table}`` values)."""
    return [t.name for t in TABLES.values() if t.analysis is not None]


def analysis_input_files(name: str, config: Mapping) -> dict[str, list[str]]:
    """The named input files of table ``name``'s analysis under ``config``."""
    return _declared_inputs(TABLES[name], config)


def input_files(name: str, config: Mapping) -> dict[str, list[str]]:
    """The named input files of table ``name`` under ``config`` (with ``published`` if it compares): its
    analysis's parquet alone for a table that declares an ``analysis``."""
    table = TABLES[name]
    if table.analysis is not None:
        _declared_inputs(table, config)  # the same one message where the analysis has nothing to read
        files = {"analysis": [analysis_path(name)]}
    else:
        files = _declared_inputs(table, config)
    if table.published:
        files["published"] = [PUBLISHED]
    return files


def _declared_inputs(table: Table, config: Mapping) -> dict[str, list[str]]:
    name = table.name
    files = dict(table.inputs(config))
    empty = sorted(k for k, v in files.items() if not v)
    if empty:
        what = table.inputs if isinstance(table.inputs, MetricsOf) else f"{', '.join(empty)} files"
        raise ConfigError(f"table {name!r} reads {what}; this configuration has none")
    return files


def _declared(table: Table, config: Mapping) -> dict:
    out: dict = {}
    for key in table.config_keys:
        *parents, leaf = key.split(".")
        src, dst = config, out
        for p in parents:
            if p not in src:
                break
            src, dst = src[p], dst.setdefault(p, {})
        else:
            if leaf in src:
                dst[leaf] = src[leaf]
    return out


def table_config(name: str, config: Mapping) -> dict:
    """The parts of ``config`` table ``name`` reads (its ``config_keys``), nested as in ``config``: the
    params of its rules, so that changing another key (an attack's parameters, say) reruns no table
    whose inputs did not change."""
    return _declared(TABLES[name], config)


def outputs(config: Mapping) -> list[str]:
    """Markdown tables and figures of every table ``config`` builds, in registry order."""
    out = []
    for t in TABLES.values():
        if built(t, config):
            out.append(f"results/tables/{t.name}.md")
            out += [f.path for f in t.figures]
    return out


def run_analysis(table: Table, files: Files, config: Mapping, out_parquet: str) -> pd.DataFrame:
    """Rule ``analysis``: ``table``'s analysis over ``files`` (its ``config_keys`` of ``config`` only),
    written atomically as parquet."""
    df = table.analysis(files, _declared(table, config))
    atomic_write_parquet(df, out_parquet)
    return df


def write_table(table: Table, files: Files, config: Mapping, out_csv: str, out_md: str) -> pd.DataFrame:
    """Build ``table``'s frame from ``files``; write it as a full-precision CSV (every column) and as
    Markdown, both atomically.  ``build`` sees only the table's ``config_keys`` of ``config``."""
    df = table.build(files, _declared(table, config))
    extra = [c for c in COST_COLUMNS if c in df] + [c for c in CONTROL_COLUMNS.values() if c in df]
    extra += list(table.extra_columns)
    md = table.markdown(df, table.title, extra_columns=extra, notes=list(table.notes))
    atomic_write_text(df.to_csv(index=False, lineterminator="\n"), out_csv)
    atomic_write_text(md, out_md)
    return df


def draw_figure(table: Table, figure: str, files: Files, config: Mapping, out_png: str) -> pd.DataFrame:
    """Draw ``table``'s figure ``figure`` from the table's frame (built from ``files`` and the table's
    ``config_keys`` of ``config``)."""
    df = table.build(files, _declared(table, config))
    table.figure(figure).draw(df, out_png, table.title)
    return df
