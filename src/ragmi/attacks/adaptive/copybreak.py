"""CopyBreak, the feedback-guided agent attack of RAG-Thief (arXiv 2411.14110), as the
knowledge-extraction benchmark runs it (Qi et al., KDD 2026, ``attacks/copybreak.py`` at commit 68ae0ac8;
its prompts: :mod:`ragmi.attacks.adaptive.prompts_llm`; docs/provenance.md#extraction-campaigns).

Every query is the benchmark's CopyBreak repeat command (``prompts/copybreak/attack_template.txt``)
with the attacker's information in place of ``<info>``.  The information comes from one of two steps:

* **explore**: the attacker LLM writes a random paragraph "semantically distinct from" a sample of up
  to 50 extracted chunks (``explore_template.txt``, ``explore_temperature``).  While some extracted
  chunk is still unexploited, it is asked up to ``iterations`` times and the first paragraph whose
  largest cosine with the extracted chunks (the attacker's embedder) is below ``sim_thresh`` is kept,
  else the least similar one; the first query, and any exploration while nothing is left unexploited,
  keeps the first paragraph.
* **exploit**: the next continuation waiting in the queue; when the queue is empty, an unexploited
  extracted chunk (drawn at random) becomes the anchor, the LLM writes ``num_reasons`` forward and
  ``num_reasons`` backward continuations of it (``exploit_template.txt``, ``exploit_temperature``), the
  numbered list is parsed into the queue and the first of it is sent.

Which step (the benchmark's ``exchange_rate`` rule): query 0 explores; afterwards an ``exchange_rate``
below 1 is the probability of exploring (a draw per query), and a rate of 1 or more explores when
``query_index % int(exchange_rate) == 0`` or no extracted chunk is unexploited, and exploits otherwise.
Every new piece of context an answer repeats (:func:`ragmi.attacks.adaptive.answers.segments`) joins
the extracted and the unexploited chunks.

Cost: each query carries the tokens of the attacker-LLM calls made to write it (all the tries of an
exploration; the call that wrote a list of continuations goes to the first query sent from it, the
rest of the list cost nothing more).

Departures from the benchmark:

* prompts are filled with :meth:`str.format`, without the ``"Human: "`` prefix langchain's
  ``ChatPromptTemplate`` adds (:mod:`~ragmi.attacks.adaptive.prompts_llm`);
* the LLM's text is stripped of surrounding whitespace before use;
* an extracted chunk is new when its text is new (the benchmark: when its embedding differs from
  every extracted one's, which also merges texts an uncased embedder cannot tell apart);
* randomness (the exchange draw, the 50-chunk sample, the anchor draw, the LLM's sampling seeds) comes
  from the campaign's generator, the extracted chunks are kept in the order found (the benchmark keeps
  Python sets, whose order varies from run to run), so a campaign reproduces and resumes exactly;
* where the benchmark would exploit with nothing to exploit (a rate below 1 drawing "exploit" while
  the queue is empty and nothing is unexploited, or every anchor's list parsing to nothing), it stops
  with an error; ragmi explores instead (``note.fallback``);
* ``explore_max_tokens`` (256) and ``exploit_max_tokens`` (512) cap the LLM's answers: ragmi's
  values (the benchmark leaves the length to the API's default);
* the answers are read in rounds of the campaign's ``batch`` (the benchmark reads each answer before
  writing the next query; ``batch: 1`` is its setting).
"""

from __future__ import annotations

import re

import numpy as np

from .answers import segments
from .base import AdaptiveAttack, Proposal
from .embedding_space import AttackerEmbedder
from .prompts_llm import COPYBREAK_ATTACK_TEMPLATE, COPYBREAK_EXPLOIT_TEMPLATE, COPYBREAK_EXPLORE_TEMPLATE

EXPLORE_SAMPLE = 50  # extracted chunks shown to the explorer at most (the benchmark: 50)
_ITEM = re.compile(r"\n(?=\d+\.\s)")
_NUMBER = re.compile(r"^\d+\.\s*")


def parse_numbered(text: str) -> list[str]:
    """The items of a numbered list ``1. ...\\n2. ...`` (the benchmark's ``_parse_exploit_response``:
    text before the first number is the first item's)."""
    items = (_NUMBER.sub("", part).strip() for part in _ITEM.split(text.strip()))
    return [x for x in items if x]


class CopyBreak(AdaptiveAttack):
    name = "copybreak"
    uses_llm = True
    embedder_param = "embedder"
    state_keys = ("query_index", "extracted", "unexploited", "queue")

    @classmethod
    def work(cls, params):
        # the template and a ~50-word paragraph or continuation; exploring asks up to `iterations` paragraphs
        # (rough: one to three on average), each prompt carrying up to 50 extracted chunks
        return 700.0 + 300.0, 2.0, 3000.0, 0.6 * params["explore_max_tokens"]

    def start(self, tools) -> None:
        super().start(tools)
        self.embedder = AttackerEmbedder(self.params["embedder"])
        self.query_index = 0  # the index of the next query (the exchange rule)
        self.extracted: list[list] = []  # [text, embedding] of every distinct chunk extracted, in order found
        self.unexploited: list[str] = []  # extracted chunks not yet used as an anchor
        self.queue: list[list] = []  # [continuation, anchor's index in extracted] waiting to be sent

    # --- the attacker LLM ------------------------------------------------------------------------------
    def _proposal(self, info: str, step: str, cost: list[int], note: dict) -> Proposal:
        return Proposal(
            COPYBREAK_ATTACK_TEMPLATE.replace("<info>", info),
            step=step,
            attacker_prompt_tokens=cost[0],
            attacker_completion_tokens=cost[1],
            note=note,
        )

    # --- the two steps ---------------------------------------------------------------------------------
    def _explore(self, first: bool = False, cost: list[int] | None = None, note: dict | None = None) -> Proposal:
        cost = cost or [0, 0]
        note = dict(note or {})
        chunks = [t for t, _ in self.extracted]
        if len(chunks) > EXPLORE_SAMPLE:
            chunks = [chunks[int(i)] for i in self.rng.choice(len(chunks), EXPLORE_SAMPLE, replace=False)]
        prompt = COPYBREAK_EXPLORE_TEMPLATE.format(context="\n".join(chunks))
        max_tokens, temperature = self.params["explore_max_tokens"], self.params["explore_temperature"]
        if first or not self.unexploited:
            info, pt, ct = self.chat(prompt, max_tokens, temperature)
            return self._proposal(info, "explore", [cost[0] + pt, cost[1] + ct], {**note, "tries": 1})
        space = np.array([e for _, e in self.extracted], dtype=np.float64)
        best, best_sim, tries = "", np.inf, 0
        for _ in range(self.params["iterations"]):
            info, pt, ct = self.chat(prompt, max_tokens, temperature)
            cost = [cost[0] + pt, cost[1] + ct]
            tries += 1
            sim = float(np.max(space @ self.embedder.embed([info])[0].astype(np.float64)))
            if sim < self.params["sim_thresh"]:
                best, best_sim = info, sim
                break
            if sim < best_sim:
                best, best_sim = info, sim
        return self._proposal(best, "explore", cost, {**note, "tries": tries, "max_cosine": round(best_sim, 4)})

    def _exploit(self) -> Proposal:
        cost = [0, 0]
        while not self.queue:
            if not self.unexploited:  # nothing to exploit: the benchmark fails here, ragmi explores
                return self._explore(cost=cost, note={"fallback": True})
            anchor = self.unexploited.pop(int(self.rng.integers(len(self.unexploited))))
            k = self.params["num_reasons"]
            prompt = COPYBREAK_EXPLOIT_TEMPLATE.format(num=k, num_total=2 * k, num_tokens=k * 50, chunk=anchor)
            text, pt, ct = self.chat(prompt, self.params["exploit_max_tokens"], self.params["exploit_temperature"])
            cost = [cost[0] + pt, cost[1] + ct]
            where = next(i for i, (t, _) in enumerate(self.extracted) if t == anchor)
            self.queue += [[c, where] for c in parse_numbered(text)]
        info, where = self.queue.pop(0)
        return self._proposal(info, "exploit", cost, {"anchor": where, "queued": len(self.queue)})

    # --- the campaign ----------------------------------------------------------------------------------
    def _explores(self, index: int) -> bool:
        rate = self.params["exchange_rate"]
        if rate < 1:
            return bool(self.rng.random() < rate)
        return index % int(rate) == 0 or not self.unexploited

    def propose(self, n: int) -> list[Proposal]:
        out = []
        for _ in range(n):
            i = self.query_index
            if i == 0:
                out.append(self._explore(first=True))
            else:
                out.append(self._explore() if self._explores(i) else self._exploit())
            self.query_index = i + 1
        return out

    def observe(self, queries: list[str], answers: list[str]) -> None:
        seen = {t for t, _ in self.extracted}
        pieces = list(dict.fromkeys(p for a in answers for p in segments(a) if p not in seen))
        if pieces:
            vecs = self.embedder.embed(pieces)
            self.extracted += [[p, [float(x) for x in v]] for p, v in zip(pieces, vecs, strict=True)]
            self.unexploited += pieces
