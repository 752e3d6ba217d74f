"""Selective-Context (Li et al., "Compressing Context to Enhance Inference Efficiency of Large
Language Models", EMNLP 2023; DCMI's SC-RAG, Table 8 and Appendix H), reimplemented.

The method scores every lexical unit of the retrieved texts by its self-information under a small
causal LM, ``I(u) = sum over the unit's tokens t of -log p(t | the text before t)``, and drops the
least informative units until the reduce ratio is met.  DCMI's run script uses ``reduce_ratio``
0.2; FlashRAG's upstream default is 0.5 (docs/provenance.md#frameworks).

Why a reimplementation: the ``selective-context`` package pins spaCy 3.2 and downloads GPT-2 from the
Hub, so it cannot be installed or run offline.  The causal LM here is the target's own local model by
default (SmolLM2-135M offline; ``model`` names another, e.g. ``openai-community/gpt2`` as in DCMI).

The lexical unit.  Selective-Context offers tokens, phrases (spaCy noun chunks) and sentences; DCMI
uses phrases.  Phrase chunking needs a spaCy parser model, which does not install offline, so the
default unit here is the **word** (a maximal run of non-space characters): the lexical unit closest
to a phrase that needs no parser.  A word is never split into sub-word pieces (token level would
leave fragments the generator reads as noise), and a word the attacker perturbed (DCMI's antonym
swaps) is kept or dropped whole, as it is at phrase level.  ``unit: sentence`` selects whole
sentences (split after ``.``, ``!`` or ``?``), Selective-Context's coarsest level.

The reduce ratio is met over the units of one query's retrieved texts together (Selective-Context
filters the whole context at one percentile): the ``ceil(reduce_ratio * n)`` units of lowest
self-information are dropped (ties: the earlier unit first), so at least ``reduce_ratio`` of the
units go; each text keeps its surviving units, in order, joined by single spaces.  Each text is
scored on its own, after the LM's beginning-of-text token.
"""

from __future__ import annotations

import bisect
import math
import re

from .base import Framework

UNIT_PATTERNS = {"word": re.compile(r"\S+"), "sentence": re.compile(r"\S.*?(?:[.!?](?=\s|$)|$)", re.S)}


def unit_spans(text: str, unit: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the lexical units of ``text``."""
    return [(m.start(), m.end()) for m in UNIT_PATTERNS[unit].finditer(text)]


def token_self_information(tok, model, text: str) -> tuple[list[tuple[int, int]], list[float]]:
    """Character spans and self-information (nats) of the tokens of ``text``, each conditioned on
    the beginning-of-text token and the tokens before it."""
    import torch

    enc = tok(text, return_offsets_mapping=True, add_special_tokens=False)
    ids, offsets = enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]]
    if not ids:
        return [], []
    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    x = torch.tensor([[start] + list(ids)], device=model.device)
    with torch.inference_mode():
        logits = model(input_ids=x).logits[0, :-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    info = (-logp[torch.arange(len(ids)), torch.tensor(ids, device=logp.device)]).tolist()
    return offsets, info


def unit_information(text: str, offsets, info, unit: str) -> tuple[list[tuple[int, int]], list[float]]:
    """The units of ``text`` and their self-information: the sum over the tokens whose last
    character lies in the unit (a token of white space alone belongs to no unit)."""
    spans = unit_spans(text, unit)
    starts = [s for s, _ in spans]
    total = [0.0] * len(spans)
    for (a, b), v in zip(offsets, info):
        if b <= a:
            continue
        last = b - 1
        j = bisect.bisect_right(starts, last) - 1
        if j >= 0 and spans[j][0] <= last < spans[j][1]:
            total[j] += v
    return spans, total


def select_units(infos: list[list[float]], reduce_ratio: float) -> list[list[bool]]:
    """Per text, which units are kept: the ``ceil(reduce_ratio * n)`` units of lowest information
    over all texts together are dropped (ties broken by order: text, then position)."""
    flat = [(v, i, j) for i, vals in enumerate(infos) for j, v in enumerate(vals)]
    n_drop = math.ceil(reduce_ratio * len(flat) - 1e-9)
    dropped = {(i, j) for _, i, j in sorted(flat)[:n_drop]}
    return [[(i, j) not in dropped for j in range(len(vals))] for i, vals in enumerate(infos)]


class SelectiveContext(Framework):
    name = "selective_context"
    table_rank = 2
    source = "Selective-Context (Li et al. 2023), DCMI SC-RAG (Table 8), reduce_ratio 0.2"
    needs_local_model = True

    def __init__(self, params):
        super().__init__(params)
        self._lm = None
        self.stats = {"units": 0, "dropped": 0}

    def lm(self):
        if self._lm is None:
            from ._lm import load_causal_lm

            self._lm = load_causal_lm(self.model_path, self.params["device"], self.model_what())
        return self._lm

    def compress_texts(self, texts: list[str]) -> list[str]:
        tok, model = self.lm()
        unit = self.params["unit"]
        spans, infos = [], []
        for t in texts:
            offsets, info = token_self_information(tok, model, t)
            sp, iv = unit_information(t, offsets, info, unit)
            spans.append(sp)
            infos.append(iv)
        keep = select_units(infos, self.params["reduce_ratio"])
        self.stats["units"] += sum(len(k) for k in keep)
        self.stats["dropped"] += sum(k.count(False) for k in keep)
        return [" ".join(t[a:b] for (a, b), k in zip(sp, kp) if k) for t, sp, kp in zip(texts, spans, keep)]

    def compress(self, rag, states, ctx) -> None:
        for s in states:
            if s.docs:
                s.docs = self.compress_texts(list(s.docs))

    def close(self) -> None:
        self._lm = None
