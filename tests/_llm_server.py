"""Test helpers for the LLM layer: the real llama.cpp server, and a deliberately failing HTTP server.

``server_url()`` returns ``$SIRERAG_TEST_SERVER_URL`` when set (``.ci/run`` and
``scripts/test.sh`` start one), else starts ``scripts/llama_server.sh`` on a free
port once per test process and stops it at exit. Tests that need it are skipped
with a reason when llama-cpp-python is not installed.

``FlakyServer`` speaks just enough of the chat completions API to exercise the
retry policy: what it does for a request is chosen by a tag in the user message. Given a
``reply`` function it is also a deterministic stand-in for a model (the QA reader tests).
``EmbeddingServer`` answers ``POST /v1/embeddings`` with small vectors derived from
the text, so a build can run without a model.
"""
from __future__ import annotations

import atexit
import functools
import importlib.util
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "llama_server.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _state_dir() -> Path:
    """Where llama_server.sh keeps the pid and log files of the servers the tests use."""
    default = Path(os.environ.get("TMPDIR", "/tmp")) / f"sirerag-test-llama-{os.getpid()}"
    return Path(os.environ.get("SIRERAG_SERVER_DIR") or default)


def _script(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "SIRERAG_SERVER_DIR": str(_state_dir())}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)


@functools.lru_cache(maxsize=None)
def _start_server() -> str:
    port = free_port()
    proc = _script("start", str(port))
    if proc.returncode != 0:
        raise RuntimeError(f"could not start the llama.cpp server: {proc.stderr[-2000:]}")
    atexit.register(_script, "stop", str(port), timeout=60)
    return f"http://127.0.0.1:{port}/v1"


def _url() -> str | None:
    url = os.environ.get("SIRERAG_TEST_SERVER_URL")
    return url.rstrip("/") if url else None


def server_url() -> str:
    """URL of a real OpenAI-compatible server (llama.cpp serving SmolLM2); skips if none can run."""
    url = _url()
    if url:
        return url
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python[server] is not installed and SIRERAG_TEST_SERVER_URL is not set "
                    "(bash scripts/llama_server.sh install)")
    return _start_server()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


def log_tail(url: str | None = None, lines: int = 30) -> str:
    """The last lines of the log of the server at ``url`` (any test server when None)."""
    port = urllib.parse.urlsplit(url).port if url else None
    logs = sorted(_state_dir().glob(f"server-{port or '*'}.log"))
    if not logs:
        return "(no server log found in %s)" % _state_dir()
    return "\n".join(f"{log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) for log in logs)


def ensure_server() -> None:
    """Before a test that uses the server: it answers, or it is restarted once on its port, or the test fails
    with the tail of its log. Servers that were never started (the first use starts them) are left alone."""
    url = _url() or (_start_server() if _start_server.cache_info().currsize else None)
    if url is None or _answers(url):
        return
    port = str(urllib.parse.urlsplit(url).port)
    tail = log_tail(url)
    _script("stop", port, timeout=60)
    proc = _script("start", port)
    if proc.returncode != 0 or not _answers(url):
        pytest.fail(f"the llama.cpp server at {url} is gone and did not restart: {proc.stderr[-1500:]}\n"
                    f"its log before the restart:\n{tail}", pytrace=False)


class _QuietServer(ThreadingHTTPServer):
    """A test server whose handler threads never print: a client that gave up (a timeout test) makes the
    handler's late write fail, and socketserver would print that traceback into whatever test runs next."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class FlakyServer:
    """A chat-completions endpoint on 127.0.0.1 that fails on purpose (``GET /v1/models`` answers, so the
    endpoint check passes without a request of its own).

    Tags in the last user message choose the behaviour:
    ``[fail:CODE:N:ID]`` answers HTTP CODE the first N times request ID is seen, then succeeds;
    ``[hold]`` answers nothing until the server is closed (a client timeout, whatever the machine's speed);
    ``[always:CODE]`` always answers CODE; ``[retry-after:S]`` always answers 429 with ``Retry-After: S``; ``[sleep:S]`` waits S seconds before answering;
    ``[echo-auth]`` fails with 401 quoting the Authorization header it received;
    ``[gate:N]`` holds each request until N of them are in flight together (or answers 503
    after 30 s), which proves concurrency without timing anything.
    A success echoes the message back as the completion, or answers ``reply(body)`` when a
    ``reply`` function is given. ``seen`` counts requests per message, ``bodies`` keeps every
    request body, ``max_in_flight`` is the most requests handled at once (a request stops counting before its
    reply is written, so a client that sends its next request on reading a reply is never counted twice).
    """

    def __init__(self, reply: Callable[[dict], str] | None = None) -> None:
        self.reply = reply
        self.bodies: list[dict] = []
        self.barriers: dict[int, threading.Barrier] = {}
        self.seen: dict[str, int] = {}
        self.auth: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.released = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - GET /v1/models: the endpoint check of build and ask
                self._send(200, {"object": "list", "data": [{"id": "any", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                message = body["messages"][-1]["content"]
                with outer.lock:
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    outer.seen[message] = outer.seen.get(message, 0) + 1
                    outer.bodies.append(body)
                    count = outer.seen[message]
                    outer.auth.append(self.headers.get("Authorization", ""))
                self.counted = True
                try:
                    self._answer(message, count, body)
                finally:
                    self._done()

            def _done(self) -> None:
                """The request stops counting as in flight: before its reply's first byte is written (the
                client may send its next request as soon as it has read this one), or when it ends unanswered."""
                if getattr(self, "counted", False):
                    self.counted = False
                    with outer.lock:
                        outer.in_flight -= 1

            def _answer(self, message: str, count: int, body: dict) -> None:
                if "[hold]" in message:
                    outer.released.wait()
                    return None
                if "[sleep:" in message:
                    time.sleep(float(message.split("[sleep:")[1].split("]")[0]))
                if "[gate:" in message:
                    parties = int(message.split("[gate:")[1].split("]")[0])
                    with outer.lock:
                        barrier = outer.barriers.setdefault(parties, threading.Barrier(parties))
                    try:
                        barrier.wait(timeout=30)
                    except threading.BrokenBarrierError:
                        return self._error(503, f"fewer than {parties} requests arrived together")
                if "[fail:" in message:
                    code, times = message.split("[fail:")[1].split("]")[0].split(":")[:2]
                    if count <= int(times):
                        return self._error(int(code), f"planned failure {count}")
                if "[retry-after:" in message:
                    seconds = message.split("[retry-after:")[1].split("]")[0]
                    return self._error(429, "planned rate limit", {"Retry-After": seconds})
                if "[always:" in message:
                    return self._error(int(message.split("[always:")[1].split("]")[0]), "planned failure")
                if "[echo-auth]" in message:
                    return self._error(401, f"invalid key in header {self.headers.get('Authorization')}")
                reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant",
                                                  "content": outer.reply(body) if outer.reply else f"echo: {message}"}}],
                         "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}
                self._send(200, reply)

            def _error(self, code: int, text: str, headers: dict | None = None) -> None:
                headers = headers or ({"Retry-After": "0"} if code == 429 else {})
                self._send(code, {"error": {"message": text, "type": "test", "code": code}}, headers)

            def _send(self, code: int, obj: dict, headers: dict | None = None) -> None:
                data = json.dumps(obj).encode()
                self._done()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FlakyServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def fake_vector(text: str) -> list[float]:
    """The 3-dimensional vector :class:`EmbeddingServer` answers for ``text``."""
    return [float(len(text)), float(text.count("a")) + 1.0, 3.0]


class EmbeddingServer:
    """Speaks enough of ``POST /v1/embeddings``; answers with the scripted statuses first."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                status = outer.statuses.pop(0) if outer.statuses else 200
                if status != 200:
                    payload = {"error": {"message": f"scripted {status}", "type": "test"}}
                else:
                    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)}
                            for i, t in enumerate(body["input"])]
                    payload = {"object": "list", "data": data[::-1], "model": body["model"],
                               "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
