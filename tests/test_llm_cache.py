"""The SQLite call cache: keys, hits and misses, failures never stored, concurrent threads,
resuming an interrupted run, and ``sirerag cache stats``."""
from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace

import pytest
from _llm_server import FlakyServer

from sirerag.cli.main import main
from sirerag.core.config import LLMConfig
from sirerag.llm.base import Completion, LLMCallError, LLMRequest, StreamingLLM
from sirerag.llm.cache import CachedLLM, CallCache, cache_key, resolve_db
from sirerag.llm.factory import load_llm


class ReverseLLM(StreamingLLM):
    """A deterministic in-process model for cache tests: answers with the reversed prompt,
    fails permanently on prompts containing 'BAD', and counts what reaches it."""

    spec = "test:reverse"
    model = "reverse"

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def iter_complete(self, requests):
        for i, r in enumerate(requests):
            with self.lock:
                self.calls += 1
            text = r.messages[-1][1]
            if "BAD" in text:
                yield i, LLMCallError("refused")
            else:
                yield i, Completion(text=text[::-1], prompt_tokens=len(text), completion_tokens=len(text))


def req(text: str, **kw) -> LLMRequest:
    return LLMRequest(messages=(("system", "s"), ("user", text)), prompt_version="p@1", **kw)


def test_key_depends_on_every_input():
    base = req("hello", max_tokens=10)
    key = cache_key("openai:m", "m", base)
    variants = [
        cache_key("openai:other", "m", base),
        cache_key("openai:m", "other", base),
        cache_key("openai:m", "m", replace(base, prompt_version="p@2")),
        cache_key("openai:m", "m", req("hello!", max_tokens=10)),
        cache_key("openai:m", "m", replace(base, max_tokens=11)),
        cache_key("openai:m", "m", replace(base, temperature=0.5)),
        cache_key("openai:m", "m", replace(base, json_mode=True)),
        cache_key("openai:m", "m", replace(base, messages=(("user", "s"), ("user", "hello")))),
    ]
    assert len(set(variants + [key])) == len(variants) + 1
    assert key == cache_key("openai:m", "m", req("hello", max_tokens=10))


def test_second_run_makes_no_calls_and_duplicates_are_sent_once(tmp_path):
    inner = ReverseLLM()
    llm = CachedLLM(inner, CallCache(tmp_path))
    requests = [req("abc"), req("xyz"), req("abc")]
    first = llm.complete_many(requests)
    assert [c.text for c in first] == ["cba", "zyx", "cba"]
    assert inner.calls == 2 and [c.cached for c in first] == [False, False, True]
    again = CachedLLM(inner, CallCache(tmp_path)).complete_many(requests)  # a new run, same folder
    assert inner.calls == 2
    assert [c.text for c in again] == ["cba", "zyx", "cba"] and all(c.cached for c in again)
    assert (again[0].prompt_tokens, again[0].completion_tokens) == (3, 3)
    stats = CallCache(tmp_path).stats()
    assert stats["entries"] == 2 and stats["all_runs"]["runs"] == 2
    assert (stats["last_run"]["hits"], stats["last_run"]["misses"]) == (3, 0)
    assert (stats["all_runs"]["hits"], stats["all_runs"]["misses"]) == (4, 2)


def test_failures_are_never_stored(tmp_path):
    inner = ReverseLLM()
    llm = CachedLLM(inner, CallCache(tmp_path))
    out = llm.complete_many([req("ok"), req("BAD one")], return_exceptions=True)
    assert out[0].text == "ko" and isinstance(out[1], LLMCallError)
    with pytest.raises(LLMCallError, match="refused"):
        llm.complete(req("BAD one"))
    assert inner.calls == 3  # the failure was asked again, the success was not
    assert [e["text"] for e in llm.cache.entries()] == ["ko"]


def test_concurrent_threads_share_one_cache(tmp_path):
    inner = ReverseLLM()
    llm = CachedLLM(inner, CallCache(tmp_path))
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(40):
                assert llm.complete(req(f"item {i % 20}")).text == f"item {i % 20}"[::-1]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = llm.cache.stats()
    assert stats["entries"] == 20
    assert stats["all_runs"]["hits"] + stats["all_runs"]["misses"] == 8 * 40
    assert inner.calls == stats["all_runs"]["misses"]  # every call that reached the model was stored once
    with sqlite3.connect(resolve_db(tmp_path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


class StopAfter(StreamingLLM):
    """Wraps a real backend and dies after ``n`` results, like a build killed midway."""

    def __init__(self, inner, n: int) -> None:
        self.inner, self.n = inner, n
        self.spec, self.model = inner.spec, inner.model

    def iter_complete(self, requests):
        for count, item in enumerate(self.inner.iter_complete(requests), start=1):
            yield item
            if count == self.n:
                raise KeyboardInterrupt("killed")


def test_interrupted_run_resumes_paying_only_for_what_is_missing(tmp_path):
    with FlakyServer() as server:
        # a long timeout: on a busy machine a slow answer must not turn into a retry the test would count
        config = LLMConfig(max_concurrency=1, timeout=120.0)
        requests = [req(f"question {i}") for i in range(7)]
        dying = StopAfter(load_llm(f"openai:m@{server.url}", config=config), n=3)
        with pytest.raises(KeyboardInterrupt, match="killed"):
            CachedLLM(dying, CallCache(tmp_path)).complete_many(requests)
        assert CallCache(tmp_path).stats()["entries"] == 3
        before = dict(server.seen)

        resumed = CachedLLM(load_llm(f"openai:m@{server.url}", config=config), CallCache(tmp_path))
        out = resumed.complete_many(requests)
        assert [c.text for c in out] == [f"echo: question {i}" for i in range(7)]
        assert resumed.inner.usage.total().calls == 4  # only the 4 missing requests reached the server
        asked = {m for m, n in server.seen.items() if n > before.get(m, 0)}
        assert asked == {f"question {i}" for i in range(3, 7)}  # the resumed run asked for exactly those
        assert sum(c.cached for c in out) == 3


def test_cache_stats_command(tmp_path, capsys):
    index = tmp_path / "index"
    llm = CachedLLM(ReverseLLM(), CallCache(index / "cache" / "llm"))
    llm.complete_many([req("one"), req("two"), req("one")])
    (index / "manifest.json").write_text("{}")
    assert main(["cache", "stats", str(index)]) == 0
    out = capsys.readouterr().out
    assert "entries 2" in out and "1 hits, 2 misses" in out and "test:reverse  p@1" in out
    assert main(["cache", "stats", str(tmp_path / "missing")]) == 1
    assert "no LLM call cache" in capsys.readouterr().err
