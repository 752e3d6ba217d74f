"""``ragmi gate``: evaluate the config's gate limits on a run's tables and write the gate's files, or
read the verdict the rule gate wrote; the exit code is the verdict's (0 pass, 1 fail, 2 bad input,
3 undecided). The config files are read and merged by :mod:`ragmi.config` (``read_config_files``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import RagmiError
from .evaluation import EXIT_BAD_INPUT, EXIT_PASS, evaluate
from .limits import tables_read
from .writers import read_result, summary_lines, write_outputs


def built_tables(cfg: Mapping) -> list[str]:
    """The tables the gate's limits read that the validated config ``cfg`` builds."""
    from ..report.registry import TABLES, built

    return [t for t in tables_read(cfg["gate"]["limits"]) if t in TABLES and built(TABLES[t], cfg)]


RUN_KEYS = ("datasets", "targets", "attacks")  # what a config that defines a run sets (config/schema.yaml)


def default_config_path() -> Path:
    """The embedded default config/config.yaml: the run's config when snakemake got no --configfile."""
    from ..schema import SCHEMA_PATH

    return SCHEMA_PATH.with_name("config.yaml")


def _limits_file(path: str) -> dict:
    """A --limits file: a mapping with a ``gate:`` section and nothing else."""
    from ..config import read_config_file

    doc = read_config_file(path)
    other = sorted(str(k) for k in doc if k != "gate")
    if other or not isinstance(doc.get("gate"), Mapping):
        raise RagmiError(
            f"limits file {path} must hold a gate: section only (gate: {{limits: [...]}})"
            + (f", not {', '.join(other)}: pass those with --configfile" if other else "")
        )
    return doc


def gate_config(configfiles: Sequence[str] | None, limits: str | None) -> dict:
    """The unvalidated config the command evaluates: the --configfile files merged (layered on the
    embedded default when they set none of ``datasets``, ``targets``, ``attacks``, e.g. a file with
    only a ``gate:`` section; a file that defines a run stands alone, as in snakemake), or the
    embedded default without them; the --limits file's ``gate:`` on top."""
    from ..config import merge_config, read_config_file, read_config_files

    cfg = read_config_files(configfiles) if configfiles else {}
    if not any(k in cfg for k in RUN_KEYS):
        cfg = merge_config(read_config_file(default_config_path()), cfg)
    if limits:
        cfg = merge_config(cfg, _limits_file(limits))
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    """``ragmi gate``: 0 pass, 1 breach (or no evidence under fail_on_no_evidence), 2 bad input, 3
    undecided (no cell has evidence)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="ragmi gate",
        description=(
            "Check a run's tables against the config's gate.limits (exit 0: pass, 1: a limit breached or a cell "
            "without evidence, 2: bad input, 3: undecided, no cell has evidence at this n). With --configfile or "
            "--limits the limits are evaluated on <results>/tables and the files written to <results>/gate; "
            "without either, the verdict the rule gate wrote to <results>/gate/gate.json is read. See docs/gate.md."
        ),
        epilog=(
            "examples: ragmi gate --limits limits.yaml (a file with only a gate: section, on a run of the embedded "
            "default); ragmi gate --configfile my.yaml --limits limits.yaml (a run of my.yaml, other limits)"
        ),
    )
    parser.add_argument("--results", default="results", help="the run's results folder (default: results)")
    parser.add_argument(
        "--configfile",
        nargs="+",
        metavar="FILE",
        help=(
            "the run's config file(s), merged as Snakemake merges them; files that set none of datasets, targets, "
            "attacks (e.g. only a gate: section) are layered on the embedded default config/config.yaml"
        ),
    )
    parser.add_argument(
        "--limits",
        metavar="FILE",
        help=(
            "a YAML file with only a gate: section (limits, fail_on_no_evidence, ...), layered on the run's config: "
            "the --configfile files, else the embedded default config/config.yaml"
        ),
    )
    parser.add_argument(
        "--out", metavar="DIR", help="where to write gate.json, junit.xml and gate.sarif (default: <results>/gate)"
    )
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_BAD_INPUT if e.code else EXIT_PASS
    results = Path(args.results)
    try:
        if args.configfile or args.limits:
            from ..config import validate_config

            cfg = validate_config(gate_config(args.configfile, args.limits))
            gate = cfg["gate"]
            if not gate["limits"]:
                raise RagmiError("config key gate.limits: no limits configured, nothing to check")
            if not (results / "tables").is_dir():
                raise RagmiError(f"{results / 'tables'} does not exist: run the pipeline first (or pass --results)")
            result = evaluate(
                gate["limits"],
                results / "tables",
                gate["fail_on_no_evidence"],
                built_tables(cfg),
                fail_on_undecided=gate.get("fail_on_undecided", True),
            )
            write_outputs(result, args.out or results / "gate")
        else:
            path = results / "gate" / "gate.json"
            if not path.is_file():
                raise RagmiError(
                    f"{path} does not exist: run snakemake with gate.enabled: true, or pass --configfile or "
                    "--limits to evaluate here"
                )
            result = read_result(path)
    except RagmiError as e:
        print(f"ragmi: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in summary_lines(result):
        print(line, file=sys.stderr)
    return int(result["exit_code"])
