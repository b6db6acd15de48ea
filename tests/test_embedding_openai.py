"""The OpenAI-compatible embedder against a local HTTP server (no sentence-transformers needed)."""
from __future__ import annotations

import logging
import sqlite3
import sys

import numpy as np
import pytest
from _llm_server import EmbeddingServer, fake_vector

from sirerag.embedding import load_embedder
from sirerag.core.errors import ConfigError, MissingExtraError, SireragError

SECRET = "sk-test-secret-0123456789"


@pytest.fixture
def api(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    servers: list[EmbeddingServer] = []

    def start(statuses=None) -> EmbeddingServer:
        servers.append(EmbeddingServer(statuses))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _expected(texts: list[str]) -> np.ndarray:
    m = np.asarray([fake_vector(t) for t in texts], dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_openai_retries_transient_errors_then_succeeds(api, caplog):
    from sirerag.embedding.openai import OpenAIEmbedder

    server = api([429, 503])
    embedder = OpenAIEmbedder("emb-model", base_url=server.url, batch_size=2, retry_base_delay=0.01,
                              show_progress=False)
    texts = ["alpha", "banana", "cherry"]
    with caplog.at_level(logging.DEBUG):
        vectors = embedder.encode_documents(texts)
    np.testing.assert_allclose(vectors, _expected(texts), rtol=1e-6)  # in input order, normalised
    assert [len(r["input"]) for r in server.requests] == [2, 2, 2, 1]  # two retries, then two batches
    assert server.requests[0]["auth"] == f"Bearer {SECRET}"
    assert "HTTP 429" in caplog.text and "retry 1/5" in caplog.text
    assert SECRET not in caplog.text and SECRET not in embedder.spec and SECRET not in repr(embedder)


def test_openai_does_not_retry_client_errors(api):
    from sirerag.embedding.openai import OpenAIEmbedder

    server = api([400, 200])
    embedder = OpenAIEmbedder("emb-model", base_url=server.url, retry_base_delay=0.01, show_progress=False)
    with pytest.raises(SireragError, match=r"openai:emb-model@http://127\.0\.0\.1:\d+/v1: embeddings request "
                                           r"failed: HTTP 400"):
        embedder.encode_documents(["x"])
    assert len(server.requests) == 1


def test_openai_gives_up_after_max_retries(api):
    from sirerag.embedding.openai import OpenAIEmbedder

    server = api([500, 500, 500])
    embedder = OpenAIEmbedder("m", base_url=server.url, max_retries=2, retry_base_delay=0.01,
                              show_progress=False)
    with pytest.raises(SireragError, match="HTTP 500"):
        embedder.encode_queries(["x"])
    assert len(server.requests) == 3


def test_openai_spec_cache_and_no_key_anywhere(api, tmp_path, monkeypatch):
    server = api()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # the URL may come from the environment too
    embedder = load_embedder("openai:emb-model", cache_dir=tmp_path, show_progress=False)
    assert embedder.spec == f"openai:emb-model@{server.url}"
    assert embedder.dim == 3  # unknown model behind a custom URL: probed once
    texts = ["one", "two", ""]
    np.testing.assert_allclose(embedder.encode_documents(texts), _expected(["one", "two", " "]), rtol=1e-6)
    assert embedder.encode_documents(texts).shape == (3, 3) and embedder.stats.misses == 3
    assert len(server.requests) == 2  # the probe and one batch; the second encode was all hits
    for path in tmp_path.rglob("*"):
        assert SECRET.encode() not in path.read_bytes(), path
    rows = sqlite3.connect(tmp_path / "embeddings.sqlite").execute("SELECT DISTINCT spec FROM embeddings").fetchall()
    assert rows == [(embedder.spec,)]


def test_openai_without_key_or_package(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="needs an API key in the environment variable OPENAI_API_KEY"):
        load_embedder("openai:text-embedding-3-small")
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'sirerag\[openai\]'"):
        load_embedder("openai")
