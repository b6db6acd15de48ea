"""Retry policy and bounded concurrency of the OpenAI-compatible backend, against a local
HTTP server that fails on purpose (429/5xx/timeouts are retried; other 4xx never)."""
from __future__ import annotations

import time

import pytest
from _llm_server import FlakyServer, free_port

from sirerag.core.config import LLMConfig
from sirerag.llm.base import LLMCallError, LLMRequest, TransientLLMError
from sirerag.llm.cache import CachedLLM, CallCache
from sirerag.llm.factory import load_llm

FAST = LLMConfig(max_retries=3, retry_base_delay=0.01, retry_max_delay=0.05, timeout=5.0, max_concurrency=4)


def req(text: str) -> LLMRequest:
    return LLMRequest(messages=(("user", text),), max_tokens=8, prompt_version="test@1")


@pytest.fixture()
def flaky():
    with FlakyServer() as server:
        yield server


def backend(server: FlakyServer, config: LLMConfig = FAST):
    return load_llm(f"openai:test-model@{server.url}", config=config)


@pytest.mark.parametrize("code", [429, 500, 502, 503])
def test_transient_errors_are_retried_until_success(flaky, code):
    llm = backend(flaky)
    message = f"[fail:{code}:2:a] hello"
    out = llm.complete(req(message))
    assert out.text == f"echo: {message}"
    assert flaky.seen[message] == 3  # two failures, then the answer
    assert (out.prompt_tokens, out.completion_tokens) == (11, 5)  # the server's usage is reported


def test_transient_errors_give_up_after_max_retries(flaky):
    llm = backend(flaky)
    with pytest.raises(TransientLLMError, match="HTTP 500.*gave up after 4 attempts"):
        llm.complete(req("[always:500] x"))
    assert flaky.seen["[always:500] x"] == FAST.max_retries + 1


@pytest.mark.parametrize("code", [400, 401, 404, 422])
def test_other_client_errors_are_never_retried(flaky, code):
    llm = backend(flaky)
    message = f"[always:{code}] y"
    with pytest.raises(LLMCallError, match=f"HTTP {code} \\(not retried\\)") as info:
        llm.complete(req(message))
    assert not isinstance(info.value, TransientLLMError)
    assert flaky.seen[message] == 1


def test_timeouts_are_retried(flaky):
    # the server holds every request until it is closed: every attempt times out, however busy the machine
    llm = backend(flaky, LLMConfig(max_retries=2, retry_base_delay=0.01, timeout=0.5))
    message = "[hold] slow"
    with pytest.raises(TransientLLMError, match="timed out.*gave up after 3 attempts"):
        llm.complete(req(message))
    # the last attempt was sent before the client gave up on it: wait until the server counted it
    deadline = time.monotonic() + 300  # a bound on an event that must happen, not a race
    while flaky.seen.get(message, 0) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert flaky.seen[message] == 3


def test_connection_errors_are_retried():
    llm = load_llm(f"openai:m@http://127.0.0.1:{free_port()}/v1",
                   config=LLMConfig(max_retries=2, retry_base_delay=0.01, timeout=2.0))
    with pytest.raises(TransientLLMError, match="connection error.*gave up after 3 attempts"):
        llm.complete(req("anyone there?"))


def test_failures_are_returned_per_item_and_never_cached(flaky, tmp_path):
    llm = CachedLLM(backend(flaky), CallCache(tmp_path / "cache"))
    requests = [req("first"), req("[always:400] second"), req("[fail:503:1:c] third")]
    results = llm.complete_many(requests, return_exceptions=True)
    assert results[0].text == "echo: first" and results[2].text == "echo: [fail:503:1:c] third"
    assert isinstance(results[1], LLMCallError)
    assert llm.cache.stats()["entries"] == 2  # the failure is not stored as output
    with pytest.raises(LLMCallError, match="HTTP 400"):
        llm.complete_many(requests)  # without return_exceptions the failure raises ...
    assert flaky.seen["first"] == 1 and flaky.seen["[always:400] second"] == 2  # ... and only it is re-sent
    stats = llm.cache.stats()["all_runs"]
    assert (stats["hits"], stats["misses"], stats["failures"]) == (2, 2, 2)


def test_concurrency_is_bounded(flaky):
    # [gate:3] holds each request until three are in flight together: one after another, they
    # would be refused (503 after 30 s, more than the client's timeout)
    llm = backend(flaky, LLMConfig(max_concurrency=3, timeout=60.0, max_retries=0))
    requests = [req(f"[gate:3] n{i}") for i in range(9)]
    results = llm.complete_many(requests)
    assert [r.text for r in results] == [f"echo: [gate:3] n{i}" for i in range(9)]  # in request order
    assert flaky.max_in_flight == 3  # three at once, never more


def test_a_request_stops_counting_as_in_flight_before_its_reply_is_written(flaky, monkeypatch):
    """The race behind a flaky ``assert 4 == 3`` above: the client sends its next request as soon as it has read a
    reply, which may be before the handler that wrote it counts it out. Here the first reply's handler is held,
    just after writing, until the second request has been counted: the two must never count together."""
    import socketserver
    import threading

    second_counted = threading.Event()
    handler = flaky.httpd.RequestHandlerClass
    answer, write = handler._answer, socketserver._SocketWriter.write

    def counting_answer(self, message, count, body):
        if message == "second":
            second_counted.set()
        return answer(self, message, count, body)

    def held_write(self, data):
        written = write(self, data)
        if b"echo: first" in bytes(data):
            second_counted.wait(timeout=10)
        return written

    monkeypatch.setattr(handler, "_answer", counting_answer)
    monkeypatch.setattr(socketserver._SocketWriter, "write", held_write)
    llm = backend(flaky, LLMConfig(max_concurrency=1, timeout=30.0, max_retries=0))
    assert llm.complete(req("first")).text == "echo: first"
    assert llm.complete(req("second")).text == "echo: second"
    assert second_counted.is_set() and flaky.max_in_flight == 1


def test_key_is_sent_but_never_leaks_into_errors(flaky, monkeypatch):
    secret = "sk-test-5f3a9c1d7e2b4a6f8091"
    monkeypatch.setenv("SIRERAG_TEST_KEY", secret)
    llm = backend(flaky, LLMConfig(api_key_env="SIRERAG_TEST_KEY", max_retries=0))
    assert secret not in llm.spec
    with pytest.raises(LLMCallError, match=r"HTTP 401 \(not retried\)") as info:
        llm.complete(req("[echo-auth]"))
    assert flaky.auth[-1] == f"Bearer {secret}"  # the server did receive the key ...
    assert secret not in str(info.value) and "***" in str(info.value)  # ... the error does not repeat it
