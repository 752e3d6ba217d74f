"""Post-retrieval entity-relation extraction (DCMI §6 "Post-retrieval Entity-relation Extraction"):
the defender LLM rewrites every retrieved document into knowledge triples before generation, so the
generator never sees the document's wording.

DCMI's own prompt is not published (GPT-3.5, prompt untold).  Stand-in: FlashRAG's ``kg_refiner``
triple-extraction prompt (the framework DCMI's code is built on), verbatim system and user turns, three
exemplars, 512 tokens, and its parser (``<head; relation; tail>``, split on the last two ``;``).
FlashRAG picks the three exemplars nearest to each document with an E5 encoder; the defender context
has no encoder, so ragmi always uses the first three HotpotQA exemplars.  The document title is the
document's first line (FlashRAG's own convention for its ``contents`` field) or empty
(``title: none``).  A document whose answer has no parseable triple becomes an empty text by default
(``on_parse_failure: empty``; ``keep`` keeps it).  docs/provenance.md#entity_triples
"""

from __future__ import annotations

import re

from ._common import CONTEXT_DOWNSTREAM, CountingDefense

SYSTEM_PROMPT = (
    "Given a title and a text, extract all the knowledge triples in the form of <title; relation; tail entity>, "
    "where title is the provided title, tail entity is a phrase in the text and relation denotes a description of "
    "the relation between the title and the tail entity. \n\nThe followings are some examples: \n\n{examplars}"
)
USER_PROMPT = "Title: {title}\nText: {text}\nKnowledge Triples: "
EXEMPLAR = "Title: {title}\nText: {text}\nKnowledge Triples: {triples}"

# FlashRAG flashrag/prompt/trace_examplars.py, TRIPLE_EXAMPLARS_HOTPOTQA[0:3], verbatim.
EXEMPLARS = (
    {
        "title": "Heinrich von B\u00fclow (Grotekop)",
        "text": "Heinrich von B\u00fclow also known as Big Top (Grotekop) was a knight born in the middle of the "
        "fourteenth century. He died either before 1395 or during 1415. He prospered as a warrior-supporter "
        "of Prince Albrecht of Mecklenburg (and of Sweden). Outside Mecklenberg, Heinrich Grotekop is still "
        "remembered in many quarters as an archetypal robber baron on account of his appetite for feuding.",
        "triples": "<Heinrich von B\u00fclow (Grotekop); also known as; Big Top (Grotekop)>\n"
        "<Heinrich von B\u00fclow (Grotekop); born in; middle of the fourteenth century>\n"
        "<Heinrich von B\u00fclow (Grotekop); died; before 1395 or during 1415>\n"
        "<Heinrich von B\u00fclow (Grotekop); occupation; warrior-supporter>\n"
        "<Heinrich von B\u00fclow (Grotekop); supported; Prince Albrecht of Mecklenburg (and of Sweden)>\n"
        "<Heinrich von B\u00fclow (Grotekop); remembered as; archetypal robber baron>\n"
        "<Heinrich von B\u00fclow (Grotekop); characterized by; appetite for feuding>",
    },
    {
        "title": "All the Way (Craig David song)",
        "text": '"All the Way" is the first single released by the British singer Craig David from his third album '
        '"The Story Goes...". It was the first single he released with new label Warner Bros. Records after '
        'Wildstar Records went bankrupt. After missing the top ten with previous singles "World Filled with '
        'Love" and "You Don\'t Miss Your Water (\'Til the Well Runs Dry)", "All The Way" returned David to '
        'the top three. It was the highest-charting single from "The Story Goes..." but not the '
        "biggest-selling as \"Don't Love You No More (I'm Sorry)\" spent over double the amount of weeks "
        "inside the UK top 75. The music video became the sixth Craig David video directed by Max & Dania.",
        "triples": "<All the Way (Craig David song); first single from the album; The Story Goes...>\n"
        "<All the Way (Craig David song); released by; British singer Craig David>\n"
        "<All the Way (Craig David song); record label; Warner Bros. Records>\n"
        "<All the Way (Craig David song); previous record label; Wildstar Records>\n"
        "<All the Way (Craig David song); chart performance; returned to top three>\n"
        "<All the Way (Craig David song); highest-charting single from; The Story Goes...>\n"
        "<All the Way (Craig David song); not the biggest-selling as; Don't Love You No More (I'm Sorry)>\n"
        "<All the Way (Craig David song); director of the music video; Max & Dania>",
    },
    {
        "title": "Chuck Essegian",
        "text": 'Charles Abraham "Chuck" Essegian (born August 9, 1931) is an American former professional baseball '
        "left fielder. He played in Major League Baseball (MLB) the Philadelphia Phillies, St. Louis "
        "Cardinals, Los Angeles Dodgers, Baltimore Orioles, Kansas City Athletics, and Cleveland Indians. He "
        "also played one season in Nippon Professional Baseball (NPB) for the Kintetsu Buffaloes.",
        "triples": '<Chuck Essegian; full name; Charles Abraham "Chuck" Essegian>\n'
        "<Chuck Essegian; date of birth; August 9, 1931>\n"
        "<Chuck Essegian; nationality; American>\n"
        "<Chuck Essegian; occupation; former professional baseball left fielder>\n"
        "<Chuck Essegian; played in the league; Major League Baseball (MLB)>\n"
        "<Chuck Essegian; played for the teams in MLB; Philadelphia Phillies, St. Louis Cardinals, Los "
        "Angeles Dodgers, Baltimore Orioles, Kansas City Athletics, and Cleveland Indians>\n"
        "<Chuck Essegian; played one season in the league; Nippon Professional Baseball (NPB)>\n"
        "<Chuck Essegian; played for the teams in NPB; Kintetsu Buffaloes>",
    },
)

_TRIPLE = re.compile(r"<([^>]*)>")


def system_prompt() -> str:
    examplars = "\n\n".join(EXEMPLAR.format(**e) for e in EXEMPLARS)
    return SYSTEM_PROMPT.replace("{examplars}", examplars)


def split_title(doc: str, mode: str) -> tuple[str, str]:
    """(title, text): with ``first_line`` the first line is the title (a one-line document has none)."""
    if mode == "first_line" and "\n" in doc.strip():
        title, text = doc.strip().split("\n", 1)
        return title.strip(), text.strip()
    return "", doc.strip()


def parse_triples(answer: str) -> list[tuple[str, str, str]]:
    """FlashRAG's parser: every ``<...>`` split on its last two ``;``; other pieces are skipped."""
    out = []
    for inner in _TRIPLE.findall(answer or ""):
        pieces = inner.rsplit(";", 2)
        if len(pieces) == 3 and all(p.strip() for p in pieces):
            out.append(tuple(p.strip() for p in pieces))
    return out


def render_triples(triples) -> str:
    return "\n".join(f"<{h}; {r}; {t}>" for h, r, t in triples)


class EntityTriples(CountingDefense):
    kind = "entity_triples"
    hooks = ("content",)
    channels = CONTEXT_DOWNSTREAM
    vocabulary = ()
    needs_llm = True
    source = (
        "DCMI §6 Post-retrieval Entity-relation Extraction; prompt stand-in: FlashRAG kg_refiner "
        "(3 exemplars, 512 tokens)"
    )
    chosen = {
        "prompt": "FlashRAG kg_refiner triple extraction (DCMI's GPT-3.5 prompt is unpublished)",
        "exemplars": "the first three HotpotQA exemplars, fixed (FlashRAG picks the 3 nearest by E5)",
        "title": "params.title: the document's first line (FlashRAG's convention) or none",
        "no parseable triple": "params.on_parse_failure (default empty: the document's text never reaches "
        "the generator)",
    }

    def __init__(self, name, params):
        super().__init__(name, params)
        self._cache: dict[str, str] = {}  # document text -> its triples text

    def _rewrite(self, texts: list[str], ctx) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if not todo:
            return
        system = system_prompt()
        prompts = []
        for doc in todo:
            title, text = split_title(doc, self.params["title"])
            user = USER_PROMPT.replace("{title}", title).replace("{text}", text)
            prompts.append([{"role": "system", "content": system}, {"role": "user", "content": user}])
        answers = ctx.chat(prompts, self.params["max_tokens"], self.params["temperature"])
        if len(answers) != len(todo):
            raise RuntimeError(f"defense {self.name}: {len(answers)} answers for {len(todo)} documents")
        for doc, answer in zip(todo, answers):
            triples = parse_triples(answer)
            self.stats["documents"] += 1
            if triples:
                self._cache[doc] = render_triples(triples)
            else:
                self.stats["parse_failures"] += 1
                self._cache[doc] = doc if self.params["on_parse_failure"] == "keep" else ""

    def on_content(self, states, ctx):
        states = [s for s in states if s.refusal is None]  # a refused query's documents are never used
        self._rewrite([d for s in states for d in s.docs], ctx)
        for s in states:
            s.docs = [self._cache[d] for d in s.docs]
