"""ragmi.bert_encoder: the plain-torch BERT mean-pooling forward pass computes what
sentence-transformers computes for the packaged all-MiniLM-L6-v2 (and only such folders take it)."""

import json
import random
import shutil

import numpy as np
import pytest

from ragmi.bert_encoder import BertMeanEncoder, supported
from ragmi.embedder import Embedder

TEXTS = [
    "Hello world",
    "  leading and trailing whitespace  ",
    "",
    "Ünïcödé naïve café — 東京 🙂 Zoë O'Brien-Ścisło",
    "Patient: I have had a headache for three days. Doctor: rest and fluids. " * 30,  # > 256 tokens
    'Does this: "Patient: my e-mail is jane.doe@example.org" appear in the context?',
]


@pytest.fixture(scope="module")
def texts():
    rnd = random.Random(3)
    words = "the a patient doctor pain fever e-mail john@example.com 555-1234 headache stomach".split()
    return TEXTS + [" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 300))) for _ in range(40)]


@pytest.fixture(scope="module")
def reference(minilm_path, texts):
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(minilm_path, device="cpu")
    batch = st.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    st.max_seq_length = 16
    short = st.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    return batch, short


def test_the_packaged_minilm_takes_the_fast_path(minilm_path):
    assert supported(minilm_path)
    emb = Embedder(minilm_path)
    assert emb.fast is not None and emb.max_seq_length == 256


def test_same_vectors_as_sentence_transformers(minilm_path, texts, reference):
    batch, short = reference
    fast = BertMeanEncoder(minilm_path)
    ours = fast.encode(texts, batch_size=64)
    assert np.abs(ours - batch).max() < 1e-5
    singles = np.vstack([fast.encode([t])[0] for t in texts])  # how the retriever embeds a query
    assert np.abs(singles - batch).max() < 1e-5
    # the same nearest neighbours
    assert (np.argsort(-ours @ ours.T, axis=1)[:, :5] == np.argsort(-batch @ batch.T, axis=1)[:, :5]).all()
    # truncation at a configured max_seq_length, special tokens included
    ours16 = BertMeanEncoder(minilm_path, max_seq_length=16).encode(texts, batch_size=8)
    assert np.abs(ours16 - short).max() < 1e-5
    assert np.abs(ours16 - ours).max() > 1e-2  # long texts really were cut


def test_only_bert_mean_pooling_folders_take_the_fast_path(minilm_path, tmp_path):
    d = tmp_path / "cls"
    shutil.copytree(minilm_path, d)
    pooling = d / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    assert supported(d)
    cfg.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(cfg))
    assert not supported(d)  # CLS pooling
    assert Embedder(str(d)).fast is None  # ... goes through sentence-transformers
    assert not supported(tmp_path / "missing")
    (d / "tokenizer.json").unlink()
    cfg.update(pooling_mode_mean_tokens=True, pooling_mode_cls_token=False)
    pooling.write_text(json.dumps(cfg))
    assert not supported(d)  # no fast tokenizer file


def test_a_broken_fast_folder_is_one_message(minilm_path, tmp_path):
    from ragmi.errors import ConfigError

    d = tmp_path / "broken"
    shutil.copytree(minilm_path, d)
    (d / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ConfigError, match="does not hold a loadable model"):
        Embedder(str(d))


def test_embedding_does_not_import_torch(minilm_path):
    import subprocess
    import sys

    code = (
        "import sys; from ragmi.embedder import Embedder;"
        f"e = Embedder({minilm_path!r}); v = e.encode(['a query'], normalize=True);"
        "print(v.shape, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(1, 384) False"
