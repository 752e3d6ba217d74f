"""Token accounting of a served generate job: what was sent, what the server actually computed.

vLLM's OpenAI-compatible server exposes Prometheus counters at ``GET /metrics`` (only when it runs
without ``--disable-log-stats``: that flag turns off the engine's stat loggers, Prometheus included).
The ones read here (vLLM 0.32 names; a counter ``x`` is exported as ``x_total``):

* ``vllm:prompt_tokens``: prompt tokens of the requests the server admitted;
* ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``: prompt tokens looked up in the prefix
  cache and found there (their KV blocks were reused, not computed);
* ``vllm:prompt_tokens_cached``: prompt tokens served from a cache (local + external tiers), counted
  per request when it is prefilled, consistently with ``vllm:prompt_tokens`` (``computed + cached =
  total``; the scheduler's ``prefix_cache_hits`` counts lookups, again for a preempted request);
* ``vllm:prompt_tokens_by_source{source="local_compute"}``: prompt tokens prefilled, i.e. computed;
* ``vllm:generation_tokens``: generated tokens.

A job's hits are the delta of ``vllm:prompt_tokens_cached`` (``vllm:prefix_cache_hits`` where the
former is missing); its computed prompt tokens are the tokens it sent minus those hits.

The server is shared by the jobs of a machine and its counters are cumulative, so a job reads them
before and after its own requests and keeps the difference (:func:`delta`).  When another job used the
same server in between, the server's prompt-token delta exceeds what this job sent; :func:`account`
then says the attribution is not exact rather than charging this job for someone else's tokens.
"""

from __future__ import annotations

import math
import re
import time
import urllib.request

COUNTERS = {
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "prompt_tokens_cached": "vllm:prompt_tokens_cached_total",
    "prompt_tokens_local_compute": 'vllm:prompt_tokens_by_source_total{source="local_compute"}',
}

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text exposition, summed over its label sets, by metric name; the
    ``source`` label, where a sample has one, also gives ``name{source="..."}`` sums of its own."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        if math.isnan(v):
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + v
        source = dict(_LABEL.findall(m.group(2) or "")).get("source")
        if source is not None:
            key = f'{m.group(1)}{{source="{source}"}}'
            out[key] = out.get(key, 0.0) + v
    return out


def counters(text: str) -> dict[str, float] | None:
    """The counters of :data:`COUNTERS` (short names) from a ``/metrics`` page, or None when the page
    has none of them (a server without stats, or not vLLM)."""
    samples = parse_prometheus(text)
    found = {short: samples[name] for short, name in COUNTERS.items() if name in samples}
    return found or None


def metrics_url(base_url: str) -> str:
    """``http://host:port/v1`` -> ``http://host:port/metrics``."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/metrics"


def scrape(url: str, timeout: float = 5.0) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return counters(r.read().decode("utf-8", errors="replace"))
    except Exception:  # no /metrics (an external endpoint), or the server is gone: no server-side figures
        return None


def delta(before: dict | None, after: dict | None) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    return {k: after[k] - before.get(k, 0.0) for k in after}


def settle(url: str, before: dict | None, prompt_tokens_sent: int, wait_s: float = 3.0) -> dict | None:
    """The counters after a job's last answer.  The server updates them just after it answers, so
    poll (up to ``wait_s``) until its prompt-token delta covers what the job sent."""
    after = scrape(url)
    deadline = time.monotonic() + wait_s
    while (
        before is not None
        and after is not None
        and after.get("prompt_tokens", 0.0) - before.get("prompt_tokens", 0.0) < prompt_tokens_sent
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
        after = scrape(url)
    return after


def account(prompt_sent: int, completion: int, wall_s: float, server: dict | None) -> dict:
    """One job's record: tokens sent and generated (the clients' ``usage``), wall time, and — from the
    server's counter deltas — prefix-cache hits and the prompt tokens actually computed."""
    rec = {
        "prompt_tokens_sent": int(prompt_sent),
        "completion_tokens": int(completion),
        "wall_s": round(float(wall_s), 3),
        "prefix_cache_hit_tokens": None,
        "prompt_tokens_computed": None,
        "prefix_cache_hit_rate": None,
        "server_counters_exact": None,
    }
    if server is None:
        return rec
    rec["server"] = {k: int(round(v)) for k, v in server.items()}
    hits = server.get("prompt_tokens_cached", server.get("prefix_cache_hits"))
    server_prompt = server.get("prompt_tokens")
    if hits is None or server_prompt is None:
        return rec
    # exact when the server saw exactly this job's prompts between the two reads; otherwise another
    # job's requests are in the deltas, and this job's own hits are unknown
    exact = int(round(server_prompt)) == int(prompt_sent)
    rec["server_counters_exact"] = exact
    if exact:
        rec["prefix_cache_hit_tokens"] = int(round(hits))
        rec["prompt_tokens_computed"] = int(prompt_sent) - int(round(hits))
        rec["prefix_cache_hit_rate"] = round(hits / prompt_sent, 4) if prompt_sent else None
    return rec


def summary_line(rec: dict) -> str:
    line = (
        f"served tokens: {rec['prompt_tokens_sent']} prompt sent, "
        + (
            f"{rec['prompt_tokens_computed']} computed ({rec['prefix_cache_hit_tokens']} prefix-cache hits, "
            f"{100 * (rec['prefix_cache_hit_rate'] or 0):.1f}%)"
            if rec["prompt_tokens_computed"] is not None
            else "computed unknown ("
            + (
                "the server also served another job meanwhile"
                if rec["server_counters_exact"] is False
                else "no server counters"
            )
            + ")"
        )
        + f", {rec['completion_tokens']} completion; {rec['wall_s']:.1f} s"
    )
    return line
