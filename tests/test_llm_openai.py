"""The OpenAI-compatible backend against a real server: llama.cpp serving SmolLM2 on loopback.

What is asserted is what the backend does with the server (usage, finish reasons, JSON mode,
order, the cache, secrets), never what the 135M model answers: its output varies with the
llama.cpp build. The reader's quality is measured in docs/llm.md.
"""
from __future__ import annotations

import json
import logging

import pytest
from _llm_server import server_url

from sirerag.core.config import LLMConfig
from sirerag.core.errors import ConfigError
from sirerag.llm.base import LLMRequest
from sirerag.llm.factory import load_llm, parse_spec
from sirerag.llm.prompts import QA_READER
from sirerag.trees.llm_summarizer import LLMSummarizer

pytestmark = [pytest.mark.server, pytest.mark.slow]

SECRET = "sk-sirerag-test-9d2f7c41b8e05a63"


@pytest.fixture(scope="module")
def url() -> str:
    return server_url()


def ask(context: str, question: str) -> LLMRequest:
    return QA_READER.request(max_tokens=12, context=context, question=question)


def test_completion_with_usage(url):
    llm = load_llm(f"openai:smollm2@{url}", config=LLMConfig())
    assert llm.spec == "openai:smollm2"
    out = llm.complete(ask("The Eiffel Tower is in Paris.", "In which city is the Eiffel Tower?"))
    assert out.text == out.text.strip() and out.prompt_tokens > 20 and 0 < out.completion_tokens <= 12
    assert out.finish_reason in ("stop", "length") and not out.cached


def test_json_mode_returns_a_json_object(url):
    llm = load_llm(f"openai:smollm2@{url}", config=LLMConfig())
    request = LLMRequest(messages=(("user", "Give a JSON object with the keys city and country for Paris."),),
                         max_tokens=60, json_mode=True)
    out = llm.complete(request)
    assert isinstance(json.loads(out.text), dict)


def test_concurrent_requests_come_back_in_order(url):
    llm = load_llm(f"openai:smollm2@{url}", config=LLMConfig(max_concurrency=3))
    # contexts of growing length: the prompt tokens the server counts identify each answer
    requests = [ask(" ".join(["Paris is the capital of France."] * (i + 1)), "What is the capital of France?")
                for i in range(5)]
    out = llm.complete_many(requests)
    counts = [o.prompt_tokens for o in out]
    assert counts == sorted(counts) and len(set(counts)) == len(requests), counts
    assert llm.usage.total().calls == len(requests)


def test_summaries_through_the_server_are_cached(url, tmp_path):
    llm = load_llm(f"openai:smollm2@{url}", config=LLMConfig(max_concurrency=2), cache_dir=tmp_path)
    summarizer = LLMSummarizer(llm, max_tokens=24)
    groups = [["The river Tame flows through Elmford.", "A bridge over the Tame opened in 1931."],
              ["Margaret Lowe was an engineer.", "She designed the Harwick Bridge."]]
    first = summarizer.summarize(groups)
    assert len(first) == 2 and all(first) and summarizer.spec == "llm:openai:smollm2"
    assert summarizer.summarize(groups) == first
    runs = llm.cache.stats()["all_runs"]
    assert (runs["hits"], runs["misses"]) == (2, 2)


def test_no_secret_in_any_file_written(url, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    llm = load_llm(f"openai:smollm2@{url}", config=LLMConfig(), cache_dir=tmp_path / "cache")
    llm.complete_many([ask("Oslo is the capital of Norway.", "What is the capital of Norway?")])
    llm.cache.close()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text


def test_openai_without_key_is_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        load_llm("openai:gpt-4o-mini", config=LLMConfig())
    assert parse_spec("openai:gpt-4o-mini@http://127.0.0.1:8000/v1").base_url == "http://127.0.0.1:8000/v1"
    with pytest.raises(ConfigError, match="llm spec must look like"):
        load_llm("gpt-4o-mini", config=LLMConfig())
