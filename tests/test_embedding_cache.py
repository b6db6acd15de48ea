"""The embedding cache (SQLite, one encode per text ever) and the embedder specs, with a
deterministic stand-in embedder: no sentence-transformers needed."""
from __future__ import annotations

import hashlib
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from sirerag.embedding import CachedEmbedder, EmbeddingCache, load_embedder
from sirerag.embedding.base import l2_normalize
from sirerag.core.errors import ConfigError, MissingExtraError

DIM = 8
TEXTS = [f"Passage number {i} talks about {topic}." for i, topic in
         enumerate(["rivers", "mountains", "kings", "rivers", "songs", "ships", "bread"])]


class HashEmbedder:
    """Unit vectors derived from each text's sha256; counts the texts it was asked to encode."""

    spec = "test:hash"
    dim = DIM

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def _encode(self, texts, salt: bytes) -> np.ndarray:  # noqa: ANN001
        self.encoded += list(texts)
        rows = [np.frombuffer(hashlib.sha256(salt + t.encode()).digest()[:DIM], dtype=np.uint8) for t in texts]
        return l2_normalize(np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM) + 1.0)

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        return self._encode(texts, b"d")

    def encode_queries(self, texts):  # noqa: ANN001, ANN201
        return self._encode(texts, b"q")


def test_cache_encodes_each_text_once(tmp_path):
    inner = HashEmbedder()
    cached = CachedEmbedder(inner, EmbeddingCache(tmp_path), block_size=3, show_progress=False)
    first = cached.encode_documents(TEXTS + TEXTS[:2])  # duplicates inside one call count once
    assert (cached.stats.hits, cached.stats.misses) == (0, len(set(TEXTS)))
    assert sorted(inner.encoded) == sorted(set(TEXTS))  # each distinct text was encoded once
    np.testing.assert_allclose(first[: len(TEXTS)], HashEmbedder().encode_documents(TEXTS), atol=1e-6)
    second = cached.encode_documents(TEXTS)
    assert cached.stats.misses == len(set(TEXTS)) and len(inner.encoded) == len(set(TEXTS))  # nothing new
    assert np.array_equal(second, first[: len(TEXTS)]) and second.dtype == np.float32

    reopened = CachedEmbedder(HashEmbedder(), EmbeddingCache(tmp_path), show_progress=False)
    assert np.array_equal(reopened.encode_documents(TEXTS[::-1]), second[::-1])
    assert (reopened.stats.hits, reopened.stats.misses) == (len(set(TEXTS)), 0)
    reopened.encode_documents(TEXTS + ["A brand new text."])
    assert reopened.stats.misses == 1
    reopened.encode_queries(TEXTS[:2])  # queries are a separate side of the cache
    assert reopened.stats.misses == 3
    np.testing.assert_allclose(reopened.encode_queries(TEXTS[:1]), HashEmbedder().encode_queries(TEXTS[:1]),
                               atol=1e-6)  # not the document vector of the same text
    assert reopened.encode_documents([]).shape == (0, DIM)


class _DiesOnSecondCall:
    """An embedder that fails on its second call, like a run killed mid-way."""

    def __init__(self, inner):
        self.inner, self.calls, self.spec, self.dim = inner, 0, inner.spec, inner.dim

    def encode_documents(self, texts):
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt
        return self.inner.encode_documents(texts)

    encode_queries = encode_documents


def test_interrupted_run_keeps_finished_blocks(tmp_path):
    dying = CachedEmbedder(_DiesOnSecondCall(HashEmbedder()), EmbeddingCache(tmp_path), block_size=3,
                           show_progress=False)
    with pytest.raises(KeyboardInterrupt, match="^$"):  # a bare KeyboardInterrupt, as Ctrl-C raises
        dying.encode_documents(TEXTS)
    assert EmbeddingCache(tmp_path).count("test:hash") == 3
    resumed = CachedEmbedder(HashEmbedder(), EmbeddingCache(tmp_path), show_progress=False)
    resumed.encode_documents(TEXTS)
    assert (resumed.stats.hits, resumed.stats.misses) == (3, len(set(TEXTS)) - 3)


def test_cache_is_safe_across_threads(tmp_path):
    cached = CachedEmbedder(HashEmbedder(), EmbeddingCache(tmp_path), block_size=2, show_progress=False)
    lists = [TEXTS[i:] + TEXTS[:i] for i in range(6)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(cached.encode_documents, lists))
    expected = HashEmbedder().encode_documents(TEXTS)
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, np.roll(expected, -i, axis=0), atol=1e-6)
    assert EmbeddingCache(tmp_path).count() == len(set(TEXTS))
    assert EmbeddingCache(tmp_path).summary() == [
        {"spec": "test:hash", "side": "document", "dim": DIM, "entries": len(set(TEXTS))}]
    assert cached.stats.hits + cached.stats.misses == 6 * len(set(TEXTS))


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
