# The two commands of the README (make run, make test). Every target creates .venv (if missing) and
# installs the locked dependencies first; the install is skipped when nothing changed.
CORES ?= all
SNAKEMAKE_ARGS ?=
PYTEST_ARGS ?=

.PHONY: run run-real real-corpus test test-extended test-fast lint install lock dry-run report clean

install:
	@bash tools/install.sh

# Re-resolve requirements/*.txt and rewrite the lock file requirements/constraints.txt.
lock:
	@bash tools/install.sh --update-lock

# eta.py prints how long the run takes on this machine (its work times this machine's measured speed)
# and where the results go; after a failure, the failed steps' logs (--failed-since).
# check_configfiles.py names the file and line of a YAML error (Snakemake says neither). A run killed
# hard leaves Snakemake's lock behind; clear_stale_lock.py removes it (with a message) when no Snakemake
# process is running in that directory, so "rerun the same command" just works.
# QUIET keeps Snakemake's per-job blocks (rule, input, output, reason, resources) off the console
# (tools/console_filter.py); Snakemake's own log under .snakemake/log/ keeps every line. The steps' own
# lines stay (each model job's answers as they come; RAGMI_CONSOLE=tty keeps them at a terminal's pace
# through the filter's pipe), so do Snakemake's "N of M steps", warnings and errors; after a failure the
# failed steps' logs are named. `make run QUIET=` shows everything.
# With QUIET the filter also prints the run's progress (ragmi.run_progress): answers done and left and the
# time left at the rate measured so far, from the plan tools/eta.py writes to RUN_PLAN, at least every 30 s
# at a terminal and every 60 s in a log while answers are awaited.
QUIET ?= 1
RUN_PLAN := $(shell mktemp -u /tmp/ragmi-run-plan.XXXXXX)
CONSOLE = $(if $(QUIET),| .venv/bin/python -u tools/console_filter.py --plan $(RUN_PLAN),)
define SNAKEMAKE_RUN
t=$$(date +%s); echo ".venv/bin/snakemake --cores $(CORES) --configfile $(1) $(SNAKEMAKE_ARGS)"; \
if [ -t 1 ]; then RAGMI_CONSOLE=tty; export RAGMI_CONSOLE; fi; \
rcf=$$(mktemp); { .venv/bin/snakemake --cores $(CORES) --configfile $(1) $(SNAKEMAKE_ARGS) 2>&1; echo $$? > $$rcf; } $(CONSOLE); \
rc=$$(cat $$rcf); rm -f $$rcf $(RUN_PLAN); \
[ "$$rc" = 0 ] || { .venv/bin/python tools/eta.py --failed-since $$t $(SNAKEMAKE_ARGS); exit $$rc; }
endef

run: install
	@.venv/bin/python tools/eta.py --cores $(CORES) --plan-file $(RUN_PLAN) --configfile config/config.yaml $(SNAKEMAKE_ARGS)
	.venv/bin/python tools/check_configfiles.py --configfile config/config.yaml $(SNAKEMAKE_ARGS)
	.venv/bin/python tools/clear_stale_lock.py $(SNAKEMAKE_ARGS)
	@$(call SNAKEMAKE_RUN,config/config.yaml)

# The default beside the same pipeline on a real corpus (config/real_corpus.yaml: 200 Debian changelog
# entries of this machine's installed packages, built by tools/make_real_corpus.py): both datasets' rows
# in the same tables (docs/datasets.md).
REAL_CORPUS = resources/corpora/debian-changelogs.jsonl
real-corpus: install
	@test -s $(REAL_CORPUS) || .venv/bin/python tools/make_real_corpus.py --out $(REAL_CORPUS)

run-real: real-corpus
	@.venv/bin/python tools/eta.py --cores $(CORES) --plan-file $(RUN_PLAN) --configfile config/config.yaml config/real_corpus.yaml $(SNAKEMAKE_ARGS)
	.venv/bin/python tools/check_configfiles.py --configfile config/config.yaml config/real_corpus.yaml $(SNAKEMAKE_ARGS)
	.venv/bin/python tools/clear_stale_lock.py $(SNAKEMAKE_ARGS)
	@$(call SNAKEMAKE_RUN,config/config.yaml config/real_corpus.yaml)

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

# Lint, then the whole suite (CI: .ci/run): two pytest-xdist workers (each module on one worker, the
# end-to-end modules first, sharing one vLLM server: tests/conftest.py), then the serial tests alone. Exit
# code 5 (no test selected, e.g. PYTEST_ARGS naming one file) counts as success for either part.
# OMP_WAIT_POLICY=PASSIVE: the two workers' jobs and the shared vLLM server together run more OpenMP
# threads than there are cores, and OpenMP threads that spin while waiting take the CPU from the others;
# passive waiting made the suite 14:51 instead of 17:22 here (benchmarks/README.md, "Pipeline and test-suite timings").
PYTEST_WORKERS ?= 2
test: lint
	@a=0; b=0; export OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE}; \
	.venv/bin/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not extended and not serial" $(PYTEST_ARGS) || a=$$?; \
	.venv/bin/python -m pytest -q -m "serial and not extended" $(PYTEST_ARGS) || b=$$?; \
	[ $$a = 5 ] && a=0; [ $$b = 5 ] && b=0; \
	if [ $$a != 0 ] || [ $$b != 0 ]; then echo "make test: FAILED (parallel part exit $$a, serial part exit $$b)"; exit 1; fi

# The tests left out of CI for time: their assertions are also made by a CI test, except the tiny-size runs
# of the multi-engine benchmark scripts, which CI checks only by their arguments and imports.
test-extended: install
	.venv/bin/python -m pytest -q -m extended $(PYTEST_ARGS)

# For development: no lint, no slow end-to-end tests.
test-fast: install
	.venv/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

dry-run: install
	.venv/bin/snakemake -n --cores $(CORES) --configfile config/config.yaml $(SNAKEMAKE_ARGS)

report: install
	.venv/bin/snakemake --report report.html

clean:
	rm -rf results logs .snakemake/incomplete
