"""Model server answers are checked before they are used or cached, completions are bounded, and
every ``openai:`` endpoint is checked before a command does any work (issue 25, items 3 and 4).

A small HTTP server on 127.0.0.1 answers with the body a test scripts: content that is not a
string, a cut-off JSON body, no ``choices``, a 5 MB completion. Each is a transient error
(retried, then one line), never a cached completion; after the server is mended the same call
gets the real answer. Builds against a server that is down or is not an OpenAI-compatible
endpoint stop at the endpoint check, before the embedder loads.
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Callable

import pytest
from _llm_server import EmbeddingServer, _QuietServer, free_port

from sirerag.cli.main import main
from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.llm.base import LLMRequest, TransientLLMError
from sirerag.llm.cache import CachedLLM, CallCache
from sirerag.llm.factory import load_llm
from sirerag.llm.probe import Endpoint, check_endpoint
from sirerag.llm.reply import MAX_REPLY_BYTES, reply_cap

FAST = LLMConfig(max_retries=2, retry_base_delay=0.0, retry_max_delay=0.0, timeout=10.0, max_concurrency=2)


def reply(content: object, **extra: object) -> bytes:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2}, **extra}).encode()


class ScriptedServer:
    """``POST .../chat/completions`` answers ``body(request)`` (bytes, HTTP 200); ``GET .../models``
    answers ``models_status``. ``posts`` counts the chat requests."""

    def __init__(self, body: Callable[[dict], bytes], models_status: int = 200) -> None:
        self.body, self.models_status, self.posts = body, models_status, 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._send(outer.models_status, b'{"object": "list", "data": [{"id": "m"}]}')

            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with outer.lock:
                    outer.posts += 1
                self._send(200, outer.body(request))

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def scripted():
    servers: list[ScriptedServer] = []

    def make(body: Callable[[dict], bytes], **kwargs: object) -> ScriptedServer:
        servers.append(ScriptedServer(body, **kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def req(text: str = "hello", max_tokens: int = 8) -> LLMRequest:
    return LLMRequest(messages=(("user", text),), max_tokens=max_tokens, prompt_version="test@1")


BAD_BODIES = {
    "content is a number": lambda r: reply(12345),
    "content is null": lambda r: reply(None),
    "cut-off JSON body": lambda r: reply("a fine answer")[:40],
    "not JSON at all": lambda r: b"<html>gateway</html>",
    "no choices": lambda r: json.dumps({"id": "x", "model": "m"}).encode(),
    "empty choices": lambda r: json.dumps({"id": "x", "model": "m", "choices": []}).encode(),
    "a JSON list": lambda r: b"[1, 2]",
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_a_malformed_reply_is_retried_then_one_transient_error(scripted, name):
    server = scripted(BAD_BODIES[name])
    llm = load_llm(f"openai:m@{server.url}", config=FAST)
    with pytest.raises(TransientLLMError, match=r"malformed reply: .*gave up after 3 attempts") as info:
        llm.complete(req())
    assert "\n" not in str(info.value)
    assert server.posts == FAST.max_retries + 1


def test_a_malformed_reply_is_never_cached_and_the_mended_server_is_asked_again(scripted, tmp_path):
    state = {"good": False}
    server = scripted(lambda r: reply("the real summary") if state["good"] else reply(12345))
    cache_dir = tmp_path / "llm"
    first = load_llm(f"openai:m@{server.url}", config=FAST, cache_dir=cache_dir)
    results = first.complete_many([req("a"), req("b")], return_exceptions=True)
    assert all(isinstance(r, TransientLLMError) for r in results)
    first.cache.close()
    assert CallCache(cache_dir).stats()["entries"] == 0  # nothing of the bad answers was stored
    state["good"] = True
    again = load_llm(f"openai:m@{server.url}", config=FAST, cache_dir=cache_dir)
    assert [c.text for c in again.complete_many([req("a"), req("b")])] == ["the real summary"] * 2


def test_a_completion_over_the_byte_cap_is_refused_without_reading_it_whole(scripted):
    huge = "x" * (5 << 20)
    server = scripted(lambda r: reply(huge))
    llm = load_llm(f"openai:m@{server.url}", config=FAST)
    with pytest.raises(TransientLLMError, match=rf"reply over {reply_cap(8)} bytes"):
        llm.complete(req(max_tokens=8))
    assert reply_cap(8) < 100_000 and reply_cap(10**9) == MAX_REPLY_BYTES


def test_a_bounded_reply_within_the_cap_is_used(scripted):
    server = scripted(lambda r: reply("y" * 500))
    out = load_llm(f"openai:m@{server.url}", config=FAST).complete(req(max_tokens=256))
    assert out.text == "y" * 500 and (out.prompt_tokens, out.completion_tokens) == (3, 2)


def test_a_cached_llm_refuses_a_non_string_completion_of_any_backend(tmp_path):
    from sirerag.llm.base import Completion

    class Broken:
        spec, model = "test:broken", "broken"

        def complete_many(self, requests, *, return_exceptions=False):
            return [Completion(text=12345, prompt_tokens=1, completion_tokens=1) for _ in requests]  # type: ignore[arg-type]

    llm = CachedLLM(Broken(), CallCache(tmp_path))
    with pytest.raises(TransientLLMError, match="not a string"):
        llm.complete(req())
    assert llm.cache.stats()["entries"] == 0


# --- endpoints checked before any work ---------------------------------------------------------

def test_the_endpoint_check_names_a_down_server(monkeypatch):
    port = free_port()
    endpoint = Endpoint("--llm", "chat", "m", (f"http://127.0.0.1:{port}/v1",))
    with pytest.raises(ConfigError, match=rf"^--llm openai:m at http://127\.0\.0\.1:{port}/v1: connection error"):
        check_endpoint(endpoint)


def test_the_endpoint_check_asks_a_server_without_a_model_list_for_one_token(scripted):
    server = scripted(lambda r: reply("p"), models_status=404)
    assert check_endpoint(Endpoint("--llm", "chat", "m", (server.url,))) == [server.url]
    assert server.posts == 1
    wrong = scripted(lambda r: b'{"unrelated": true}', models_status=404)
    with pytest.raises(ConfigError, match=r"answered a chat request without 'choices'"):
        check_endpoint(Endpoint("--llm", "chat", "m", (wrong.url,)))


def test_the_endpoint_check_reports_a_refused_key(scripted, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-w25")
    server = scripted(lambda r: reply("p"), models_status=401)
    with pytest.raises(ConfigError, match=r"refused the key \(HTTP 401\); check OPENAI_API_KEY") as info:
        check_endpoint(Endpoint("--embedder", "embeddings", "m", (server.url,)))
    assert "sk-secret-w25" not in str(info.value)


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    rows = [{"id": f"d{i}", "title": f"T{i}", "text": f"Town {i} lies on river {i % 3}. It has {i} bridges."}
            for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("option", ["--llm", "--embedder", "--extractor-llm"])
def test_a_build_stops_at_a_down_endpoint_before_any_work(tmp_path, capsys, monkeypatch, option):
    import sirerag.embedding as embedding

    def never(*args, **kwargs):
        raise AssertionError("the embedder was loaded before the endpoint check")

    monkeypatch.setattr(embedding, "load_embedder", never)
    down = f"openai:m@http://127.0.0.1:{free_port()}/v1"
    embeddings = EmbeddingServer()
    try:
        args = {"--llm": ["--trees", "similarity", "--llm", down],
                "--embedder": ["--trees", "none", "--embedder", down],
                "--extractor-llm": ["--trees", "relatedness", "--extractor-llm", down]}[option]
        if option != "--embedder":
            args += ["--embedder", f"openai:fake@{embeddings.url}"]
        out = tmp_path / "idx"
        assert main(["build", str(_corpus(tmp_path)), "--out", str(out), "--chunking", "passage", "--quiet",
                     *args]) == 1
    finally:
        embeddings.close()
    line = _one_error_line(capsys)
    assert re.search(rf"{option} openai:m at http://127\.0\.0\.1:\d+/v1: connection error", line)
    assert not out.exists()


def test_a_build_whose_llm_answers_numbers_fails_in_one_line_and_caches_nothing(scripted, tmp_path, capsys,
                                                                              monkeypatch):
    """The issue's case: ``"content": 12345`` ended in an AttributeError and was cached as the text."""
    state = {"good": False}
    server = scripted(lambda r: reply("A summary of the towns.") if state["good"] else reply(12345))
    embeddings = EmbeddingServer()
    config = tmp_path / "llm.toml"
    config.write_text("[llm]\nmax_retries = 1\nretry_base_delay = 0.0\nretry_max_delay = 0.0\n")
    out = tmp_path / "idx"
    args = ["build", str(_corpus(tmp_path)), "--out", str(out), "--chunking", "passage", "--trees", "similarity",
            "--embedder", f"openai:fake@{embeddings.url}", "--llm", f"openai:m@{server.url}",
            "--config", str(config), "--quiet"]
    try:
        assert main(args) == 1
        assert "malformed reply" in _one_error_line(capsys)
        state["good"] = True
        assert main(args) == 0
    finally:
        embeddings.close()
    summaries = [json.loads(line) for line in (out / "entries.jsonl").read_text().splitlines()]
    texts = [e["text"] for e in summaries if e["kind"] == "summary"]
    assert texts and all(t == "A summary of the towns." for t in texts)


def test_openai_itself_is_an_endpoint_too_and_needs_a_key(tmp_path, capsys, monkeypatch):
    from sirerag.core.config import BuildConfig
    from sirerag.pipeline.endpoints import endpoints_of

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = BuildConfig(trees=("similarity",)).with_overrides(llm={"spec": "openai:gpt-x"},
                                                               embedder={"spec": "openai:emb@http://127.0.0.1:9/v1"})
    assert [(e.option, e.urls) for e in endpoints_of(config)] == [("--llm", ("https://api.openai.com/v1",)),
                                                                  ("--embedder", ("http://127.0.0.1:9/v1",))]
    assert main(["build", str(_corpus(tmp_path)), "--out", str(tmp_path / "idx"), "--trees", "similarity",
                 "--llm", "openai:gpt-x", "--quiet"]) == 1
    # the build's loadability check (the dry run's too) says it before the endpoint probe would
    assert "openai:gpt-x calls the paid OpenAI API and needs a key in the environment variable " \
           "OPENAI_API_KEY" in _one_error_line(capsys)
    assert not (tmp_path / "idx").exists()


def test_a_server_that_accepts_but_never_answers_gets_the_request_timeout():
    import socket

    with socket.socket() as listener:  # the kernel accepts connections; nobody ever answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        with pytest.raises(ConfigError, match=r"^--llm openai:m at .*: no answer within 0\.3s"):
            check_endpoint(Endpoint("--llm", "chat", "m", (url,), timeout=0.3))
