"""What a table declares, and the readers its frame builders share.

A :class:`Table` says what the table is called, its title and notes, which files it reads (a function of
the validated config), how its frame is built from those files, which columns the Markdown version adds
after the metric and cost columns, whether it is compared with published numbers, and which
:class:`Figure`\\ s are drawn from the same frame.  :class:`MetricsOf` gives the inputs of a table over
attack metrics.  The table families declare their tables with these (``attack_registry``,
``audit_registry``, ``utility_registry``); ``ragmi.report.registry`` assembles them and answers the
lookups.  This module imports no family and no registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ..plan import runs
from .tables import markdown_table

Files = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Figure:
    """A figure drawn from a table's frame by ``draw(frame, out_png, table_title)``."""

    name: str  # the rule is figure_<name>
    path: str  # output file
    caption: str  # report caption (reStructuredText), relative to the repository root
    draw: Callable[[pd.DataFrame, str, str], None]


@dataclass(frozen=True)
class Table:
    """One table: ``results/tables/<name>.csv`` (every column) and ``.md`` (see ``write_tables``).

    ``inputs(config)`` names the files the table reads under a validated config; ``build(files,
    config)`` turns them into the table's frame.  ``markdown(frame, title, extra_columns=..., notes=...)``
    renders the Markdown text; the default, :func:`~ragmi.report.tables.markdown_table`, shows the
    metric columns, the cost columns of :data:`ragmi.costs.COST_COLUMNS` the frame has, then
    ``extra_columns``, and the protocol footnote before the table's notes.
    ``published``: the table compares with the papers' numbers; :data:`ragmi.report.registry.PUBLISHED` is
    added to its inputs under the name ``published``.
    ``config_keys``: the parts of the config ``build`` reads, top-level keys or dotted paths
    (``"audit.n_boot"``); ``build`` receives only those (``ragmi.report.registry.table_config``), and so does
    the rule, whose params they are, so a table reruns when one of them changes and not when another key does.
    ``analysis``: for a table that computes (tests, trials, resampling), the function of :mod:`ragmi.analysis`
    that computes its frame from ``inputs`` (``(files, config) -> DataFrame``, the same ``config_keys``); rule
    ``analysis`` runs it into ``results/analysis/<name>.parquet``, which is then the table's and its figures'
    only input (``build`` :func:`read_analysis`), so formatting never repeats the computation.
    """

    name: str
    title: str
    notes: tuple[str, ...]
    inputs: Callable[[Mapping], dict[str, list[str]]]
    build: Callable[[Files, Mapping], pd.DataFrame]
    extra_columns: tuple[str, ...] = ()
    published: bool = False
    figures: tuple[Figure, ...] = ()
    markdown: Callable[..., str] = markdown_table
    config_keys: tuple[str, ...] = ()
    analysis: Callable[[Files, Mapping], pd.DataFrame] | None = None

    def figure(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"table {self.name!r} declares no figure {name!r}")


@dataclass(frozen=True)
class MetricsOf:
    """Inputs of a table over attack metrics: ``results/metrics/{dataset}/{target}/{attack}.csv``
    for every (dataset, target, attack) the configuration runs (``ragmi.plan.runs``) whose attack is
    in ``attacks`` (every attack when ``attacks`` is None), in the order dataset, target, attack."""

    attacks: frozenset[str] | None = None

    def __call__(self, config: Mapping) -> dict[str, list[str]]:
        return {
            "metrics": [
                f"results/metrics/{d}/{t}/{a}.csv"
                for d, t, a in runs(config)
                if self.attacks is None or a in self.attacks
            ]
        }

    def __str__(self) -> str:
        if self.attacks is None:
            return "the metrics of every configured attack"
        return f"the metrics of attack {' or '.join(sorted(self.attacks))}"


def lazy_plot(name: str) -> Callable[[pd.DataFrame, str, str], None]:
    """A figure's ``draw``: ragmi.report.plots.<name>, imported when the figure is drawn: matplotlib and the
    metrics it pulls in cost the Snakefile, which imports the registry, about 0.7 s at every start."""

    def draw(frame: pd.DataFrame, out_png: str, title: str) -> None:
        from . import plots

        getattr(plots, name)(frame, out_png, title)

    draw.__name__ = draw.__qualname__ = name
    return draw


def read_analysis(files: Files, config: Mapping | None = None) -> pd.DataFrame:
    """The frame of a table with an analysis: rule ``analysis``'s parquet (``files["analysis"]``)."""
    return pd.read_parquet(files["analysis"][0])
