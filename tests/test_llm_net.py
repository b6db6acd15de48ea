"""The shared network layer of the OpenAI chat backend and the OpenAI embedder (no server needed)."""
from __future__ import annotations

import re

import pytest

from sirerag.embedding import load_embedder
from sirerag.core.errors import ConfigError
from sirerag.llm.factory import parse_spec
from sirerag.llm.http import RetryPolicy, public_url, split_openai_spec


def test_one_spec_rule_for_chat_and_embeddings():
    assert split_openai_spec("gpt-4o-mini") == ("gpt-4o-mini", None)
    assert split_openai_spec("m@https://h.example:8443/v1/") == ("m", "https://h.example:8443/v1/")
    assert split_openai_spec("org/model@HTTP://127.0.0.1:8000/v1") == ("org/model", "HTTP://127.0.0.1:8000/v1")
    assert split_openai_spec("@http://127.0.0.1:8000/v1", default_model="emb") == ("emb", "http://127.0.0.1:8000/v1")
    # model names of local servers that are not addresses stay model names
    for model in ("llama3:8b", "qwen2.5:0.5b", "Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B", "gpt-4.1"):
        assert split_openai_spec(model) == (model, None)
    with pytest.raises(ConfigError, match="^openai spec openai:@http://127.0.0.1:8000/v1: no model name"):
        split_openai_spec("@http://127.0.0.1:8000/v1")
    with pytest.raises(ConfigError, match="the server URL must be http:// or https:// with a host, e.g. "
                                          "http://HOST:PORT/v1; got 'http:///v1'"):
        split_openai_spec("m@http:///v1")
    # the chat factory and the embedder use it: the same URL gives the same parts
    assert parse_spec("openai:m@http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ConfigError, match="the server URL must be http:// or https://"):
        load_embedder("openai:m@http://:9/v1")


#: URL typos that sent every request to api.openai.com: the whole text was taken for a model name
TYPOS = {
    "x@localhost:18451/v1": "the server URL must be http:// or https:// with a host.*got 'localhost:18451/v1'",
    "x@127.0.0.1:18451": "the server URL must be http:// or https:// with a host.*got '127.0.0.1:18451'",
    "x@ftp://127.0.0.1/v1": "the server URL must be http:// or https:// with a host.*got 'ftp://127.0.0.1/v1'",
    "x@": "the server URL must be http:// or https://",
    "org/model@2024@http://127.0.0.1:8000/v1": "got '2024@http://127.0.0.1:8000/v1'",
    "localhost:18451/v1": "'localhost:18451/v1' reads as a server address, not a model name",
    "127.0.0.1:18451": "'127.0.0.1:18451' reads as a server address",
    "x:8000": "'x:8000' reads as a server address",
    "127.0.0.1/v1": "'127.0.0.1/v1' reads as a server address",
    "localhost/v1": "'localhost/v1' reads as a server address",
    "api.example.com/v1": "'api.example.com/v1' reads as a server address",
    "[::1]:8000/v1": "reads as a server address",
    "http://127.0.0.1:18451/v1": "'http://127.0.0.1:18451/v1' reads as a server address",
    "ftp://127.0.0.1/v1": "reads as a server address",
}


@pytest.mark.parametrize("rest", list(TYPOS))
def test_a_spec_that_names_an_address_wrongly_is_refused_for_llms_and_embedders(rest, tmp_path):
    from sirerag.llm.factory import load_llm

    pattern = TYPOS[rest]
    with pytest.raises(ConfigError, match=f"^openai spec openai:.*: .*{pattern}"):
        split_openai_spec(rest)
    with pytest.raises(ConfigError, match=f"^llm spec openai:.*{pattern}"):
        parse_spec(f"openai:{rest}")
    with pytest.raises(ConfigError, match=f"^--llm openai:.*{pattern}"):
        parse_spec(f"openai:{rest}", option="--llm")
    with pytest.raises(ConfigError, match=pattern):
        load_llm(f"openai:{rest}")
    with pytest.raises(ConfigError, match=f"^embedder spec openai:.*{pattern}"):
        load_embedder(f"openai:{rest}", cache_dir=tmp_path / "cache")


def test_every_server_of_a_list_must_be_an_http_url():
    assert parse_spec("openai:m@http://127.0.0.1:1/v1,https://h.example/v1").base_urls == \
        ("http://127.0.0.1:1/v1", "https://h.example/v1")
    for bad in ("localhost:2/v1", "ftp://127.0.0.1/v1", "127.0.0.1:2"):
        with pytest.raises(ConfigError, match=f"^--llm openai:m@...,{re.escape(bad)}: the server URL must be "
                                              "http:// or https://"):
            parse_spec(f"openai:m@http://127.0.0.1:1/v1,{bad}", option="--llm")


def test_an_error_never_shows_the_user_info_of_a_url():
    with pytest.raises(ConfigError, match=r"http:// or https://") as info:
        split_openai_spec("m@ftp://user:sk-secret@127.0.0.1/v1")
    assert "sk-secret" not in str(info.value) and "ftp://127.0.0.1/v1" in str(info.value)
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1") as info:
        split_openai_spec("m@user:sk-secret@127.0.0.1:1/v1")
    assert "sk-secret" not in str(info.value)


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
    capped = RetryPolicy(max_retries=5, base_delay=0.0, max_delay=60.0, retry_after_max=30.0)
    assert capped.delay(0, retry_after=100000.0) == 30.0  # ... and up to llm.retry_after_max
