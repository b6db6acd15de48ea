#!/usr/bin/env bash
# Install colbert-ai for `--retriever colbert` on CPU and compile its C++ extensions once.
#   bash scripts/install_colbert.sh
# colbert-ai works on CPU only with transformers<5; the constraints file keeps torch and
# transformers where they are (PIP_CONSTRAINT from scripts/install.sh, else constraints/ranges.txt).
# colbert-ai does not declare faiss, which its indexer needs: faiss-cpu is installed with it.
# The four extensions (about 20 s each on an idle core; built two at a time on 2 cores) are
# cached in TORCH_EXTENSIONS_DIR (default ~/.cache/sirerag/torch_extensions), so reruns are quick.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
constraint=()
[ -z "${PIP_CONSTRAINT:-}" ] && constraint=(-c constraints/ranges.txt)
before=$($PY -c "import torch, transformers; print(torch.__version__, transformers.__version__)")
echo "== installing colbert-ai and faiss-cpu (torch, transformers: ${before})"
$PY -m pip install -q "${constraint[@]}" "colbert-ai>=0.2.20" "faiss-cpu>=1.7.4"
after=$($PY -c "import torch, transformers; print(torch.__version__, transformers.__version__)")
if [ "$before" != "$after" ]; then
  echo "error: installing colbert-ai changed torch/transformers (${before} -> ${after})" >&2
  exit 1
fi
echo "== compiling colbert-ai's C++ extensions into ${TORCH_EXTENSIONS_DIR:-$HOME/.cache/sirerag/torch_extensions}"
start=$(date +%s)
$PY -c "from sirerag.retrievers.colbert import compile_extensions; compile_extensions(force=True)"
echo "== colbert-ai ready ($(( $(date +%s) - start )) s to compile or load the extensions)"
