"""Utility of every target: how well it answers benign questions whose answers are in its database.

``questions`` writes the question set (the dataset's own QA pairs, or the attacker LLM's), ``measures``
scores an answer (FlashRAG's exact match, substring match and token F1 against the reference answer;
a lexical faithfulness to the retrieved documents), ``scoring`` scores one target's answers, ``plan``
says which files a configuration produces.  The tables are ``utility`` and ``privacy_utility``
(``ragmi.report.utility_tables``); where every definition comes from: docs/provenance.md#utility.
"""
