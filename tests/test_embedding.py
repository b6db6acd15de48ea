"""The sentence-transformers embedder with the real all-MiniLM-L6-v2 (the ``local`` extra).

The cache and the OpenAI-compatible embedder are tested without sentence-transformers in
test_embedding_cache.py and test_embedding_openai.py.
"""
from __future__ import annotations

import os
import socket
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sirerag.embedding import CachedEmbedder, EmbeddingCache, load_embedder
from sirerag.core.errors import SireragError

st_backend = pytest.importorskip("sirerag.embedding.sentence_transformers")
pytest.importorskip("sentence_transformers")

PAIR = ["A man is eating food.", "A man is eating a piece of bread."]
UNRELATED = "The stock market fell sharply on Tuesday."
TEXTS = [f"Passage number {i} talks about {topic}." for i, topic in
         enumerate(["rivers", "mountains", "kings", "rivers", "songs", "ships", "bread"])]


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


def test_sha256_check_refuses_a_mismatched_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the digests' memo
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


def test_minilm_with_a_cache_dir_is_cached_and_safe_across_threads(minilm, tmp_path):
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
