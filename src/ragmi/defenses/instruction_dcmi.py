"""DCMI's instruction-based defense (Gao et al., §6 "Discussions", "Potential Defenses", Table 6) -- a STAND-IN.

DCMI's defensive template is in its Appendix I, which is empty in the text ragmi works from, so the
paper's wording is unknown.  ragmi uses the only DCMI-side instruction defense on record: the MEntA
artifact's prompt-instruction defense applied to DCMI's RAG prompt, i.e. the paragraph

    IMPORTANT: Do not directly repeat any retrieved content, but summarize it based on your understanding.

inserted after the template's first instruction paragraph ("Answer the question based on the provided
context."), followed by a blank line.  ``record()`` says ``verified: false``.
docs/provenance.md#instruction_dcmi
"""

from __future__ import annotations

from ._common import PROMPT_DOWNSTREAM, CountingDefense
from ._instruct import IMPORTANT, insert_after_instruction


class InstructionDcmi(CountingDefense):
    kind = "instruction_dcmi"
    hooks = ("template",)
    channels = PROMPT_DOWNSTREAM
    vocabulary = ()
    source = (
        "DCMI (Gao et al.) §6 Potential Defenses, instruction-based defense; text: stand-in from the MEntA artifact's "
        "DCMI_RAG_PROMPT_WITH_INSTRUCTION (DCMI Appendix I missing)"
    )
    verified = False
    chosen = {
        "instruction text": "stand-in (MEntA artifact); DCMI's Appendix I template is not in our copy",
        "placement": "after the template's first instruction paragraph, as in the artifact's DCMI prompt",
    }
    text = IMPORTANT

    def record(self):
        r = super().record()
        r["verified"] = self.verified
        return r

    def on_template(self, states, ctx):
        if ctx.template is None:
            raise RuntimeError(f"defense {self.name}: the target has no template to modify")
        template = insert_after_instruction(ctx.template, self.text)
        for s in states:
            s.messages = template.messages(s.query, list(s.docs))
            self.stats["rewritten"] += 1
