"""tools/eta.py: the time estimate and results pointer printed at the start of `make run`."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("eta", ROOT / "tools" / "eta.py")
eta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eta)


def test_cpu_kind_from_flags():
    assert eta.cpu_kind({"sse2", "avx2", "avx512f", "avx512bw"}) == "avx512"
    assert eta.cpu_kind({"sse2", "avx", "avx2", "fma"}) == "avx2"
    assert eta.cpu_kind({"sse2"}) == "other"


def test_cpu_flags_reads_the_first_cpu(tmp_path):
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\nflags\t: x\n")
    assert eta.cpu_flags(str(f)) == ("AMD EPYC 7B13", {"fpu", "avx2", "fma"})
    assert eta.cpu_flags(str(tmp_path / "missing")) == ("unknown CPU", set())


def test_estimate_names_the_cpu_kind_and_its_source():
    out = "\n".join(eta.lines("avx2", "AMD EPYC", 2, True, 0))
    minutes = eta.MEASURED["avx2"][0]
    assert f"about {minutes:.0f} minutes" in out and "AVX2 (no AVX-512)" in out
    assert eta.MEASURED["avx2"][1] in out and "results/tables/" in out
    fast = "\n".join(eta.lines("avx512", "AMD EPYC", 2, True, 0))
    assert f"about {eta.MEASURED['avx512'][0]:.0f} minutes" in fast and "scaled" not in fast
    assert eta.estimate_minutes("avx512", 8) < eta.estimate_minutes("avx512", 2)
    assert eta.estimate_minutes("avx512", 64) == pytest.approx(eta.MEASURED["avx512"][0] / 3)  # floor: serial steps
    assert eta.estimate_minutes("other", 2) is None


def test_no_estimate_for_another_config_and_a_note_on_cached_work():
    assert eta.uses_default_config(["--keep-going"])
    assert not eta.uses_default_config(["--configfile", "config/paper/dcmi.yaml"])
    assert not eta.uses_default_config(["--config", "seed=3"])
    out = "\n".join(eta.lines("avx512", "X", 2, False, 12))
    assert "no time estimate" in out and "minutes" not in out
    assert "12 responses are already cached" in out


def test_runs_as_a_script():
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "eta.py"), "--cores", "2"], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0 and r.stdout.startswith("ragmi: ") and "results/figures/" in r.stdout


def test_bench_summary_sums_per_rule(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_summary", ROOT / "tools" / "bench_summary.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for rel, s in (("generate/d/t/a/0.tsv", 10.5), ("generate/d/t/b/0.tsv", 4.5), ("score/d/t/a.tsv", 2.0)):
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"s\th:m:s\tmax_rss\n{s}\t0:00:10\t100\n")
    out = bench.summary(bench.job_times(tmp_path), top=1)
    assert out[0] == "total job-seconds 17 in 3 jobs"
    assert out[1].split() == ["generate", "2", "jobs", "15.0", "s"] and out[2].split()[:2] == ["score", "1"]
    assert out[-1] == "   10.5 s  generate/d/t/a/0.tsv"
    assert bench.main([str(tmp_path / "missing")]) == 1
