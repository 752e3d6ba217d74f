"""RAGCrawler, the knowledge-graph-guided crawler attack (Yao et al., "Connect the Dots", arXiv
2601.15678, Sec. 5; docs/provenance.md#ragcrawler): the attacker keeps a knowledge graph of what the
answers revealed, estimates from it which entity a next query gains most from, and asks a natural
question about that entity.

* **KG-Constructor** (Sec. 5.2). Once, the attacker LLM names the topic's entity categories and relation
  types (the topic-specific prior, ``TOPIC_PRIOR``). Each answer is then read by an extraction pass and
  ``reflections`` reflection passes (``EXTRACT``, ``REFLECT``) into ``head | category | relation | tail |
  category`` triples. Their entities and relation phrases are merged into the graph: a name joins the
  entity (relation type) whose embedding's cosine with it exceeds ``merge_threshold``, else it is new.
  Each answer's new entities ΔE and new facts (edges) ΔR are recorded for the anchor of its query.
* **Strategy Scheduler** (Sec. 5.3). Every entity e gets the score
  ``α_t · EmpiricalPayoff(e) + β · GraphPrior(e)`` (Eq. 12):

  - ``EmpiricalPayoff(e) = ḡ_e + c · sqrt(log N / (n_e + 1))`` (Eq. 6), with ``c = ucb_c``, n_e the times e
    was the anchor, N all anchor selections, and ḡ_e the mean over e's answered rounds of
    ``ΔE_i / max ΔE + ΔR_i / max ΔR`` (Eq. 7), the maxima over the last ``window`` answered rounds; a
    round whose answer was a refusal, empty, or whose query was a duplicate counts ``-penalty`` instead
    (the feedback loop, Sec. 5.4, 3);
  - ``GraphPrior(e) = DegreeScore(e) + AdjScore(e)`` (Eq. 8): ``1 - deg(e) / (max deg + ε)`` (Eq. 9) and
    ``max_r Deficit(e, r)`` (Eq. 10), where ``Deficit(e, r)`` is 0 when e has a relation of type r and
    else the mean number of r-edges of the entities of e's category (Eq. 11).

  The anchor entity is drawn from a softmax over the ``top_k`` best scores (at ``softmax_temperature``).
  Its relation is the type of its largest deficit (Eq. 13) if that deficit exceeds the
  ``deficit_percentile``-th percentile of all current deficits (Eq. 14), else none.
* **Query Generator** (Sec. 5.4). With a relation, a relation-driven question (``RELATION_QUERY``);
  without one, a question from the anchor's known facts and the domain's relation types
  (``NEIGHBORHOOD_QUERY``). A question whose cosine with an earlier question reaches
  ``dedup_threshold`` is rewritten for a new anchor drawn from the same distribution, at most
  ``resample_trials`` times.

The paper's values: ``ucb_c`` 0.5 and ``dedup_threshold`` 0.8 (its Appendix 9.3), the 90th
percentile (Eq. 14). Everything else it leaves open, and ragmi chose it (the schema's descriptions say
which): the prompts (:mod:`ragmi.attacks.adaptive.prompts_ragcrawler`), ``top_k``, the softmax
temperature, α_t = t / (t + ``alpha_ramp``) ("gradually increases", Sec. 5.3), β, the window, the
penalty, the number of reflection passes and resample trials, the merge threshold, the LLM's
temperatures and length caps, and the initial query q0 (a question about the topic).

Departures, besides those choices:

* the score cache with lazy updates (Sec. 5.3, "Optimization") is not built: every score is recomputed
  for each anchor draw, which gives the same scores;
* when every resample trial is a duplicate, the paper declares convergence and stops; a ragmi campaign
  spends its whole budget, so the least similar of the trials is sent (``step`` ``converged``) and its
  round is penalised;
* the answers are read in rounds of the campaign's ``batch``: the graph is updated from a round's
  answers before the next round's first query is written (the paper reads each answer before writing
  the next query; ``batch: 1`` is its setting). The answers of the campaign's last round are never
  read, since no query follows them;
* refusals are judged by :func:`ragmi.attacks.adaptive.answers.is_refusal` (the answer's opening);
* a question the LLM wrote in quotes is sent without them (the 0.5B Qwen quotes some).

Every LLM call has its own seed from the campaign's generator, so a campaign reproduces and resumes
exactly. Cost: a query carries the tokens of the LLM calls made to write it; the first query of a
round also carries those spent reading the previous round's answers and, in the campaign's first
round, the topic prior.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from .answers import is_refusal
from .base import AdaptiveAttack, Proposal
from .embedding_space import AttackerEmbedder
from .prompts_ragcrawler import EXTRACT, INITIAL_QUERY, NEIGHBORHOOD_QUERY, REFLECT, RELATION_QUERY, TOPIC_PRIOR

EPS = 1e-8  # ε of Eq. 9
MAX_NAME = 100  # characters of an entity or relation name kept
FACTS_SHOWN = 10  # known facts of the anchor shown to the neighborhood prompt
SCHEMA_MAX = 10  # entity categories and relation types kept of the topic prior (the prompt asks for 5 to 10)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _norm(name: str) -> str:
    return " ".join(str(name).split()).casefold()


def parse_triples(raw: str) -> list[tuple[str, str, str, str, str]]:
    """The ``head | head category | relation | tail | tail category`` lines of an LLM answer (a line of
    three fields, ``head | relation | tail``, has no categories); bullets and numbering are dropped, and
    so are lines with an empty head, relation or tail and the echo of the format line."""
    out = []
    for line in str(raw or "").splitlines():
        fields = [f.strip().strip("\"'`") for f in _BULLET.sub("", line).split("|")]
        if len(fields) == 5:
            h, ht, r, t, tt = fields
        elif len(fields) == 3:
            (h, r, t), ht, tt = fields, "", ""
        else:
            continue
        if not (h and r and t) or (_norm(h), _norm(r)) == ("head", "relation"):
            continue
        out.append((h[:MAX_NAME], ht[:MAX_NAME], r[:MAX_NAME], t[:MAX_NAME], tt[:MAX_NAME]))
    return out


def parse_schema(raw: str) -> tuple[list[str], list[str]]:
    """The entity categories and relation types of the topic prior's JSON answer, the first
    :data:`SCHEMA_MAX` distinct ones of each (the prompt asks for 5 to 10).  An answer cut short (a
    small model repeating itself until its length cap) keeps the whole quoted entries of each list;
    none at all leaves the lists empty, and extraction then runs without preferred categories."""
    text = str(raw or "").replace("\u201c", '"').replace("\u201d", '"')
    obj = None
    m = _JSON_OBJECT.search(text)
    if m:
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            obj = None

    def words(key):
        if isinstance(obj, dict):
            vals = [str(v) for v in obj.get(key) or []]
        else:
            lst = re.search(rf'"{key}"\s*:\s*\[(.*?)(?:\]|$)', text, re.DOTALL)
            vals = re.findall(r'"([^"\n]*)"', lst.group(1)) if lst else []
        return list(dict.fromkeys(v.strip()[:MAX_NAME] for v in vals if v.strip()))[:SCHEMA_MAX]

    return words("entity_types"), words("relation_types")


class RAGCrawler(AdaptiveAttack):
    name = "ragcrawler"
    uses_llm = True
    embedder_param = "embedder"
    state_keys = (
        "schema",
        "entities",
        "rel_types",
        "edges",
        "selected",
        "rounds",
        "history",
        "inflight",
        "pending",
        "t",
    )

    @classmethod
    def work(cls, params):
        # a question; per query about 2 + reflections calls of the length of an answer and one short call
        calls = 2.0 + params["reflections"]
        return 150.0, calls, 1200.0, 0.5 * params["extract_max_tokens"]

    def start(self, tools) -> None:
        super().start(tools)
        self.topic = self.required_topic("the paper's attacker knows only the topic, e.g. medicine")
        self.embedder = AttackerEmbedder(self.params["embedder"])
        self.schema: list | None = None  # [entity categories, relation types] of the topic prior
        self.entities: list[list] = []  # [name, category, embedding]
        self.rel_types: list[list] = []  # [phrase, embedding]
        self.edges: list[list[int]] = []  # [head, relation type, tail] (indices)
        self.selected: list[int] = []  # n_e: times each entity was the anchor of a sent query
        self.rounds: list[list] = []  # per answer read: [anchor (-1: none), ΔE, ΔR, penalised]
        self.history: list[list[float]] = []  # embeddings of every query sent
        self.inflight: list[list] = []  # [anchor, converged] of the queries proposed and not yet answered
        self.pending: list[list] = []  # [query, answer, anchor, converged] answered and not yet read
        self.t = 0  # queries proposed

    # --- tools ---------------------------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(list(texts)).astype(np.float64)

    # --- KG-Constructor ----------------------------------------------------------------------------------
    def _prior(self) -> list[int]:
        raw, pt, ct = self.chat(
            TOPIC_PRIOR.format(topic=self.topic), self.params["prior_max_tokens"], self.params["extract_temperature"]
        )
        self.schema = list(parse_schema(raw))
        self.log(f"ragcrawler: topic prior for {self.topic!r}: {self.schema}")
        return [pt, ct]

    def _extract(self, text: str) -> tuple[list[tuple], list[int]]:
        ent = ", ".join(self.schema[0]) or "any"
        rel = ", ".join(self.schema[1]) or "any"
        raw, pt, ct = self.chat(
            EXTRACT.format(topic=self.topic, entity_types=ent, relation_types=rel, text=text),
            self.params["extract_max_tokens"],
            self.params["extract_temperature"],
        )
        triples, cost = parse_triples(raw), [pt, ct]
        for _ in range(self.params["reflections"]):
            shown = "\n".join(" | ".join(x) for x in triples) or "(none)"
            raw, pt, ct = self.chat(
                REFLECT.format(topic=self.topic, text=text, triples=shown),
                self.params["extract_max_tokens"],
                self.params["extract_temperature"],
            )
            cost = [cost[0] + pt, cost[1] + ct]
            triples += [x for x in parse_triples(raw) if x not in triples]
        return triples, cost

    def _match(self, table: list[list], vec_at: int, name: str, vec: np.ndarray) -> int | None:
        """The entry of ``table`` with the same name, else the one whose cosine with ``vec`` exceeds
        ``merge_threshold`` most, else None."""
        key = _norm(name)
        for i, row in enumerate(table):
            if _norm(row[0]) == key:
                return i
        if not table:
            return None
        sims = np.asarray([row[vec_at] for row in table], dtype=np.float64) @ vec
        best = int(np.argmax(sims))
        return best if sims[best] > self.params["merge_threshold"] else None

    def _merge(self, triples: list[tuple]) -> tuple[int, int]:
        """Merge ``triples`` into the graph; (new entities, new facts)."""
        names = list(dict.fromkeys(n for h, _, r, t, _ in triples for n in (h, t, r)))
        vecs = dict(zip(names, self._embed(names), strict=True)) if names else {}
        new_e, new_r = 0, 0
        known = {tuple(e) for e in self.edges}

        def entity(name: str, category: str) -> int:
            nonlocal new_e
            i = self._match(self.entities, 2, name, vecs[name])
            if i is None:
                self.entities.append([name, _norm(category) or "unknown", [float(x) for x in vecs[name]]])
                self.selected.append(0)
                new_e += 1
                i = len(self.entities) - 1
            return i

        for h, ht, r, t, tt in triples:
            hi, ti = entity(h, ht), entity(t, tt)
            ri = self._match(self.rel_types, 1, r, vecs[r])
            if ri is None:
                self.rel_types.append([r, [float(x) for x in vecs[r]]])
                ri = len(self.rel_types) - 1
            if hi != ti and (hi, ri, ti) not in known:
                known.add((hi, ri, ti))
                self.edges.append([hi, ri, ti])
                new_r += 1
        return new_e, new_r

    def _read_pending(self) -> list[int]:
        """Read the answers not read yet into the graph; the LLM tokens it took."""
        cost = [0, 0]
        for _query, answer, anchor, converged in self.pending:
            refused = not answer.strip() or is_refusal(answer)
            d_e = d_r = 0
            if not refused:
                triples, c = self._extract(answer)
                cost = [cost[0] + c[0], cost[1] + c[1]]
                d_e, d_r = self._merge(triples)
            self.rounds.append([int(anchor), d_e, d_r, int(refused or bool(converged))])
        self.pending = []
        return cost

    # --- Strategy Scheduler --------------------------------------------------------------------------------
    def _deficits(self) -> tuple[np.ndarray, np.ndarray]:
        """Deficit(e, r) for every entity and relation type (Eq. 11), and which (e, r) count (r not among
        e's edge types: Eq. 14's set)."""
        n_e, n_r = len(self.entities), max(1, len(self.rel_types))
        counts = np.zeros((n_e, n_r))
        for h, r, t in self.edges:
            counts[h, r] += 1
            counts[t, r] += 1
        has = counts > 0
        cats = [e[1] for e in self.entities]
        deficit = np.zeros((n_e, n_r))
        for cat in set(cats):
            rows = [i for i, c in enumerate(cats) if c == cat]
            deficit[rows] = counts[rows].mean(axis=0)
        return np.where(has, 0.0, deficit), ~has

    def _scores(self, deficit: np.ndarray) -> np.ndarray:
        p = self.params
        n = np.asarray(self.selected, dtype=np.float64)
        total = float(n.sum())
        recent = self.rounds[-p["window"] :]
        max_e = max((r[1] for r in recent), default=0)
        max_r = max((r[2] for r in recent), default=0)
        gain_sum, gain_n = np.zeros(len(self.entities)), np.zeros(len(self.entities))
        for anchor, d_e, d_r, penalised in self.rounds:
            if anchor < 0:
                continue
            g = -p["penalty"] if penalised else (d_e / max_e if max_e else 0.0) + (d_r / max_r if max_r else 0.0)
            gain_sum[anchor] += g
            gain_n[anchor] += 1
        g_bar = np.divide(gain_sum, gain_n, out=np.zeros_like(gain_sum), where=gain_n > 0)
        payoff = g_bar + p["ucb_c"] * np.sqrt(math.log(max(total, 1.0)) / (n + 1.0))
        degree = np.zeros(len(self.entities))
        for h, _, t in self.edges:
            degree[h] += 1
            degree[t] += 1
        prior = (1.0 - degree / (degree.max() + EPS)) + deficit.max(axis=1)
        alpha = self.t / (self.t + p["alpha_ramp"])
        return alpha * payoff + p["beta"] * prior

    def _draw(self, scores: np.ndarray) -> int:
        """An anchor entity from the softmax over the ``top_k`` best scores."""
        order = np.argsort(-scores, kind="stable")[: self.params["top_k"]]
        z = scores[order] / self.params["softmax_temperature"]
        w = np.exp(z - z.max())
        return int(order[int(self.rng.choice(len(order), p=w / w.sum()))])

    def _relation(self, e: int, deficit: np.ndarray, open_: np.ndarray) -> int | None:
        """Eq. 13-14: e's relation type of largest deficit, if it exceeds the percentile of all deficits."""
        if not self.rel_types or not open_[e].any():
            return None
        cand = np.where(open_[e], deficit[e], -np.inf)
        r = int(np.argmax(cand))
        cut = float(np.percentile(deficit[open_], self.params["deficit_percentile"]))
        return r if deficit[e, r] > cut else None

    # --- Query Generator ---------------------------------------------------------------------------------
    def _formulate(self, e: int, r: int | None) -> tuple[str, str, list[int]]:
        p = self.params
        if e < 0:
            prompt, step = INITIAL_QUERY.format(topic=self.topic), "initial"
        elif r is not None:
            name, cat = self.entities[e][:2]
            prompt = RELATION_QUERY.format(
                topic=self.topic, relation=self.rel_types[r][0], entity=name, entity_type=cat
            )
            step = "relation"
        else:
            name, cat = self.entities[e][:2]
            facts = [
                f"- {self.entities[h][0]} {self.rel_types[rr][0]} {self.entities[t][0]}"
                for h, rr, t in self.edges
                if e in (h, t)
            ][:FACTS_SHOWN]
            prompt = NEIGHBORHOOD_QUERY.format(
                topic=self.topic,
                entity=name,
                entity_type=cat,
                facts="\n".join(facts) or "- (nothing yet)",
                relation_types=", ".join(x[0] for x in self.rel_types) or ", ".join(self.schema[1]) or "any",
            )
            step = "neighborhood"
        text, pt, ct = self.chat(prompt, p["query_max_tokens"], p["query_temperature"])
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":  # a question written in quotes
            text = text[1:-1].strip()
        return text, step, [pt, ct]

    def _next(self, cost: list[int]) -> Proposal:
        p = self.params
        hist = np.asarray(self.history, dtype=np.float64)
        deficit, open_ = self._deficits() if self.entities else (None, None)
        scores = self._scores(deficit) if self.entities else None
        best = None  # (similarity, query, step, anchor, relation, vec)
        for _ in range(p["resample_trials"]):
            e = self._draw(scores) if self.entities else -1
            r = self._relation(e, deficit, open_) if e >= 0 else None
            text, step, c = self._formulate(e, r)
            cost = [cost[0] + c[0], cost[1] + c[1]]
            vec = self._embed([text])[0]
            sim = float((hist @ vec).max()) if len(hist) else -1.0
            if best is None or sim < best[0]:
                best = (sim, text, step, e, r, vec)
            if sim < p["dedup_threshold"]:
                break
        sim, text, step, e, r, vec = best
        converged = sim >= p["dedup_threshold"]
        if converged:
            self.log(f"ragcrawler: {p['resample_trials']} questions in a row repeat earlier ones (converged)")
        self.history.append([float(x) for x in vec])
        if e >= 0:
            self.selected[e] += 1
        self.inflight.append([e, int(converged)])
        self.t += 1
        note = {"anchor": self.entities[e][0] if e >= 0 else None, "max_cosine": round(sim, 4)}
        if r is not None:
            note["relation"] = self.rel_types[r][0]
        return Proposal(
            text,
            step="converged" if converged else step,
            attacker_prompt_tokens=cost[0],
            attacker_completion_tokens=cost[1],
            note=note,
        )

    def propose(self, n: int) -> list[Proposal]:
        cost = self._prior() if self.schema is None else [0, 0]
        c = self._read_pending()
        cost = [cost[0] + c[0], cost[1] + c[1]]
        out = []
        for k in range(n):
            out.append(self._next(cost if k == 0 else [0, 0]))
        return out

    def observe(self, queries: list[str], answers: list[str]) -> None:
        done, self.inflight = self.inflight[: len(queries)], self.inflight[len(queries) :]
        for q, a, (anchor, converged) in zip(queries, answers, done, strict=True):
            self.pending.append([q, a, anchor, converged])
