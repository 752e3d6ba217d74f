"""The Mind-the-Hook active-path audit of ragmi's defenses (docs/provenance.md#canaries).

Modules:

* :mod:`ragmi.audit.canaries`   the out-of-vocabulary e-mail canaries (``operator_N@acmetest-internal.canary``),
                                the Ps query pool and exact-match recovery;
* :mod:`ragmi.audit.stats`      one-sided Fisher test, Clopper-Pearson bound, run-level bootstrap with
                                hash-identical runs collapsed;
* :mod:`ragmi.audit.extraction` the evaluator's side of the extraction attacks: verbatim reproduction
                                of the retrieved documents (longest common substring, ROUGE-L);
* :mod:`ragmi.audit.inventory`  hook inventory and metric-to-channel map;
* :mod:`ragmi.audit.leakage`    per-run generated-text leakage of one target.

The evaluator may read what no attack sees (retrieved ids, database texts); attack modules import
nothing from here. What both sides use lives outside: NELstrict (:mod:`ragmi.nel`, the rule-based
named-entity-leakage scorer and its precision spot-check), the text-overlap primitives
(:mod:`ragmi.textmatch`) and the extraction prompt pools (:mod:`ragmi.attacks.prompt_pools`).
"""
