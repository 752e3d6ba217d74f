"""DP-style output perturbation (MEntA §C.2, epsilon = 0.1; the artifact's ``add_laplace_noise``,
which despite its name drops tokens rather than adding Laplace noise).

The response text is split on whitespace and each token is kept independently with probability
``epsilon / (1 + epsilon)`` (= 1 / (1 + 1/epsilon); 0.0909 at epsilon = 0.1); the kept tokens are
joined with single spaces.  An empty response becomes "I don't know."; when every token of a
non-empty response is dropped, the artifact keeps one token drawn uniformly (``on_all_dropped:
one_token``, the default) -- ``refuse`` answers "I don't know." instead.

Only the text changes: the log-probability columns pass through (``logprobs = "keep"``), as in the
paper's text-only perturbation, so a gray-box attack still reads the undefended model; the audit
reports that.  docs/provenance.md#dp_output
"""

from __future__ import annotations

from ._common import CountingDefense
from .base import REFUSAL, set_response_text
from .claims import RELATION_NONE, DeclaredEpsilon


def keep_probability(epsilon: float) -> float:
    return epsilon / (1.0 + epsilon)


class DpOutput(CountingDefense):
    kind = "dp_output"
    stochastic = True
    hooks = ("output",)
    channels = ("text",)
    vocabulary = (REFUSAL,)
    logprobs = "keep"
    source = "MEntA §C.2 DP-style output perturbation (epsilon = 0.1); artifact add_laplace_noise"
    chosen = {
        "log-prob columns": "kept (text-only perturbation, as in the paper)",
        "all tokens dropped": "params.on_all_dropped: one_token (artifact) or refuse",
    }

    def epsilon_claim(self) -> DeclaredEpsilon:
        """ε only sets the keep probability ε/(1+ε); token dropping is not ε-DP for any relation
        (:data:`RELATION_NONE`)."""
        eps = float(self.params["epsilon"])
        return DeclaredEpsilon(
            eps,
            f"none: ε only sets the keep probability ε/(1+ε) = {keep_probability(eps):.4g} of each response token",
            RELATION_NONE,
        )

    def perturb(self, text: str, rng) -> str:
        tokens = (text or "").split()
        if not tokens:
            return REFUSAL
        kept = [t for t, u in zip(tokens, rng.random(len(tokens))) if u < keep_probability(self.params["epsilon"])]
        if kept:
            return " ".join(kept)
        self.stats["all_dropped"] += 1
        return tokens[int(rng.integers(len(tokens)))] if self.params["on_all_dropped"] == "one_token" else REFUSAL

    def on_output(self, states, ctx):
        for s in states:
            text = (s.response or {}).get("response_text", "")
            set_response_text(s, self.perturb(text, ctx.rng(self.name, s.query_id)))
            self.stats["responses"] += 1
