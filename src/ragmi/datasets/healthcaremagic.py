"""HealthCareMagic patient–doctor conversations (ChatDoctor).

Hub: ``lavita/ChatDoctor-HealthCareMagic-100k`` (split ``train``), columns ``instruction`` (a fixed
system prompt, ignored), ``input`` (the patient's message) and ``output`` (the doctor's reply).
One document per conversation: ``"Patient: {input}\\nDoctor: {output}"``, ids ``hcm-{row:06d}``
numbered by row as loaded (before de-duplication), title "", ``human_turn`` = the patient's message
(``input``), the sample of RAG-MIA §4.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ragmi.datasets.hf import load_hf_frame

HF_ID = "lavita/ChatDoctor-HealthCareMagic-100k"
COLUMNS = ("input", "output")


def load(name: str, spec: Mapping, seed: int) -> pd.DataFrame:
    raw = load_hf_frame(name, spec, hf_id=HF_ID, split="train", columns=COLUMNS)
    patient = raw["input"].fillna("").astype(str).str.strip()
    doctor = raw["output"].fillna("").astype(str).str.strip()
    # A conversation with neither turn is empty (dropped by normalize), not "Patient: \nDoctor: ".
    text = ("Patient: " + patient + "\nDoctor: " + doctor).where((patient != "") | (doctor != ""), "")
    return pd.DataFrame(
        {"doc_id": [f"hcm-{i:06d}" for i in range(len(raw))], "text": text, "title": "", "human_turn": patient}
    )
