"""The analyses behind the tables that compute: statistics over the attacks' scores (and other steps'
outputs) that run in rule ``analysis`` (``rules/tables.smk``), each writing one parquet
(``results/analysis/<table>.parquet``), before the ``table`` rule and the figure rules turn that frame
into CSV, Markdown and figures (:mod:`ragmi.report` formats, never computes).

A table declares its analysis (:class:`ragmi.report.declare.Table`, ``analysis=``): a function
``(files, config) -> DataFrame`` over the table's input files and its ``config_keys`` of the config.

* :mod:`ragmi.analysis.dataset_inference`: the dataset-inference rows (combiner, exact tests, shift sets,
  calibration, Holm), over :mod:`ragmi.dataset_inference`'s statistics;
* :mod:`ragmi.analysis.epsilon`: the ε audit's trials and bounds, over :mod:`ragmi.epsilon_audit`;
* :mod:`ragmi.analysis.readers`: the readers they share (scores with labels, candidates).
"""
