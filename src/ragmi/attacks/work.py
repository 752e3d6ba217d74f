"""What an attack sends per candidate document, declared by its class (``Attack.work``) and read by the
run's time estimate (``tools/eta.py``): the requests, their sizes and the answers they ask for, from the
attack's validated parameters and a typical document's length.  Each attack states it beside the code
that builds its queries (most build them from materials that exist only once a run has prepared them,
so the estimate cannot count them); ``tests/test_eta.py`` checks the counts and ``max_tokens`` against
every attack's ``build_queries``."""

from __future__ import annotations

from dataclasses import dataclass

# A retrieved document's characters per token (Qwen2.5's tokenizer on the compact synthetic
# conversations: names, numbers and e-mail addresses make 3.2 characters a token; tools/eta.py).
DOC_CHARS_PER_TOKEN = 3.2
HUMAN_TURN_SHARE = 0.52  # the patient's turn of a synthetic conversation (RAG-MIA's human_turn sample)


@dataclass
class AttackWork:
    """What one attack sends per candidate: ``queries`` requests of ``query_chars`` characters each
    (instructions and what they quote of the candidate), answers of ``answer_tokens`` tokens on average;
    ``unique``: the share of distinct requests (the same request is sent once); ``prepare``: the
    attacker-LLM requests per candidate before the queries exist, as (requests, prompt characters,
    answer tokens); ``rough``: the figures are a rough model (the estimate says so)."""

    queries: int
    query_chars: float
    answer_tokens: float
    max_tokens: int
    unique: float = 1.0
    prepare: tuple[float, float, float] | None = None
    rough: bool = False
