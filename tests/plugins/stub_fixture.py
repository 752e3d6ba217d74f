"""TEST-ONLY defense (not in ragmi's registry): the Mind-the-Hook case of a defense whose generation
hook is a stub.  The tests add it to a copy of the workflow, or register it in process, the way
docs/architecture.md says a defense is added (tests/plugin_tree.py, fixture ``stub_defense``).

Mind the Hook (Table I) found that its DP-style modules act on retrieval scores only, while their
``apply_defense_generation`` returns the response unmodified ("For now, return unmodified response
(placeholder)").  This fixture reproduces that shape on purpose so the active-path audit can be
checked against it: its retrieval hook adds Laplace noise to the candidates' scores (as DP-R), its
output hook is *declared* but returns every response text unchanged.  The audit must classify it
"retrieval-only".  It is never a defense to deploy (``test_only = True``).
docs/provenance.md#stub_fixture
"""

from __future__ import annotations

from ._common import RETRIEVAL_DOWNSTREAM
from .base import set_response_text
from .dp_retrieval import DpRetrieval


class StubFixture(DpRetrieval):  # its retrieval hook is DP-R's
    kind = "stub_fixture"
    test_only = True
    hooks = ("retrieval", "output")
    channels = RETRIEVAL_DOWNSTREAM  # declared, as the audited modules' generation hooks claim "text"
    vocabulary = ()
    logprobs = "keep"
    source = "Mind the Hook Table I (DP modules whose generation hook is a flagged pass-through); test fixture"
    chosen = {
        "retrieval": "Laplace noise on the pool scores, top-k (as dp_retrieval)",
        "output": "deliberate pass-through: the response text is written back unchanged",
    }

    def on_output(self, states, ctx):
        # The inert generation hook under audit: it returns the response unmodified, by design.
        for s in states:
            set_response_text(s, (s.response or {}).get("response_text", ""))
