#!/usr/bin/env bash
# Run the tiny workflow beside this script with the locked Snakemake and keep what it prints (stdout and
# stderr together, as `make run` pipes them into tools/console_filter.py) in console.txt.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
work="$(mktemp -d)"
cp "$here/Snakefile" "$work/"
cd "$work"
"$root/.venv/bin/snakemake" --cores 1 --snakefile Snakefile > "$here/console.txt" 2>&1
echo "snakemake exited $? (1 expected: the score step fails)"
rm -rf "$work"
