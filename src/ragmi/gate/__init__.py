"""The release gate: limits on a run's tables, a verdict per (limit, cell), JUnit XML, SARIF 2.1.0.

A limit (``gate.limits`` in config/schema.yaml) names a metric, a bound (``max`` or ``min``) and the
cells it applies to (``dataset``, ``target``, ``attack``, ``variant``; ``*`` matches every one). Each
metric reads one column of one table under ``results/tables/``:

* ``auc``, ``auc_lo``, ``auc_hi``, ``tpr_low_fpr``, ``tpr_low_fpr_lo``, ``tpr_low_fpr_hi``: ``summary.csv``
  (one row per dataset × target × attack headline variant);
* ``canaries_recovered``, ``canary_rate``: ``canaries.csv`` (one row per target);
* ``email_nel_per_run``, ``name_nel_per_run`` and their ``_hi``: ``leakage_dashboard.csv``, its
  per-target rows (one per dataset × target);
* ``utility``, ``utility_lo``, ``delta_utility``, ``delta_utility_lo``: ``privacy_utility.csv`` (one
  row per dataset × target × utility metric).

Every matched cell gets one of three outcomes:

* ``breach``: the value is above ``max`` (below ``min``). An interval end is compared as it is: an
  ``auc_hi`` limit whose interval straddles it breaches, because the data cannot show the AUC is
  below it (the finding prints the interval and the smallest AUC the n can detect). A ``max`` on an
  AUC (``auc``, ``auc_lo``, ``auc_hi``) is two-sided: the leakage of a score is its distance from
  chance, and an attacker who finds a score ranking non-members higher flips its sign, so the cell
  also breaches when the same metric of the flipped score -- ``1 - auc``, ``1 - auc_hi`` (the
  flipped interval's lower end), ``1 - auc_lo`` (its upper end) -- is above the limit: an inverted
  cell with ``auc_hi < 1 - max`` breaches every AUC max limit
  (:func:`~ragmi.gate.limits.flipped_value`);
* ``pass``: the value is within the limit (for a two-sided limit: on both sides);
* ``no evidence``: nothing at this n decides the limit -- no row of the table matches (a named target
  or attack that did not run, a table this configuration does not build), the cell's n is 0 or below
  the limit's ``min_n`` (configured, else the default of :func:`~ragmi.gate.limits.default_min_n`: for
  an AUC limit the smallest n per class at which an AUC at the limit is told apart from chance), the
  number is missing (a skipped variant, a TPR no FPR level resolves, no AUC interval, 0 canaries
  planted, 0 leakage runs), the row says ``informative`` false (its ``uninformative_reason`` is quoted), the
  summary row's verdict is ``control failed`` (a negative control separates members from
  non-members, so the number does not measure membership), or a ``max`` on a TPR meets an inverted
  cell (its AUC interval lies below 0.5: the flipped score's TPR at low FPR is not in the table). It
  is never reported as a pass; with ``gate.fail_on_no_evidence`` (the default) it fails the gate
  like a breach.

The gate's verdict: ``fail`` (exit 1) when a cell breaches or, with ``fail_on_no_evidence``, a cell
has no evidence beside decided ones; ``undecided`` when no cell of any limit has evidence (exit 3,
unless both ``fail_on_no_evidence`` and ``fail_on_undecided`` are false: exit 0, the verdict still
``undecided``, never ``pass``); else ``pass`` (exit 0). Exit 2 is bad input (the command). Files:
``gate.json`` (the machine-readable verdict), ``junit.xml`` (one testcase per limit × cell: a
``failure`` for a breach, an ``error`` for no evidence that fails the gate, ``skipped`` for one that
does not; JUnit readers show errors as red, skipped tests as neutral), ``gate.sarif`` (SARIF 2.1.0,
https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/sarif-v2.1.0-errata01-os-complete.html:
one rule per limit, one result per breached or undecided cell, with the table's CSV row as location).

Modules; this ``__init__`` imports none of them (``ragmi.config`` imports ``metrics`` and ``limits``
while it validates a config, and the command imports ``ragmi.config`` and ``ragmi.report``: an import
here would close a cycle), so import each name from the module that defines it:

* :mod:`ragmi.gate.metrics`: the metrics a limit can name (``METRICS``), their tables, columns and keys;
* :mod:`ragmi.gate.limits`: a limit's id, bound and selected cells, the tables it reads, the two-sided
  rule, the default ``min_n`` (the n that decides a limit);
* :mod:`ragmi.gate.evaluation`: the tables' rows, one outcome per (limit, cell), the verdict
  (``evaluate``, ``verdict_of``);
* :mod:`ragmi.gate.writers`: gate.json, JUnit XML, SARIF and the console lines; reading gate.json back;
* :mod:`ragmi.gate.cli`: the ``ragmi gate`` command (``main``) and the config it evaluates.
"""
