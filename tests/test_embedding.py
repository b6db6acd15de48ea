from __future__ import annotations

import logging
import os
import socket
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _llm_server import EmbeddingServer, fake_vector

from sirerag.embedding import CachedEmbedder, EmbeddingCache, load_embedder
from sirerag.errors import ConfigError, MissingExtraError, SireragError

st_backend = pytest.importorskip("sirerag.embedding.sentence_transformers")
pytest.importorskip("sentence_transformers")

PAIR = ["A man is eating food.", "A man is eating a piece of bread."]
UNRELATED = "The stock market fell sharply on Tuesday."
SECRET = "sk-test-secret-0123456789"


def _no_network(*args, **kwargs):
    raise OSError("network access attempted during a test that must run offline")


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 from the shipped package, loaded once with sockets disabled."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _no_network)
        mp.setattr(socket, "getaddrinfo", _no_network)
        return load_embedder("minilm", show_progress=False)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --- sentence-transformers -------------------------------------------------------------

def test_minilm_loads_without_network_and_leaves_environment_alone(monkeypatch):
    monkeypatch.setattr(socket.socket, "connect", _no_network)
    monkeypatch.setattr(socket, "getaddrinfo", _no_network)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    before = dict(os.environ)
    folder = str(st_backend.minilm_dir().resolve())
    model = st_backend._load_model.__wrapped__(folder, local_only=True)  # a fresh load, not the memo
    embedder = st_backend.SentenceTransformerEmbedder(model, "st:test", show_progress=False)
    vectors = embedder.encode_documents(PAIR)
    assert _cos(vectors[0], vectors[1]) > 0.7
    assert dict(os.environ) == before  # local_files_only keeps the load local; no switch is flipped


def test_few_texts_encode_on_one_thread_and_restore_the_count(minilm):
    torch = pytest.importorskip("torch")
    seen = []
    model = minilm.model
    original = model.encode_query
    try:
        model.encode_query = lambda *a, **k: (seen.append(torch.get_num_threads()), original(*a, **k))[1]
        before = torch.get_num_threads()
        minilm.encode_queries(PAIR)
        assert seen == [1] and torch.get_num_threads() == before
        minilm.encode_queries(PAIR * (st_backend.FEW_TEXTS // 2 + 1))
        assert seen[-1] == before
    finally:
        del model.encode_query


def test_minilm_output_contract(minilm):
    assert minilm.spec == "st:all-MiniLM-L6-v2" and minilm.dim == 384
    docs = minilm.encode_documents([*PAIR, UNRELATED])
    assert docs.dtype == np.float32 and docs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert _cos(docs[0], docs[1]) > 0.7 > _cos(docs[0], docs[2]) + 0.3
    # order is the caller's, whatever order the model batches in
    reverse = minilm.encode_documents([UNRELATED, PAIR[1], PAIR[0]])
    np.testing.assert_allclose(reverse, docs[::-1], atol=1e-5)
    np.testing.assert_allclose(minilm.encode_queries(PAIR), docs[:2], atol=1e-5)  # MiniLM has no prompts
    for side in (minilm.encode_documents, minilm.encode_queries):
        empty = side([])
        assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_st_local_path_spec(minilm):
    folder = st_backend.minilm_dir()
    embedder = load_embedder(f"st:{folder}", show_progress=False)
    assert embedder.spec == f"st:{folder.resolve()}" and embedder.dim == 384
    np.testing.assert_allclose(embedder.encode_documents(PAIR), minilm.encode_documents(PAIR), atol=1e-5)


def test_sha256_check_refuses_a_mismatched_file(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"not the real weights")
    with pytest.raises(SireragError, match=r"model\.safetensors: sha256 [0-9a-f]{64} does not match the "
                                           r"expected 53aa5117\.\.\.; .* refusing to load it"):
        st_backend.verify_sha256(weights, st_backend.MINILM_SHA256_PREFIX)
    digest = st_backend.verify_sha256(weights, "")  # any digest starts with ""
    assert st_backend.verify_sha256(weights, digest[:8]) == digest
    # load_minilm checks before loading anything
    with pytest.raises(SireragError, match="refusing to load it"):
        st_backend.load_minilm(tmp_path)
    with pytest.raises(SireragError, match="model file not found"):
        st_backend.verify_sha256(tmp_path / "absent.safetensors", "00")
    real = st_backend.minilm_dir() / "model.safetensors"
    assert st_backend.verify_sha256(real, "53aa5117").startswith("53aa5117")


def test_missing_sentence_transformers_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'sirerag\[local\]'"):
        load_embedder("minilm")
    with pytest.raises(MissingExtraError, match=r"sirerag\[local\]"):
        load_embedder("st:/some/model")


def test_bad_specs():
    for spec in ("bogus", "st:", "", "sentence-transformers"):
        with pytest.raises(ConfigError, match=r"embedder spec must be 'minilm', 'minilm-onnx', 'st:PATH_OR_NAME'"):
            load_embedder(spec)
    with pytest.raises(ConfigError, match="batch_size must be a positive integer, got 0"):
        load_embedder("minilm", batch_size=0)


# --- cache -----------------------------------------------------------------------------

TEXTS = [f"Passage number {i} talks about {topic}." for i, topic in
         enumerate(["rivers", "mountains", "kings", "rivers", "songs", "ships", "bread"])]


def test_cache_encodes_each_text_once(minilm, tmp_path):
    cached = CachedEmbedder(minilm, EmbeddingCache(tmp_path), block_size=3, show_progress=False)
    first = cached.encode_documents(TEXTS + TEXTS[:2])  # duplicates inside one call count once
    assert (cached.stats.hits, cached.stats.misses) == (0, len(TEXTS))
    np.testing.assert_allclose(first[: len(TEXTS)], minilm.encode_documents(TEXTS), atol=1e-5)
    second = cached.encode_documents(TEXTS)
    assert cached.stats.misses == len(TEXTS)  # nothing new was encoded
    assert np.array_equal(second, first[: len(TEXTS)]) and second.dtype == np.float32

    reopened = CachedEmbedder(minilm, EmbeddingCache(tmp_path), show_progress=False)
    assert np.array_equal(reopened.encode_documents(TEXTS[::-1]), second[::-1])
    assert (reopened.stats.hits, reopened.stats.misses) == (len(TEXTS), 0)
    reopened.encode_documents(TEXTS + ["A brand new text."])
    assert reopened.stats.misses == 1
    reopened.encode_queries(TEXTS[:2])  # queries are a separate side of the cache
    assert reopened.stats.misses == 3
    assert reopened.encode_documents([]).shape == (0, 384)


class _DiesOnSecondCall:
    """A real embedder that fails on its second call, like a run killed mid-way."""

    def __init__(self, inner):
        self.inner, self.calls, self.spec, self.dim = inner, 0, inner.spec, inner.dim

    def encode_documents(self, texts):
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return self.inner.encode_documents(texts)

    encode_queries = encode_documents


def test_interrupted_run_keeps_finished_blocks(minilm, tmp_path):
    dying = CachedEmbedder(_DiesOnSecondCall(minilm), EmbeddingCache(tmp_path), block_size=3,
                           show_progress=False)
    with pytest.raises(KeyboardInterrupt):
        dying.encode_documents(TEXTS)
    assert EmbeddingCache(tmp_path).count("st:all-MiniLM-L6-v2") == 3
    resumed = CachedEmbedder(minilm, EmbeddingCache(tmp_path), show_progress=False)
    resumed.encode_documents(TEXTS)
    assert (resumed.stats.hits, resumed.stats.misses) == (3, len(set(TEXTS)) - 3)


def test_cache_is_safe_across_threads(minilm, tmp_path):
    cached = load_embedder("minilm", cache_dir=tmp_path, show_progress=False)
    assert isinstance(cached, CachedEmbedder) and cached.spec == minilm.spec
    lists = [TEXTS[i:] + TEXTS[:i] for i in range(6)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(cached.encode_documents, lists))
    expected = minilm.encode_documents(TEXTS)
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, np.roll(expected, -i, axis=0), atol=1e-5)
    assert EmbeddingCache(tmp_path).count() == len(set(TEXTS))
    assert EmbeddingCache(tmp_path).summary() == [
        {"spec": "st:all-MiniLM-L6-v2", "side": "document", "dim": 384, "entries": len(set(TEXTS))}]
    assert cached.stats.hits + cached.stats.misses == 6 * len(set(TEXTS))


# --- OpenAI-compatible API ---------------------------------------------------------------

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
