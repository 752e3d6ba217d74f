import math

import pytest

from ragmi.target.generators import TransformersGenerator, make_request
from ragmi.target.templates import get_template


@pytest.fixture(scope="module")
def gen(smollm2_dir):
    return TransformersGenerator(smollm2_dir, batch_size=2, log=lambda m: None)


def test_transformers_backend_returns_text_and_logprobs(gen):
    msgs = get_template("rag_mia").messages("Does this: \u201cThe sky is blue.\u201d appear in the context? "
                                            "Answer with Yes or No.", ["The sky is blue.", "Grass is green."])
    reqs = [make_request(msgs, 4, 5), make_request([{"role": "user", "content": "What is 2+2?"}], 6, 3)]
    out = gen.generate(reqs)
    assert len(out) == 2
    for r, req in zip(out, reqs):
        assert len(r["first_token_logprobs"]) == req["top_logprobs"]
        lps = [e["logprob"] for e in r["first_token_logprobs"]]
        assert lps == sorted(lps, reverse=True) and all(lp <= 0 for lp in lps)
        assert sum(math.exp(lp) for lp in lps) <= 1.0 + 1e-5
        assert 1 <= r["completion_tokens"] <= req["max_tokens"]
        assert len(r["token_logprobs"]) == r["completion_tokens"]
        # greedy decoding: the first generated token is the top-1 alternative
        assert r["token_logprobs"][0] == pytest.approx(lps[0], abs=1e-4)
        assert r["prompt_tokens"] > 10
    assert out[0]["response_text"].strip() != ""


def test_batching_does_not_change_greedy_answers(gen, smollm2_dir):
    reqs = [make_request([{"role": "user", "content": c}], 5, 2) for c in ("Say hello.", "Name a colour.", "Hi")]
    batched = gen.generate(reqs)
    single = TransformersGenerator(smollm2_dir, batch_size=1, log=lambda m: None).generate(reqs)
    assert [r["response_text"] for r in batched] == [r["response_text"] for r in single]
