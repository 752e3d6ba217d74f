"""IRCoT (Trivedi et al., "Interleaving Retrieval with Chain-of-Thought Reasoning", ACL 2023), as
DCMI's fork of FlashRAG runs it (DCMI Table 8: IRCOT; docs/provenance.md#frameworks).

Per query: retrieve the top-k for the question; then, ``max_iter`` times (DCMI: 2), generate one
thought with the IRCoT prompt over the documents retrieved so far and the thoughts so far, stop when
the thought says "So the answer is:", otherwise retrieve the top-k for the thought and merge it into
the documents: each document keeps its best score over the retrievals, and the merged set is ordered
by score, best first.  DCMI's fork sorts the merged set *ascending* (``reverse=False``), so its
prompts list the least similar document first and a document that stays in the context moves; that
quirk is reproduced with ``ascending_sort: true`` (default false).

The response is the fork's ``pred``: the thoughts joined by spaces.  Its log-probability columns are
those of the thoughts, position after position (``token_logprobs`` and ``token_top_logprobs``
concatenated; ``first_token_logprobs`` the first thought's), so a gray-box attack that reads P(Yes)
at the first position that has a Yes or No reads, as the fork does, the first non-zero value over the
iterations.  ``prompt_tokens`` and ``completion_tokens`` add up every generation of the query, so the
cost columns count the extra calls; every call goes through the target's cached, batched generator
(one batch per iteration).

Hooks: the question runs through every hook as in Standard RAG; each thought used as a retrieval
query runs through the query and retrieval hooks (so a retrieval defense acts on every retrieval),
and every iteration's prompt through the content and template hooks; the output hook acts on the
joined answer.  The prompt is FlashRAG's IRCoT prompt (instruction and one demonstration in the
system turn, ``{reference}Question: {question}\\nThought:`` in the user turn, the previous thoughts
after it), not the target's template; documents are listed as ragmi holds them (``<title>\\n<text>``,
each followed by a blank line).
"""

from __future__ import annotations

from ...defenses.base import QueryState
from ..generators import make_request
from .base import Framework

ANSWER_MARK = "So the answer is:"
INSTRUCTION = (
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop reasoning "
    "across multiple documents. This task is illustrated through demonstrations, each consisting of a document "
    "set paired with a relevant question and its multi-hop reasoning thoughts. Your task is to generate one "
    "thought for current step, DON'T generate the whole thoughts at once! If you reach what you believe to be "
    'the final step, start with "So the answer is:".'
)
DEMO = (
    "Wikipedia Title: Kurram Garhi\nKurram Garhi is a small village located near the city of Bannu, which is the "
    "part of Khyber Pakhtunkhwa province of Pakistan. Its population is approximately 35000. Barren hills are "
    "near this village. This village is on the border of Kurram Agency. Other nearby villages are Peppal, "
    "Surwangi and Amandi Kala.\n\nWikipedia Title: 2001–02 UEFA Champions League second group stage\nEight "
    "winners and eight runners- up from the first group stage were drawn into four groups of four teams, each "
    "containing two group winners and two runners- up. Teams from the same country or from the same first round "
    "group could not be drawn together. The top two teams in each group advanced to the quarter- finals.\n\n"
    "Wikipedia Title: Satellite tournament\nA satellite tournament is either a minor tournament or event on a "
    "competitive sporting tour or one of a group of such tournaments that form a series played in the same "
    "country or region.\n\nWikipedia Title: Trojkrsti\nTrojkrsti is a village in Municipality of Prilep, "
    "Republic of Macedonia.\n\nWikipedia Title: Telephone numbers in Ascension Island\nCountry Code:+ 247< br> "
    "International Call Prefix: 00 Ascension Island does not share the same country code( +290) with the rest "
    "of St Helena.\n\nQuestion: Are both Kurram Garhi and Trojkrsti located in the same country?\n"
    "Thought: Kurram Garhi is located in the country of Pakistan. Trojkrsti is located in the country of "
    "Republic of Macedonia. Thus, they are not in the same country. So the answer is: no.\n\n"
)


def merge_retrieval(ids, scores, new_ids, new_scores, ascending: bool = False):
    """Merge a new retrieval into the documents so far: each document keeps its best score; the set
    is sorted by score (descending, or ascending as DCMI's fork does), ties in first-seen order."""
    best: dict = {}
    for d, s in list(zip(ids, scores)) + list(zip(new_ids, new_scores)):
        best[d] = max(best[d], float(s)) if d in best else float(s)
    order = sorted(best.items(), key=lambda kv: kv[1], reverse=not ascending)
    return [d for d, _ in order], [s for _, s in order]


def join_parts(parts: list[dict]) -> dict:
    """One response from the generations of one query (see the module docstring)."""
    return {
        "response_text": " ".join(p["response_text"] for p in parts),
        "first_token_logprobs": list(parts[0]["first_token_logprobs"]),
        "token_logprobs": [x for p in parts for x in p["token_logprobs"]],
        "token_top_logprobs": [x for p in parts for x in p["token_top_logprobs"]],
        "prompt_tokens": int(sum(p["prompt_tokens"] for p in parts)),
        "completion_tokens": int(sum(p["completion_tokens"] for p in parts)),
        "latency_s": float(sum(p["latency_s"] for p in parts)),
        "cached": all(bool(p.get("cached", False)) for p in parts),
    }


class IRCoT(Framework):
    name = "ircot"
    table_rank = 4
    source = "IRCoT (Trivedi et al. 2023) as in DCMI's FlashRAG fork, max_iter 2 (Table 8: IRCOT)"

    def __init__(self, params):
        super().__init__(params)
        self._thoughts: dict[str, list[str]] = {}
        self.stats = {"generations": 0, "retrievals": 0}

    def messages(self, rag, state: QueryState) -> list[dict]:
        reference = "".join(d + "\n\n" for d in state.docs)
        user = f"{reference}Question: {state.query}\nThought:"
        thoughts = self._thoughts.get(state.query_id, [])
        if thoughts:
            user += " " + " ".join(thoughts)
        return [{"role": "system", "content": f"{INSTRUCTION}\n\n{DEMO}"}, {"role": "user", "content": user}]

    def run(self, rag, states, ctx, max_tokens, top_logprobs) -> float:
        self._thoughts = {s.query_id: [] for s in states}
        retrieval_s = rag.prepare(states, ctx, until="template")
        parts: dict[int, list[dict]] = {i: [] for i in range(len(states))}
        active = [i for i, s in enumerate(states) if s.refusal is None]
        for it in range(self.params["max_iter"]):
            if not active:
                break
            if it > 0:  # the merged documents of the last round through the content and template hooks
                rag.prepare([states[i] for i in active], ctx, until="template", start="content")
            rag.fit([states[i] for i in active], [max_tokens[i] for i in active])
            requests = [
                make_request(states[i].messages, max_tokens[i], top_logprobs[i], rag.temperature, rag.seed)
                for i in active
            ]
            self.stats["generations"] += len(requests)
            for i, resp in zip(active, rag.generator.generate(requests)):
                parts[i].append(dict(resp))
                self._thoughts[states[i].query_id].append(resp["response_text"])
            go_on = [i for i in active if ANSWER_MARK not in parts[i][-1]["response_text"]]
            with_thought = [i for i in go_on if parts[i][-1]["response_text"].strip()]
            self.retrieve_thoughts([states[i] for i in with_thought], [parts[i][-1] for i in with_thought], rag, ctx)
            active = go_on
        for i, p in parts.items():
            if p:
                states[i].response = join_parts(p)
        self._thoughts = {}
        return retrieval_s

    def retrieve_thoughts(self, states, responses, rag, ctx) -> None:
        """Each thought as a retrieval query (through the query and retrieval hooks), merged in."""
        if not states:
            return
        subs = [
            QueryState(query_id=f"{s.query_id}#thought{len(self._thoughts[s.query_id])}", query=r["response_text"])
            for s, r in zip(states, responses)
        ]
        rag.prepare(subs, ctx, until="retrieval")
        self.stats["retrievals"] += len(subs)
        for s, sub in zip(states, subs):
            if sub.refusal is None:
                s.retrieved_ids, s.retrieval_scores = merge_retrieval(
                    s.retrieved_ids,
                    s.retrieval_scores,
                    sub.retrieved_ids,
                    sub.retrieval_scores,
                    ascending=self.params["ascending_sort"],
                )
