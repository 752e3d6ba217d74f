"""RAG templates: how retrieved documents and the user prompt become chat messages.

Each template is a (system, user) pair of format strings with ``{context}`` and ``{question}``
placeholders; ``system`` may be ``None``.  Retrieved documents are joined with the template's
``doc_separator`` (a blank line unless its source joins them otherwise: ``ia`` a newline, ``dcmi``
nothing at all, as the base prompt of DCMI's FlashRAG fork does).
Each template's source (a paper figure or the authors' code) and any deviation from it:
docs/provenance.md#templates.

**Prompt order and prefix reuse.**  vLLM's prefix cache skips the part of a prompt that an earlier
prompt already computed, from the first token on; ragmi sends the requests of a shard sorted by their
prompt text (``ragmi.rag.generators.prefix_order``), so that queries retrieving the same documents
follow each other.  That helps only where the context comes before the question:

* ``ia``, ``dcmi``, ``menta``: fixed instructions, then the context, then the question — queries
  with the same retrieved documents share the whole prefix up to the question;
* ``rag_mia`` and ``mba`` put the question first, as their papers print them (RAG-MIA Fig. 1 asks the
  question before and after the context; MBA Fig. 5 gives "the text" — the masked document — before
  "the context").  Their prompts share only the fixed instructions before ``{question}``; they are
  kept as published, not reordered (the prompt order changes what the model answers).

:attr:`Template.question_first` says which is which; docs/provenance.md#templates records it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class Template:
    name: str
    user: str
    system: str | None = None
    doc_separator: str = "\n\n"

    @property
    def question_first(self) -> bool:
        """True when the question comes before the retrieved context in the prompt (system message
        first, then user message), so that queries on the same documents share little prefix."""
        text = (self.system or "") + "\x00" + self.user
        return text.index("{question}") < text.index("{context}")

    def messages(self, question: str, docs: list[str]) -> list[dict]:
        context = self.doc_separator.join(docs)
        msgs = []
        if self.system is not None:
            msgs.append({"role": "system", "content": self.system.format(context=context, question=question)})
        msgs.append({"role": "user", "content": self.user.format(context=context, question=question)})
        return msgs


TEMPLATES = {
    "rag_mia": Template(
        name="rag_mia",
        user=(
            "Please answer the question using the context provided. If the question is unanswerable, "
            'say "unanswerable".\nQuestion: {question}.\nContext:\n{context}\nQuestion: {question}'
        ),
    ),
    "ia": Template(
        name="ia",
        user=(
            "You are a helpful assistant, below is a query from a user and some relevant contexts. "
            "Answer the question given the information in those contexts. Your answer should be short "
            'and concise. If you cannot find the answer to the question, just say "I don\'t know". '
            "\n\nContexts: {context} \n\nQuery: {question} \n\nAnswer:"
        ),
        doc_separator="\n",
    ),
    # The base prompt of DCMI's FlashRAG fork (Xinyu140203/RAG_MIA, flashrag/prompt/base_prompt.py,
    # PromptTemplate.base_system_prompt / base_user_prompt), not upstream FlashRAG's default prompt.
    # Its format_reference concatenates the retrieved documents' "contents" with no separator, no
    # numbering and no title line of its own; ragmi's document text stands for "contents".
    "dcmi": Template(
        name="dcmi",
        system="context:{context}\nAnswer the question based on the provided context.",
        user="{question}",
        doc_separator="",
    ),
    "menta": Template(
        name="menta",
        system=(
            "You MUST respond with EXACTLY 'I don't know' (nothing else) if the context does not provide "
            "enough information. Refusing to answer is ALWAYS better than being uncertain or inaccurate.\n\n"
            "Answer the question based ONLY on the given context. If the answer is known, respond with a clear "
            "answer (1-2 sentences) and a brief explanation. "
        ),
        user=(
            "Based on the following context, answer the question. If the context does not contain enough "
            "information to answer the question, respond only with 'I don't know'.\n\nContext:\n{context}"
            "\n\nQuestion: {question}\n\nAnswer:"
        ),
    ),
    "mba": Template(
        name="mba",
        user=(
            "You are given a text with several missing words or phrases, represented by placeholders in the "
            "format [Mask_i], where i is a unique number for each blank. Your task is to accurately fill in each "
            "placeholder with the most appropriate word or phrase based on the context of the sentence. Provide "
            'your answers in the specified format: "[Mask_i]: answer_i\\n" for each mask, where "answer_i" shall '
            "be a word or phrase. You should strictly match the missing word or phrase based on the original "
            "context, without making any modifications, corrections, or substitutions.\n"
            "The text is: {question}\n"
            "The context is: {context}"
        ),
    ),
}


def get_template(name: str) -> Template:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ConfigError(f"unknown RAG template {name!r}; allowed: {', '.join(sorted(TEMPLATES))}") from None
