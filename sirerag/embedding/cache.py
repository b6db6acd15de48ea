"""An on-disk embedding cache and the embedder wrapper that uses it.

Vectors live in one SQLite file (WAL mode, safe to share between threads and
processes) keyed by ``(embedder spec, side, sha256 of the text)``, stored as
float32 blobs. :class:`CachedEmbedder` looks every text up first and encodes only
the missing ones, in blocks that are committed as they finish, so a killed run
keeps everything encoded before it stopped.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from sirerag.core.io.sqlite import CacheFile, cache_errors
from sirerag.core.memory import release_free_memory
from sirerag.embedding.base import Embedder, normalize_in_place
from sirerag.engine import Engine, LocalEngine, Worker, WorkerFactory, runs_here
from sirerag.core.errors import SireragError

logger = logging.getLogger(__name__)

CACHE_FILE = "embeddings.sqlite"
_LOOKUP_BATCH = 500  # bound on SQL variables per query

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    spec TEXT NOT NULL,
    side TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (spec, side, text_sha256)
) WITHOUT ROWID
"""


def text_key(text: str) -> str:
    """The cache key of a text: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache(CacheFile):
    """Float32 vectors in SQLite, keyed by ``(spec, side, sha256(text))``.

    Args:
        directory: folder of the cache file (created if missing).
    """

    def __init__(self, directory: str | Path) -> None:
        super().__init__(directory, CACHE_FILE, _SCHEMA)

    def get(self, spec: str, side: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors found for ``keys`` (text sha256s); missing keys are absent."""
        return dict(self._stored(spec, side, keys))

    def fill(self, spec: str, side: str, position: Mapping[str, int], rows: np.ndarray) -> set[str]:
        """Write the stored vector of every key of ``position`` that the cache holds into
        ``rows[position[key]]``; returns the keys found (a row of another width counts as missing)."""
        found: set[str] = set()
        for key, vector in self._stored(spec, side, list(position), width=rows.shape[1]):
            rows[position[key]] = vector
            found.add(key)
        return found

    def _stored(self, spec: str, side: str, keys: Sequence[str],
                width: int | None = None) -> Iterator[tuple[str, np.ndarray]]:
        """``(key, vector)`` of the stored rows of ``keys`` (of ``width`` values, when given)."""
        with cache_errors(self.path), self._lock:
            for start in range(0, len(keys), _LOOKUP_BATCH):
                batch = list(keys[start:start + _LOOKUP_BATCH])
                marks = ",".join("?" * len(batch))
                rows = self._conn.execute(
                    f"SELECT text_sha256, dim, vector FROM embeddings "
                    f"WHERE spec = ? AND side = ? AND text_sha256 IN ({marks})",
                    [spec, side, *batch],
                ).fetchall()
                for key, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape != (dim,) or (width is not None and dim != width):
                        logger.warning("%s: corrupt cache row for %s (%d bytes); re-encoding",
                                       self.path, key, len(blob))
                        continue
                    yield key, vector

    def put(self, spec: str, side: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store one vector per key and commit."""
        vectors = np.asarray(vectors, dtype=np.float32)
        rows = [(spec, side, key, int(v.shape[0]), v.tobytes()) for key, v in zip(keys, vectors)]
        with cache_errors(self.path), self._lock, self._conn:
            self._conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)

    def count(self, spec: str | None = None) -> int:
        """Number of stored vectors (for one spec, or all)."""
        with cache_errors(self.path), self._lock:
            if spec is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings WHERE spec = ?",
                                          (spec,)).fetchone()[0])

    def summary(self) -> list[dict[str, object]]:
        """Stored vectors per ``(spec, side)``: ``[{"spec", "side", "dim", "entries"}, ...]``."""
        with cache_errors(self.path), self._lock:
            rows = self._conn.execute("SELECT spec, side, dim, COUNT(*) FROM embeddings "
                                      "GROUP BY spec, side, dim ORDER BY spec, side").fetchall()
        return [{"spec": s, "side": side, "dim": int(d), "entries": int(n)} for s, side, d, n in rows]


@dataclass
class CacheStats:
    """Texts answered from the cache (``hits``) and texts encoded (``misses``),
    counted per unique text and side since the embedder was created."""

    hits: int = 0
    misses: int = 0


class CachedEmbedder:
    """Wraps an embedder so that each ``(side, text)`` is encoded once, ever.

    Args:
        inner: the embedder that does the encoding.
        cache: where vectors are stored.
        block_size: texts encoded (and committed) per step; missing texts are sorted
            by length first, so each block pads to similar lengths. The blocks are the
            engine's batches, so every engine encodes the same texts together.
        show_progress: show a progress bar over the texts to encode.
        engine: where the blocks are encoded (default: this process, with ``inner``).
        remote: for an engine other than ``local``: side -> a picklable worker factory
            that loads the same model where the engine runs it.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache, *, block_size: int = 1024,
                 show_progress: bool = True, engine: Engine | None = None,
                 remote: Callable[[str], WorkerFactory] | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.block_size = block_size
        self.show_progress = show_progress
        self.engine: Engine = engine or LocalEngine()
        if not runs_here(self.engine) and remote is None:
            raise ValueError(f"CachedEmbedder on the {self.engine.name} engine needs a remote worker factory")
        self.remote = remote
        self.stats = CacheStats()
        self._stats_lock = threading.Lock()

    @property
    def spec(self) -> str:
        return self.inner.spec

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "query")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "document")

    def _encode(self, texts: Sequence[str], side: str) -> np.ndarray:
        """One unit row per text. The rows are written into one matrix as the cache answers and the blocks
        come back (no copy per row is kept), then normalised in place."""
        keys = [text_key(t) for t in texts]
        unique: dict[str, int] = {}
        for key in keys:
            unique.setdefault(key, len(unique))
        rows = np.empty((len(unique), self.dim), dtype=np.float32)
        found = self.cache.fill(self.spec, side, unique, rows)
        missing = [k for k in unique if k not in found]
        text_of = {k: t for k, t in zip(keys, texts)} if missing else {}
        missing.sort(key=lambda k: len(text_of[k]))
        with self._stats_lock:
            self.stats.hits += len(unique) - len(missing)
            self.stats.misses += len(missing)
        if missing:
            logger.debug("embedding cache: %d hit(s), %d to encode (%s, %s)",
                         len(unique) - len(missing), len(missing), self.spec, side)
            self._encode_missing([(k, text_of[k]) for k in missing], side, unique, rows)
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = rows if len(unique) == len(keys) else rows[[unique[k] for k in keys]]
        return normalize_in_place(out)

    def _encode_missing(self, items: list[tuple[str, str]], side: str, position: dict[str, int],
                        rows: np.ndarray) -> None:
        """Encode ``items`` (key, text) in blocks, store each block in the cache and write its vectors into
        ``rows`` at ``position[key]``."""
        from tqdm.auto import tqdm

        blocks = [items[start:start + self.block_size] for start in range(0, len(items), self.block_size)]
        local = runs_here(self.engine) or self.remote is None
        factory = _InnerWorker(self.inner, side) if local else self.remote(side)  # type: ignore[misc]
        with tqdm(total=len(items), desc=f"embedding {side}s", unit="text",
                  disable=not self.show_progress) as bar:
            for index, encoded in self.engine.map_batches(factory, [[t for _, t in b] for b in blocks],
                                                          label=f"embedding {side}s ({self.spec})"):
                block = blocks[index]
                keys = [k for k, _ in block]
                vectors = decode_vectors(encoded)
                if vectors.shape != (len(block), self.dim):
                    raise SireragError(f"{self.spec} returned vectors of shape {vectors.shape} for {len(block)} "
                                       f"texts; expected ({len(block)}, {self.dim})")
                self.cache.put(self.spec, side, keys, vectors)
                rows[[position[k] for k in keys]] = vectors
                release_free_memory()  # the block's activations (sizes vary with its texts' lengths)
                bar.update(len(block))


def encode_vectors(vectors: npt.ArrayLike) -> list[str]:
    """Float32 rows as base64 text (exact, JSON-ready): one string per row."""
    matrix = np.asarray(vectors, dtype=np.float32)
    return [base64.b64encode(row.tobytes()).decode("ascii") for row in matrix]


def decode_vectors(encoded: Sequence[str]) -> np.ndarray:
    """The inverse of :func:`encode_vectors`: a ``(rows, dim)`` float32 array."""
    rows = [np.frombuffer(base64.b64decode(text), dtype=np.float32) for text in encoded]
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    if len({row.shape for row in rows}) != 1:
        return np.zeros((len(rows), 0), dtype=np.float32)  # ragged: fails the caller's shape check
    return np.vstack(rows)


class _InnerWorker:
    """The local worker: this process's embedder, one side."""

    def __init__(self, inner: Embedder, side: str) -> None:
        self.inner, self.side = inner, side

    def __call__(self) -> Worker:
        encode = self.inner.encode_queries if self.side == "query" else self.inner.encode_documents
        return lambda texts: encode_vectors(encode(texts))


class EmbedWorker:
    """A worker factory that loads the embedder ``spec`` (no cache) where it runs.

    Args:
        spec: the spec given to :func:`~sirerag.embedding.load_embedder` (:func:`~sirerag.embedding.backends.make_embedder`).
        batch_size: texts per forward pass.
        side: ``document`` or ``query``.
        precision: the driver's resolved precision (``float32`` or ``bfloat16``), so the workers compute the
            vectors the driver's cache keys name.
    """

    def __init__(self, spec: str, batch_size: int, side: str, precision: str = "float32") -> None:
        self.spec, self.batch_size, self.side, self.precision = spec, batch_size, side, precision

    def __call__(self) -> Worker:
        from sirerag.embedding.backends import make_embedder

        inner = make_embedder(self.spec, batch_size=self.batch_size, precision=self.precision)
        return _InnerWorker(inner, self.side)()
