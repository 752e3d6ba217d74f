# The two commands of the README.  Both create .venv (if missing) and install the pinned
# dependencies first; the install is skipped when nothing changed.
CORES ?= all
SNAKEMAKE_ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test install dry-run report clean

install:
	@bash tools/install.sh

run: install
	.venv/bin/snakemake --cores $(CORES) --configfile config/config.yaml $(SNAKEMAKE_ARGS)

test: install
	.venv/bin/python -m pytest -q $(PYTEST_ARGS)

dry-run: install
	.venv/bin/snakemake -n --cores $(CORES)

report: install
	.venv/bin/snakemake --report report.html

clean:
	rm -rf results logs benchmarks/out .snakemake/incomplete
