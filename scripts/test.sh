#!/usr/bin/env bash
# Set up everything the tests need and run them: bash scripts/test.sh [pytest args]
# Starts the local OpenAI-compatible llama.cpp server (SmolLM2) on 127.0.0.1 for the LLM tests
# and stops it whatever happens. Installs from the lock constraints/ci.txt (SIRERAG_UNPINNED=1: without it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -n "${SIRERAG_UNPINNED:-}" ]; then
  bash scripts/install.sh --dev --unpinned
else
  bash scripts/install.sh --dev
fi
if [ -f scripts/llama_server.sh ] && [ -z "${SIRERAG_TEST_SERVER_URL:-}" ]; then
  port=$($PY -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  # the tests find the server's pid and log here, to restart it once if it is gone and to show its log
  export SIRERAG_SERVER_DIR="${SIRERAG_SERVER_DIR:-${TMPDIR:-/tmp}/sirerag-llama-$(id -u)}"
  trap 'bash scripts/llama_server.sh stop "$port" || true' EXIT
  bash scripts/llama_server.sh start "$port"
  export SIRERAG_TEST_SERVER_URL="http://127.0.0.1:${port}/v1"
fi
# torch's OpenMP threads spin while they wait for work. On a machine that is busy with other jobs that
# spinning fights for the cores: measured on 2 shared cores (load average 3.5), a SmolLM2 prefill took 3.8 s
# and 64 generated tokens 40 s with the default policy, 2.0 s and 6.0 s with PASSIVE. Set it to override.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# two worker processes (pytest-xdist): a module's tests stay in one worker, and so do the llama.cpp server's
# tests and the Ray tests (tests/conftest.py); SIRERAG_TEST_WORKERS=0 runs everything in this process
$PY -m pytest -ra -n "${SIRERAG_TEST_WORKERS:-2}" --dist loadgroup "$@"
