"""IKEA, the implicit knowledge-extraction attack (ICLR 2026, arXiv 2505.15420), as the
knowledge-extraction benchmark runs it (Qi et al., KDD 2026, ``attacks/ikea.py`` and the helpers of
``tools/attacks.py`` at commit 68ae0ac8; its prompts: :mod:`ragmi.attacks.adaptive.prompts_llm`;
docs/provenance.md#extraction-campaigns).

IKEA never asks the target to repeat its context: it asks natural questions about the knowledge base's
topic and keeps the answers.

* **Anchor concepts** (once, before the first query): the attacker LLM lists ``3 × num_anchors``
  anchor words of the ``topic`` as JSON (``anchor_gen_template.txt``); the words whose cosine with the
  topic word (the attacker's embedder) is at least ``thresh_sim_topic`` are kept, and ``num_anchors``
  of them are chosen greedily: first the one most similar to the topic, then each time the candidate
  whose lowest cosine with the chosen ones is the lowest (the benchmark's rule, kept as written).
  Chosen anchors more similar to each other than ``thresh_dissim_anchor`` are only logged, as there.
* **Queries**: for an anchor word, the LLM writes a question (``anchor_query_gen_template.txt``) up to
  ``query_gen_iterations`` times; the first question whose cosine with the anchor word reaches
  ``thresh_q_anchor`` is sent, else the most similar one.
* **Experience reflection** (sampling mode): the anchor is drawn from ``softmax(sample_temperature ×
  score)``; every score starts at 0, and an answer that is a refusal lowers by ``penalty_refusal`` the
  score of every anchor whose cosine with the refused question is at least ``thresh_outlier``.
* **Trust-region directed mutation** (mutation mode, after a sampled question that was answered): the
  LLM lists 50 anchor words from the last question ``q`` and its answer ``y``
  (``anchor_mutate.txt``); of those with ``cos(w, y) >= gamma × cos(q, y)`` the one least similar to
  ``q`` is the anchor of the next question (it does not join the anchors).  No word in the trust region:
  back to sampling.  After a mutated question's answer, mutation stops when some question-answer pair
  read so far has an answer with cosine ``>= thresh_stop_y`` to the new answer or a question with
  cosine ``>= thresh_stop_q`` to the new question.  The benchmark's pool of pairs includes the new pair
  itself, so the check always stops the mutation: sampled and mutated questions alternate (kept as
  written).  A refused mutated question is not penalised (as there).

Every LLM call samples at ``temperature`` (the benchmark: 0.5, fixed) with its own seed drawn from the
campaign's generator.  Cost: each query carries the tokens of the LLM calls made to write it (the
anchor generation goes to the campaign's first query).

Departures from the benchmark:

* refusals: the benchmark asks gpt-4o-mini whether an answer is a refusal (``detect_refusal``);
  ragmi uses :func:`ragmi.attacks.adaptive.answers.is_refusal` (the answer's opening), so no answer
  leaves the machine for it;
* ``topic`` has no default (the benchmark's default is the placeholder word ``"default"``; the topic
  is the knowledge base's domain): the schema requires it (validation names the setting), and an empty one stops the campaign at its start;
* anchor-word parsing (``parse_anchor_words``): the curly quotes “ ” the prompt's own example uses are
  read as straight quotes before parsing (the benchmark's parser only reads straight quotes, so a model
  that copies the example's quotes yields no word), empty words are dropped, and the words keep the
  order written (the benchmark's ``list(set(...))`` order varies from run to run and decides ties);
* if no anchor word passes ``thresh_sim_topic`` the benchmark fails at its first draw; ragmi asks the
  LLM again (new seed), at most :data:`ANCHOR_ATTEMPTS` times, then stops with a
  :class:`~ragmi.errors.ConfigError` naming the threshold and the topic;
* the anchor draws and the LLM's sampling seeds come from the campaign's generator (the benchmark:
  torch's global generator and the API's sampling), so a campaign reproduces and resumes exactly;
* the LLM's text is stripped of surrounding whitespace (a question is sent as stripped);
  ``anchor_max_tokens`` (512) and ``query_max_tokens`` (128) cap its answers: ragmi's values (the
  benchmark leaves the length to the API's default);
* the answers are read in rounds of the campaign's ``batch`` (the benchmark reads each answer before
  writing the next question; ``batch: 1`` is its setting): the questions of a round are all written in
  the mode the last answer read left (a failed mutation switching the rest of the round to sampling,
  as there), mutations mutate the last question-answer pair read, and the answers are then read in
  order, each in the mode its question was written in.

Not reproduced: the benchmark's arguments ``thresh_irrelevant``, ``penalty_irrelevant`` and
``thresh_qy_sim`` belong to an irrelevance penalty that its ``parse_response`` has commented out;
they have no effect there and are not parameters here.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ...errors import ConfigError
from .answers import is_refusal
from .base import AdaptiveAttack, Proposal
from .embedding_space import AttackerEmbedder
from .prompts_llm import IKEA_ANCHOR_GEN_TEMPLATE, IKEA_ANCHOR_MUTATE_TEMPLATE, IKEA_ANCHOR_QUERY_TEMPLATE

ANCHOR_ATTEMPTS = 5  # anchor generations asked at most before giving up (ragmi's; the benchmark: 1)
MUTATION_CANDIDATES = 50  # anchor words asked per mutation (the benchmark: 50)
_CURLY = str.maketrans({"\u201c": '"', "\u201d": '"'})
_JSON_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_ANCHOR_LIST = re.compile(r'"anchor words"\s*:\s*\[(.*?)\]', re.DOTALL)
_QUOTED = re.compile(r'"(.*?)"')


def cos_sim(a, b) -> float:
    """The benchmark's cosine (``tools/attacks.py``): ``a·b / (|a||b| + 1e-8)``."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-8))


def _unique(words) -> list[str]:
    return list(dict.fromkeys(w for w in words if w))


def parse_anchor_words(raw: str) -> list[str]:
    """The anchor words of an LLM answer (the benchmark's ``parse_anchor_words``): the first ``{...}``
    read as JSON when it has the key ``anchor words``, else every quoted string of every ``"anchor
    words": [...]`` list (80 characters at most).  Departures in the module docstring."""
    raw = str(raw or "").translate(_CURLY)
    m = _JSON_OBJECT.search(raw)
    if m:
        try:
            obj = json.loads(m.group(0))
            if "anchor words" in obj:
                return _unique(w.strip() for w in obj["anchor words"] if isinstance(w, str))
        except (ValueError, TypeError):
            pass
    words = [w for body in _ANCHOR_LIST.findall(raw) for w in _QUOTED.findall(body)]
    return _unique(w.strip() for w in words if w and len(w.strip()) <= 80)


class IKEA(AdaptiveAttack):
    name = "ikea"
    uses_llm = True
    embedder_param = "embedder"
    state_keys = ("anchors", "anchor_scores", "mut_flag", "pool", "pending")

    @classmethod
    def work(cls, params):
        return 150.0, 2.0, 800.0, 0.5 * params["query_max_tokens"]  # a natural question; rough LLM cost

    def start(self, tools) -> None:
        super().start(tools)
        self.topic = self.required_topic("a word; the benchmark's topics are words such as 'medicine' or 'pokemon'")
        self.embedder = AttackerEmbedder(self.params["embedder"])
        self.anchors: list[list] = []  # [word, embedding] of the anchor concepts
        self.anchor_scores: list[float] = []  # their sampling scores (refusal penalties)
        self.mut_flag = 0  # 1: the next question mutates the last pair read
        self.pool: list[list] = []  # [question, answer, its embedding, the answer's embedding] read so far
        self.pending: list[int] = []  # the mode (1: mutated) of each question proposed and not yet read

    # --- tools -----------------------------------------------------------------------------------------
    def _chat(self, prompt: str, max_tokens: int) -> tuple[str, int, int]:
        return self.chat(prompt, max_tokens, self.params["temperature"])

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(list(texts)).astype(np.float64)

    # --- anchor concepts -------------------------------------------------------------------------------
    def _select_anchors(self, words: list[str], vecs: np.ndarray, topic_vec: np.ndarray) -> list[list]:
        cands = [(w, cos_sim(topic_vec, v), v) for w, v in zip(words, vecs, strict=True)]
        cands = [c for c in cands if c[1] >= self.params["thresh_sim_topic"]]
        selected: list[tuple] = []
        while len(selected) < self.params["num_anchors"] and cands:
            if not selected:
                cands.sort(key=lambda c: -c[1])  # stable: ties keep the order written
                selected.append(cands.pop(0))
                continue
            best, best_score = 0, -np.inf
            for i, (_, _, v) in enumerate(cands):
                score = 1.0 - min(cos_sim(v, s[2]) for s in selected)
                if score > best_score:
                    best, best_score = i, score
            selected.append(cands.pop(best))
        close = [
            (a[0], b[0])
            for i, a in enumerate(selected)
            for b in selected[i + 1 :]
            if cos_sim(a[2], b[2]) > self.params["thresh_dissim_anchor"]
        ]
        if close:
            self.log(f"ikea: anchors more similar than thresh_dissim_anchor: {close}")
        return [[w, [float(x) for x in v]] for w, _, v in selected]

    def _generate_anchors(self) -> list[int]:
        prompt = IKEA_ANCHOR_GEN_TEMPLATE.format(topic=self.topic, n=3 * self.params["num_anchors"])
        topic_vec = self._embed([self.topic])[0]
        cost, n_words = [0, 0], 0
        for _ in range(ANCHOR_ATTEMPTS):
            raw, pt, ct = self._chat(prompt, self.params["anchor_max_tokens"])
            cost = [cost[0] + pt, cost[1] + ct]
            words = parse_anchor_words(raw)
            n_words += len(words)
            if words:
                self.anchors = self._select_anchors(words, self._embed(words), topic_vec)
            if self.anchors:
                self.anchor_scores = [0.0] * len(self.anchors)
                self.log(f"ikea: anchors for topic {self.topic!r}: {[w for w, _ in self.anchors]}")
                return cost
        raise ConfigError(
            f"ikea: none of the {n_words} anchor words the attacker LLM wrote for topic {self.topic!r} in "
            f"{ANCHOR_ATTEMPTS} tries has a cosine of at least thresh_sim_topic "
            f"({self.params['thresh_sim_topic']}) with the topic: set campaigns.attacks.ikea.topic to a word "
            "of the knowledge base's domain, or lower campaigns.attacks.ikea.thresh_sim_topic"
        )

    def _sample_anchor(self) -> str:
        z = self.params["sample_temperature"] * np.asarray(self.anchor_scores, dtype=np.float64)
        p = np.exp(z - z.max())
        return self.anchors[int(self.rng.choice(len(self.anchors), p=p / p.sum()))][0]

    def _mutate(self) -> tuple[str | None, list[int]]:
        q, y, q_vec, y_vec = self.pool[-1]
        prompt = IKEA_ANCHOR_MUTATE_TEMPLATE.format(q=q, y=y, n=MUTATION_CANDIDATES)
        raw, pt, ct = self._chat(prompt, self.params["anchor_max_tokens"])
        words = parse_anchor_words(raw)
        if not words:
            return None, [pt, ct]
        floor = self.params["gamma"] * cos_sim(q_vec, y_vec)
        region = [(w, v) for w, v in zip(words, self._embed(words), strict=True) if cos_sim(v, y_vec) >= floor]
        best, best_sim = None, np.inf
        for w, v in region:
            s = cos_sim(v, q_vec)
            if s < best_sim:
                best, best_sim = w, s
        return best, [pt, ct]

    # --- questions -------------------------------------------------------------------------------------
    def _question(self, anchor: str) -> tuple[str, float, int, list[int]]:
        anchor_vec = self._embed([anchor])[0]
        prompt = IKEA_ANCHOR_QUERY_TEMPLATE.format(topic=self.topic, keyword=anchor)
        best, best_sim, cost, tries = "", -np.inf, [0, 0], 0
        for _ in range(self.params["query_gen_iterations"]):
            text, pt, ct = self._chat(prompt, self.params["query_max_tokens"])
            cost = [cost[0] + pt, cost[1] + ct]
            tries += 1
            sim = cos_sim(self._embed([text])[0], anchor_vec)
            if sim > best_sim:
                best, best_sim = text, sim
            if sim >= self.params["thresh_q_anchor"]:
                break
        return best, best_sim, tries, cost

    def propose(self, n: int) -> list[Proposal]:
        cost0 = self._generate_anchors() if not self.anchors else [0, 0]
        out = []
        for k in range(n):
            cost = list(cost0) if k == 0 else [0, 0]
            mode, anchor = self.mut_flag, None
            if mode == 1:
                anchor, c = self._mutate()
                cost = [cost[0] + c[0], cost[1] + c[1]]
                if anchor is None:  # no word in the trust region: back to sampling
                    self.mut_flag = mode = 0
            if anchor is None:
                anchor = self._sample_anchor()
            query, sim, tries, c = self._question(anchor)
            self.pending.append(mode)
            out.append(
                Proposal(
                    query,
                    step="mutate" if mode else "sample",
                    attacker_prompt_tokens=cost[0] + c[0],
                    attacker_completion_tokens=cost[1] + c[1],
                    note={"anchor": anchor, "cosine": round(sim, 4), "tries": tries},
                )
            )
        return out

    def observe(self, queries: list[str], answers: list[str]) -> None:
        modes = (self.pending + [self.mut_flag] * len(queries))[: len(queries)]
        self.pending = []
        vecs = self._embed(list(queries) + list(answers)) if queries else np.zeros((0, 1))
        for i, (q, y, mode) in enumerate(zip(queries, answers, modes, strict=True)):
            q_vec, y_vec = vecs[i], vecs[len(queries) + i]
            self.pool.append([q, y, [float(x) for x in q_vec], [float(x) for x in y_vec]])
            self.mut_flag = mode
            if mode == 1:  # a mutated question: stop when the pair is close to one read before (itself included)
                for _, _, hq, hy in self.pool:
                    if (
                        cos_sim(hy, y_vec) >= self.params["thresh_stop_y"]
                        or cos_sim(hq, q_vec) >= self.params["thresh_stop_q"]
                    ):
                        self.mut_flag = 0
                        break
            else:
                self.mut_flag = 1
                if is_refusal(y):
                    for j, (_, a_vec) in enumerate(self.anchors):
                        if cos_sim(a_vec, q_vec) >= self.params["thresh_outlier"]:
                            self.anchor_scores[j] -= self.params["penalty_refusal"]
                    self.mut_flag = 0
