"""Check the config files of a Snakemake command line before Snakemake reads them (`make run`).

Snakemake parses ``--configfile`` before the workflow starts, and for a YAML syntax error it says only
"Config file is not valid JSON or YAML" (no file, no line); a missing file ends in a traceback.  This
script reads each file the same way and prints one ``ragmi: …`` line naming the file and, for a
syntax error, the line and column, then exits 1.

    python tools/check_configfiles.py [snakemake arguments...]
"""

from __future__ import annotations

import argparse
import sys


def configfiles(args: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", action="append", default=[])
    known, _ = parser.parse_known_args(args)
    return [f for group in known.configfile for f in group]


def main(argv: list[str]) -> int:
    from ragmi.config import read_config_file
    from ragmi.errors import ConfigError

    for f in configfiles(argv):
        try:
            read_config_file(f)
        except ConfigError as e:
            print(f"\nragmi: {e}\n", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
