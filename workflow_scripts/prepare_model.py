"""Rule prepare_model: dequantise a GGUF model shipped in a PyPI wheel into a safetensors folder."""

from ragmi.models import convert_gguf_to_hf
from ragmi.workflow import run_step


def main(smk, log):
    log(f"converting {smk.params.model} (GGUF) to a float32 safetensors folder")
    out = convert_gguf_to_hf(smk.params.model, smk.output.model)
    log(f"wrote {out}")


run_step(snakemake, main)  # noqa: F821
