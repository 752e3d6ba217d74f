"""RandomText, a random baseline of the knowledge-extraction benchmark (Qi et al., KDD 2026,
``attacks/random.py``): the attacker LLM writes a random paragraph of about 50 words (the benchmark's
system and user prompts, temperature 0.9), sent as the information to ignore after the repeat
command.  It never reads an answer.  Each query's paragraph is asked with its own sampling seed
(drawn from the campaign's seed), so the paragraphs differ although the prompt is always the same,
and the response cache still answers a resumed campaign.  docs/provenance.md#adaptive-extraction-campaigns."""

from __future__ import annotations

from .base import AdaptiveAttack, Proposal
from .prompts import RANDOM_TEXT_PROMPT, RANDOM_TEXT_SYSTEM, REPEAT_TEMPLATE


class RandomText(AdaptiveAttack):
    name = "random_text"
    baseline = True
    uses_llm = True

    @classmethod
    def work(cls, params):
        return 60.0 + 300.0, 1.0, 400.0, 0.6 * params["max_tokens"]  # one ~50-word paragraph per query

    def propose(self, n: int) -> list[Proposal]:
        messages = [{"role": "system", "content": RANDOM_TEXT_SYSTEM}, {"role": "user", "content": RANDOM_TEXT_PROMPT}]
        seeds = [int(s) for s in self.rng.integers(0, 2**31 - 1, size=n)]
        answers = self.tools.chat([messages] * n, self.params["max_tokens"], self.params["temperature"], seeds=seeds)
        return [
            Proposal(
                REPEAT_TEMPLATE.replace("<info>", a["text"].strip()),
                step="random",
                attacker_prompt_tokens=int(a["prompt_tokens"]),
                attacker_completion_tokens=int(a["completion_tokens"]),
            )
            for a in answers
        ]
