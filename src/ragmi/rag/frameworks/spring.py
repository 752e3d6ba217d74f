"""Spring (Zhu et al., "One Token Can Help! Learning Scalable and Pluggable Virtual Tokens for
Retrieval-Augmented Large Language Models", 2024; DCMI Table 8 and Appendix H).

Spring leaves the generator's weights untouched and appends trained *virtual tokens* ``[ref1]`` …
``[refN]`` after the retrieved texts: ``{retrieved}{ [ref1] … [ref50]}Question: {question}\\nAnswer:``
(FlashRAG's Spring prompt, no chat template).  Their embeddings are trained per backbone and
published on the Hugging Face Hub (``yutaozhu94/SPRING``: ``llama2.7b.chat.added_token_embeddings.pt``
for Llama-2-7b-chat, DCMI's setting, with 50 tokens).

Config: ``framework_params.embeddings`` is a local ``.pt`` file or a Hub file ``org/repo/file``
(the default, DCMI's); ``n_virtual_tokens`` how many of its rows are used (50).  The generator must
be in process (``backend: transformers``): the virtual tokens' rows are written into the input
embedding table (not the output head, as the authors' loader does), which an HTTP endpoint cannot
do.  Responses are cached under the generator's identity plus the embedding file's SHA-256.

Offline, the trained embeddings are not available (the Hub cannot be reached, and no package ships
them): the run stops with one ``ragmi:`` line naming ``framework_params.embeddings``.  Spring
embeddings exist only for Llama-2 and Mistral backbones, so the local SmolLM2 cannot run Spring
with trained tokens; the loader and the generation path are tested on a small embedding file.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path

from ...errors import ConfigError
from ...hardware import choose_dtype
from ...models import hub_offline
from ..generators import TransformersGenerator
from ..templates import Template
from .base import Framework

HUB_FILE = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<file>[^\s]+\.pt)$")


def virtual_tokens(n: int) -> list[str]:
    return [f"[ref{i}]" for i in range(1, n + 1)]


def virtual_token_text(n: int) -> str:
    """What goes between the retrieved texts and the question: `` [ref1] [ref2] … [refN]``."""
    return "".join(f" {t}" for t in virtual_tokens(n))


def check_embeddings_reference(ref: str, key: str) -> None:
    """Config time: an existing ``.pt`` file or a Hub file reference ``org/repo/file.pt``."""
    p = Path(ref).expanduser()
    if p.is_file():
        return
    if p.is_dir():
        raise ConfigError(f"config key {key}: {ref!r} is a folder; the Spring embeddings are one .pt file")
    if HUB_FILE.match(ref) and not ref.startswith((".", "/", "~")):
        return
    raise ConfigError(
        f"config key {key}: {ref!r} is neither an existing file ({p.resolve()} does not exist) nor a Hugging Face "
        "file reference org/repo/file.pt"
    )


def resolve_embeddings(ref: str, key: str) -> Path:
    """The local path of the embeddings file: the file itself, or the Hub file (from the local cache
    when ``HF_HUB_OFFLINE`` is set); anything that cannot be had is one ConfigError naming ``key``."""
    p = Path(ref).expanduser()
    if p.is_file():
        return p
    m = HUB_FILE.match(ref)
    if m is None:
        check_embeddings_reference(ref, key)
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(m["repo"], m["file"], local_files_only=hub_offline()))
    except Exception as e:  # noqa: BLE001 - offline, no such file, no access: one sentence
        why = "HF_HUB_OFFLINE is set and it is not in the local Hugging Face cache" if hub_offline() else "that failed"
        raise ConfigError(
            f"config key {key}: the Spring virtual-token embeddings {ref!r} are read from the Hugging Face Hub, and "
            f"{why} ({type(e).__name__}); download the file first (huggingface-cli download {m['repo']} {m['file']}) "
            "or name a local .pt file"
        ) from None


def load_embeddings(path: Path, n_tokens: int, hidden_size: int | None, key: str):
    """The first ``n_tokens`` rows of a ``[N, hidden]`` float tensor saved with ``torch.save``."""
    import torch

    try:
        w = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - not a torch file
        raise ConfigError(f"config key {key}: {path} is not a torch tensor file ({type(e).__name__})") from None
    if not isinstance(w, torch.Tensor) or w.dim() != 2:
        raise ConfigError(f"config key {key}: {path} must hold one 2-d tensor [tokens, hidden size]")
    if w.shape[0] < n_tokens:
        raise ConfigError(f"config key {key}: {path} has {w.shape[0]} virtual tokens, n_virtual_tokens is {n_tokens}")
    if hidden_size is not None and w.shape[1] != hidden_size:
        raise ConfigError(
            f"config key {key}: {path} has embeddings of size {w.shape[1]}; the generator's hidden size is "
            f"{hidden_size} (the embeddings are trained for another backbone)"
        )
    return w[:n_tokens].float()


def add_virtual_tokens(model, tok, weights) -> list[int]:
    """Add ``[ref1]``…``[refN]`` to the tokenizer and their rows to the input embedding table only
    (Spring's loader; ``resize_token_embeddings`` would also grow the output head)."""
    import torch

    names = virtual_tokens(int(weights.shape[0]))
    tok.add_tokens(names)
    ids = tok.convert_tokens_to_ids(names)
    emb = model.get_input_embeddings()
    old = emb.weight.data
    table = torch.zeros(max(len(tok), old.shape[0]), old.shape[1], dtype=old.dtype, device=old.device)
    table[: old.shape[0]] = old
    for i, row in zip(ids, weights):
        table[i] = row.to(old.dtype)
    emb.weight = torch.nn.Parameter(table, requires_grad=False)
    emb.num_embeddings = table.shape[0]
    return ids


class SpringGenerator(TransformersGenerator):
    """In-process generation with the virtual tokens loaded; prompts without a chat template."""

    def __init__(self, model_path, weights, **kw):
        super().__init__(model_path, **kw)
        self.virtual_ids = add_virtual_tokens(self.model, self.tok, weights)

    def _prompt(self, messages) -> str:
        """The plain prompt, led by the tokenizer's start-of-sequence token for a causal model: the
        prompt is tokenized without special tokens (a chat template writes its own), and FlashRAG's
        Spring prompt starts with Llama-2's ``<s>``."""
        text = "\n\n".join(m["content"] for m in messages)
        bos = getattr(self.tok, "bos_token", None)
        if bos and not getattr(self, "seq2seq", False) and not text.startswith(bos):
            text = bos + text
        return text


class Spring(Framework):
    name = "spring"
    table_rank = 3
    source = "Spring (Zhu et al. 2024), HF yutaozhu94/SPRING, 50 virtual tokens (DCMI Table 8)"
    needs_backend = "transformers"
    needs_backend_why = "writes its virtual tokens into the generator's embedding table"

    def __init__(self, params):
        super().__init__(params)
        n = self.params["n_virtual_tokens"]
        self.template = Template(
            name="spring",
            user="{context}" + virtual_token_text(n) + "Question: {question}\nAnswer:",
            doc_separator="\n",
        )

    def messages(self, rag, state) -> list[dict]:
        return self.template.messages(state.query, state.docs)

    def check(self, where: str) -> None:
        check_embeddings_reference(self.params["embeddings"], f"{where}_params.embeddings")

    @contextlib.contextmanager
    def generator(self, gen_cfg, model_path: str, cache_dir: str, key: str, log):
        """The target's cached generator with the virtual tokens (see the module docstring)."""
        from ...cache import ResponseCache
        from ..generators import CachedGenerator, generator_model_id

        if gen_cfg["backend"] != "transformers":
            raise ConfigError(f"config key {key}: spring runs the generator in process; it needs backend transformers")
        path = resolve_embeddings(self.params["embeddings"], key + "_params.embeddings")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        self.stats = {"embeddings": str(path), "sha256": digest, "n_virtual_tokens": self.params["n_virtual_tokens"]}

        def create():
            from transformers import AutoConfig

            hidden = getattr(AutoConfig.from_pretrained(model_path), "hidden_size", None)
            weights = load_embeddings(path, self.params["n_virtual_tokens"], hidden, key + "_params.embeddings")
            dtype = choose_dtype(gen_cfg["dtype"], "transformers").dtype  # ragmi.hardware: the one rule
            return SpringGenerator(model_path, weights, batch_size=gen_cfg["batch_size"], dtype=dtype, log=log)

        model_id = f"{generator_model_id(gen_cfg)}|spring:{digest}:{self.params['n_virtual_tokens']}"
        gen = CachedGenerator(model_id, create, ResponseCache(cache_dir), log=log)
        try:
            yield gen
        finally:
            if gen.stats["requests"]:
                log(gen.summary())
