"""Clusters kept on disk, so that a build killed after its clustering does not cluster again.

:func:`~sirerag.clustering.raptor.cluster` is deterministic: the same rows, token counts, settings and seed give
the same clusters, in or out of worker processes. A level of a large build takes minutes to hours to cluster
(UMAP and the mixtures), and the embedding cache alone let a resumed build skip only the model calls. Within a
:func:`clustering_cache` block (a build opens one in its cache folder), every :func:`cluster` call looks its
clusters up first and stores them after computing them.

The key is the sha256 of the float32 rows, the token counts, the settings but the number of worker processes
(which does not change the clusters), the seed and the versions of the libraries that fit (umap-learn,
pynndescent, scikit-learn, numpy, numba): another version may cluster differently, so it computes its own.
Clusters stored under the earlier key, which also held the worker count, are still read. The clusters are stored
in one SQLite file (WAL mode, as the embedding cache) with the clustering counters of the run that computed
them, which a hit adds to the caller's (so a resumed build's manifest counts the same fits). What is read is
checked: every cluster sorted, its rows in range and every row in some cluster; anything else is computed again.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import logging
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from sirerag.clustering.gmm import COUNTERS, ClusterStats
from sirerag.core.config import ClusteringConfig
from sirerag.core.io.sqlite import CacheFile, cache_errors

logger = logging.getLogger(__name__)

CACHE_FILE = "clusters.sqlite"
FORMAT = "sirerag-clusters/1"
_LIBRARIES = ("umap-learn", "pynndescent", "scikit-learn", "numpy", "numba")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS clusters (
    key TEXT PRIMARY KEY,
    rows INTEGER NOT NULL,
    payload BLOB NOT NULL,
    stats TEXT NOT NULL
) WITHOUT ROWID
"""
_ACTIVE: contextvars.ContextVar["ClusterCache | None"] = contextvars.ContextVar("sirerag_cluster_cache",
                                                                                default=None)


def _versions() -> str:
    found = []
    for name in _LIBRARIES:
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name}=-")
    return ",".join(found)


#: clustering settings that say how the work runs, not what it gives: left out of the key
RUN_ONLY = ("processes",)


def cluster_key(matrix: np.ndarray, tokens: np.ndarray, config: ClusteringConfig, random_state: int, *,
                legacy: bool = False) -> str:
    """The cache key of one :func:`~sirerag.clustering.raptor.cluster` call (hex sha256). ``legacy``: the key of
    versions that also hashed :data:`RUN_ONLY`, which :func:`cached` still reads."""
    digest = hashlib.sha256()
    fields = dataclasses.asdict(config)
    if not legacy:
        for name in RUN_ONLY:
            del fields[name]
    settings = json.dumps(fields, sort_keys=True)
    head = f"{FORMAT}\n{_versions()}\n{settings}\n{int(random_state)}\n{matrix.shape}\n"
    digest.update(head.encode("utf-8"))
    digest.update(np.ascontiguousarray(matrix, dtype=np.float32).tobytes())
    digest.update(np.ascontiguousarray(tokens, dtype=np.int64).tobytes())
    return digest.hexdigest()


def _pack(clusters: list[np.ndarray]) -> bytes:
    sizes = np.array([len(c) for c in clusters], dtype=np.int64)
    parts = [np.array([len(clusters)], dtype=np.int64), sizes, *[np.asarray(c, dtype=np.int64) for c in clusters]]
    return np.concatenate(parts).tobytes()


def _unpack(blob: bytes, rows: int) -> list[np.ndarray] | None:
    """The clusters stored in ``blob`` for ``rows`` rows, or None when they are not a valid clustering."""
    if len(blob) % 8:
        return None
    flat = np.frombuffer(blob, dtype=np.int64)
    if not flat.size or not 0 < flat[0] <= flat.size - 1:
        return None
    k = int(flat[0])
    sizes = flat[1:1 + k]
    if (sizes <= 0).any() or 1 + k + int(sizes.sum()) != flat.size:
        return None
    bounds = np.concatenate([[1 + k], 1 + k + np.cumsum(sizes)])
    clusters = [flat[a:b].copy() for a, b in zip(bounds[:-1], bounds[1:])]
    members = flat[1 + k:]
    if members.min() < 0 or members.max() >= rows or np.unique(members).size != rows:
        return None
    if any((np.diff(c) <= 0).any() for c in clusters):
        return None
    return clusters


class ClusterCache(CacheFile):
    """Clusters in SQLite, keyed by :func:`cluster_key`; ``hits`` and ``misses`` count the lookups.

    Args:
        directory: folder of the cache file (created if missing).
    """

    def __init__(self, directory: str | Path) -> None:
        super().__init__(directory, CACHE_FILE, _SCHEMA)
        self.hits = self.misses = 0

    def get(self, key: str, rows: int) -> tuple[list[np.ndarray], dict[str, Any]] | None:  # Any: JSON values
        """The clusters and counters stored under ``key`` for ``rows`` rows, else None."""
        with cache_errors(self.path), self._lock:
            found = self._conn.execute("SELECT rows, payload, stats FROM clusters WHERE key = ?", (key,)).fetchone()
        if found is None:
            return None
        stored_rows, payload, stats = found
        clusters = _unpack(bytes(payload), rows) if stored_rows == rows else None
        if clusters is None:
            logger.warning("%s: the stored clusters of %s are not a clustering of %d rows; clustering again",
                           self.path, key[:12], rows)
            return None
        return clusters, json.loads(stats)

    def put(self, key: str, rows: int, clusters: list[np.ndarray],
            stats: dict[str, Any]) -> None:  # Any: JSON values
        """Store ``clusters`` of ``rows`` rows and the counters of the run that computed them, and commit."""
        with cache_errors(self.path), self._lock, self._conn:
            self._conn.execute("INSERT OR REPLACE INTO clusters VALUES (?, ?, ?, ?)",
                               (key, int(rows), _pack(clusters), json.dumps(stats, sort_keys=True)))


@contextlib.contextmanager
def clustering_cache(directory: str | Path | None) -> Iterator[ClusterCache | None]:
    """Within the block, :func:`~sirerag.clustering.raptor.cluster` reads and stores its clusters in
    ``directory`` (None: no cache). Yields the cache; it is closed when the block ends."""
    store = ClusterCache(directory) if directory is not None else None
    token = _ACTIVE.set(store)
    try:
        yield store
    finally:
        _ACTIVE.reset(token)
        if store is not None:
            store.close()


def cached(matrix: np.ndarray, tokens: np.ndarray, config: ClusteringConfig, random_state: int,
           stats: ClusterStats, compute: Callable[[ClusterStats], list[np.ndarray]]) -> list[np.ndarray]:
    """``compute(stats)``, or its clusters from the enclosing :func:`clustering_cache` block (their counters added
    to ``stats``). Without a block, or when ``stats`` keeps the reduced matrices (a benchmark), it computes."""
    store = _ACTIVE.get()
    if store is None or stats.keep_reduced:
        return compute(stats)
    key = cluster_key(matrix, tokens, config, random_state)
    found = store.get(key, len(matrix))
    if found is None:  # stored by a version whose key held the worker count
        found = store.get(cluster_key(matrix, tokens, config, random_state, legacy=True), len(matrix))
    if found is not None:
        clusters, counters = found
        stored = ClusterStats(searches=[(int(a), int(b), int(c)) for a, b, c in counters.get("searches", [])])
        for name in COUNTERS:
            setattr(stored, name, type(getattr(stored, name))(counters.get(name, 0)))
        stats.merge(stored)
        store.hits += 1
        logger.info("%d clusters of %d rows read from %s", len(clusters), len(matrix), store.path)
        return clusters
    own = ClusterStats()
    clusters = compute(own)
    stats.merge(own)
    store.misses += 1
    counters = {name: getattr(own, name) for name in COUNTERS}
    store.put(key, len(matrix), clusters, {**counters, "searches": [list(s) for s in own.searches]})
    return clusters
