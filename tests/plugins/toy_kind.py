"""TEST-ONLY: a toy target kind, added to a copy of the workflow the way docs/architecture.md says a
target kind is added (this module, one line in ``ragmi.targets.REGISTRY`` and its schema entry: the
name in ``targets.<t>.kind``'s enum and its block ``targets.<t>.echo``: tests/plugin_tree.py).

An ``echo`` target does its own retrieval and generation (``own_pipeline``): it answers every query
with its block's ``answer``, then the query's first ``words`` words, and gives no log-probabilities.
Each fact its class declares is one a test can see read: the block (required, and refused on another
kind), ``check`` (an empty answer is refused), ``model_name`` (the metrics' model column),
``answers_logprobs`` (the gray-box variants skipped) and ``open`` (the generate job's system)."""

from __future__ import annotations

import contextlib

from ..errors import ConfigError
from .base import TargetKind


class EchoSystem:
    defenses: tuple = ()
    generator = None

    def __init__(self, answer: str, words: int):
        self.text, self.words = answer, words

    def answer(self, user_prompts, max_tokens, top_logprobs, query_ids=None) -> list[dict]:
        return [
            {
                "response_text": " ".join([self.text, *str(q).split()[: self.words]]),
                "first_token_logprobs": [],
                "token_logprobs": [],
                "token_top_logprobs": [],
                "prompt_tokens": len(str(q).split()),
                "completion_tokens": self.words + 1,
                "latency_s": 0.0,
                "cached": False,
                "retrieved_ids": None,
                "retrieval_scores": None,
                "retrieval_s": 0.0,
                "response_text_raw": self.text,
                "refused": False,
                "hook_trace": "[]",
                "n_docs_truncated": None,
                "chars_truncated": None,
                "answer_replaced": None,
            }
            for q in user_prompts
        ]


class EchoKind(TargetKind):
    name = "echo"
    block = "echo"
    own_pipeline = True

    def check(self, cfg, name, t):
        if not t["echo"]["answer"].strip():
            raise ConfigError(f"config key targets.{name}.echo.answer: must not be empty")

    def model_name(self, cfg, t):
        return f"echo:{t['echo']['answer']}"

    def answers_logprobs(self, t):
        return False

    def open(self, spec, inputs, log):
        log(f"echo target {spec.name}: answers {spec.target['echo']['answer']!r}")
        return contextlib.nullcontext(EchoSystem(spec.target["echo"]["answer"], spec.target["echo"]["words"]))
