"""Enron e-mails.

Hub: ``LLM-PBE/enron-email`` (split ``train``, column ``text``: one raw e-mail, headers included).
A document is the first ``max_chars`` characters of an e-mail.  Ids ``enron-{row:06d}`` numbered by
row as loaded, title "".

Extra spec key: ``max_chars`` (positive int, schema default 1000).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ragmi.datasets.hf import load_hf_frame
from ragmi.errors import ConfigError

HF_ID = "LLM-PBE/enron-email"
COLUMNS = ("text",)


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    max_chars = spec["max_chars"]
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ConfigError(f"datasets.{name}.max_chars must be a positive integer (got {max_chars!r}).")
    raw = load_hf_frame(name, spec, hf_id=HF_ID, split="train", columns=COLUMNS)
    text = raw["text"].fillna("").astype(str).str.strip().str[:max_chars]
    return pd.DataFrame({"doc_id": [f"enron-{i:06d}" for i in range(len(raw))], "text": text, "title": ""})
