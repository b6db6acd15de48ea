"""The shared network layer of the OpenAI chat backend and the OpenAI embedder (no server needed)."""
from __future__ import annotations

import pytest

from sirerag.embedding import load_embedder
from sirerag.core.errors import ConfigError
from sirerag.llm.factory import parse_spec
from sirerag.http import RetryPolicy, public_url, split_openai_spec


def test_one_spec_rule_for_chat_and_embeddings():
    assert split_openai_spec("gpt-4o-mini") == ("gpt-4o-mini", None)
    assert split_openai_spec("m@https://h.example:8443/v1/") == ("m", "https://h.example:8443/v1/")
    assert split_openai_spec("org/model@2024@http://127.0.0.1:8000/v1") == ("org/model@2024", "http://127.0.0.1:8000/v1")
    assert split_openai_spec("@http://127.0.0.1:8000/v1", default_model="emb") == ("emb", "http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="an openai: spec needs a model name"):
        split_openai_spec("@http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="server URL must look like http://HOST:PORT/v1, got 'http:///v1'"):
        split_openai_spec("m@http:///v1")
    # the chat factory and the embedder use it: the same URL gives the same parts
    assert parse_spec("openai:m@http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="server URL must look like"):
        load_embedder("openai:m@http://:9/v1")


def test_public_url_drops_credentials_query_and_fragment():
    assert public_url("https://user:sk-secret@host.example:8443/v1/?key=sk-secret#x") == "https://host.example:8443/v1"
    assert public_url("http://127.0.0.1/v1") == "http://127.0.0.1/v1"


def test_backoff_is_exponential_with_equal_jitter_and_honours_retry_after():
    policy = RetryPolicy(max_retries=5, base_delay=1.0, max_delay=8.0)
    for attempt, cap in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (6, 8.0)]:
        delays = [policy.delay(attempt) for _ in range(200)]
        assert cap / 2 <= min(delays) and max(delays) <= cap
        assert max(delays) - min(delays) > cap / 4  # jittered, not fixed
    assert policy.delay(0, retry_after=5.0) == 5.0  # the server's Retry-After wins over a shorter backoff
    assert policy.delay(0, retry_after=600.0) == 8.0  # ... up to the maximum delay
