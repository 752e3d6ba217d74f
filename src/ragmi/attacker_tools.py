"""The attacker's own tools, handed to attacks by the workflow (see ``ragmi.attacks.base``).

* ``chat``: the attacker LLM, any OpenAI-compatible endpoint named in ``attacker.generator`` (the
  local served model by default; a remote API only when the user configures one, its key read from
  the environment).  Answers are cached like the target's, so offline query generation never runs
  twice for the same prompt and settings.
* ``local_model_path``: local weights the attacker runs itself (MBA's proxy LM).
"""

from __future__ import annotations

import contextlib

from .models import is_packaged_gguf
from .rag.factory import cached_generator, model_path
from .rag.generators import make_request


class WorkflowAttackerTools:
    """``gen_cfg``: the validated ``generators`` entry of the attacker LLM, or ``None`` in a step
    without it (scoring: local models only)."""

    def __init__(self, gen_cfg: dict | None, generator: object | None, model_dir: str | None, seed: int, log):
        self.gen_cfg = gen_cfg
        self.generator = generator
        self.model_dir = model_dir
        self.seed = seed
        self._log = log
        self.llm_calls = 0

    def log(self, msg: str) -> None:
        self._log(msg)

    def chat(self, prompts, max_tokens, temperature=0.0, seeds=None):
        """``seeds``: one sampling seed per prompt (default: the run's seed for every prompt), so that an
        attack that asks the same prompt several times at a temperature above 0 gets several answers."""
        if self.generator is None:
            raise RuntimeError("no attacker LLM is available in this step")
        seeds = [self.seed] * len(prompts) if seeds is None else [int(s) for s in seeds]
        reqs = [make_request(p, max_tokens, 0, temperature, s) for p, s in zip(prompts, seeds, strict=True)]
        out = self.generator.generate(reqs)
        self.llm_calls += len(prompts)
        return [
            {
                "text": r["response_text"],
                "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"],
                "model": self.gen_cfg["model"],
            }
            for r in out
        ]

    def local_model_path(self, name: str) -> str:
        if name == "attacker":
            if self.gen_cfg is None:
                raise RuntimeError("the attacker model is not available in this step")
            if is_packaged_gguf(self.gen_cfg["model"]) and self.model_dir is None:
                raise RuntimeError("the attacker model folder was not provided to this step")
            return model_path(self.gen_cfg, self.model_dir)
        return name


@contextlib.contextmanager
def attacker_tools(gen_cfg: dict, model_dir, cache_dir, threads: int, server_log: str, seed: int, log):
    with cached_generator(gen_cfg, model_dir, cache_dir, threads, server_log, log) as gen:
        yield WorkflowAttackerTools(gen_cfg, gen, model_dir, seed, log)
