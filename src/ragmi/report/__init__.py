"""Tables and figures of the pipeline; :mod:`ragmi.report.registry` declares every table it writes."""
