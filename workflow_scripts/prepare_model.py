"""Rule prepare_model: dequantise a GGUF model shipped in a PyPI wheel into a safetensors folder (a
copy of the conversion `make install` made, when there is one: ragmi.models.cache_packaged_conversion);
then start the shared vLLM server of each generator in params.servers (ragmi.rag.factory.start_server_early)."""

from ragmi.models import cached_conversion, convert_gguf_to_hf
from ragmi.rag.factory import start_server_early
from ragmi.workflow import run_step


def main(smk, log):
    cached = cached_conversion(smk.params.model)
    if cached is not None:
        log(f"copying {smk.params.model}, converted at install time, from {cached}")
    else:
        log(f"converting {smk.params.model} (GGUF) to a float32 safetensors folder")
    out = convert_gguf_to_hf(smk.params.model, smk.output.model)
    log(f"wrote {out}")
    for name, gen_cfg, server_log in smk.params.servers:
        start_server_early(name, gen_cfg, str(out), smk.params.server_threads, server_log, log)


run_step(snakemake, main)  # noqa: F821
