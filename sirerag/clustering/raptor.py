"""RAPTOR's clustering: global then local UMAP + Gaussian-mixture soft clustering,
and re-clustering of clusters over the token limit.

Everything works on row indices into the input matrix, never on the vectors
themselves, so duplicate rows are clustered like any other rows.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Sequence

import numpy as np

from sirerag.clustering.cache import cached
from sirerag.clustering.gmm import ClusterStats, soft_cluster
from sirerag.clustering.processes import ClusterProcesses, active_pool
from sirerag.clustering.reduce import umap_reduce
from sirerag.clustering.sample import sample_and_assign
from sirerag.core.config import ClusteringConfig
from sirerag.core.errors import check

logger = logging.getLogger(__name__)

#: UMAP neighbourhood size inside a global cluster (RAPTOR's ``local_cluster_embeddings``).
LOCAL_NEIGHBORS = 10


def cluster(
    embeddings: np.ndarray,
    token_counts: Sequence[int],
    *,
    config: ClusteringConfig,
    random_state: int,
    stats: ClusterStats | None = None,
) -> list[np.ndarray]:
    """Soft-cluster the rows of ``embeddings`` as RAPTOR does.

    1. Global: UMAP (cosine, ``n_neighbors = int(sqrt(n - 1))``) to
       ``config.reduction_dim`` dimensions, a Gaussian mixture with k chosen by BIC
       (at most ``config.max_clusters``), membership where probability >
       ``config.threshold``.
    2. Local: the same inside each global cluster, with UMAP's ``n_neighbors = 10``;
       a global cluster of at most ``reduction_dim + 1`` rows stays whole.
    3. A cluster of two or more rows whose ``token_counts`` sum to more than
       ``config.max_cluster_tokens`` is clustered again from step 1. If that returns
       the cluster unchanged (or it has too few rows to reduce), it is cut into
       consecutive runs of rows that fit the limit, and a message is logged.

    A step over more than ``config.sample_above`` rows (and ``config.sample_size``) fits UMAP and the
    mixture on a seeded sample and assigns every row (:mod:`sirerag.clustering.sample`).

    Inside a :func:`~sirerag.clustering.processes.clustering_processes` block, the local steps of 2. and the
    re-clustering of 3. run in worker processes for inputs of at least
    :data:`~sirerag.clustering.processes.MIN_ROWS` rows; the clusters are the same as in one process. Inside a
    :func:`~sirerag.clustering.cache.clustering_cache` block the clusters are read from, or stored in, its cache.

    Differences from RAPTOR: a row above the threshold in no component joins its most
    probable one (RAPTOR drops it); identical clusters are returned once; an input of
    at most ``reduction_dim + 1`` (distinct) rows is one cluster (RAPTOR's tree stops there).

    Args:
        embeddings: ``(n, dim)`` matrix, one row per node.
        token_counts: tokens of each node's text.
        config: reduction dimension, threshold, maximum k, token limit, and
            ``bic_search`` (``fast`` or ``exhaustive``, see :mod:`sirerag.clustering.gmm`).
        random_state: seed of every UMAP and mixture fit; same input and seed give
            the same clusters.
        stats: if given, counters (fits, seconds, searches) are added to it.

    Returns:
        Clusters as sorted ``int64`` arrays of row indices, in a deterministic order;
        every row is in at least one cluster. ``[]`` for ``n == 0``.

    Raises:
        ConfigError: ``config`` or the input shapes are invalid.
    """
    config.validate()
    matrix = np.asarray(embeddings, dtype=np.float32)
    check(matrix.ndim == 2, "embeddings", getattr(embeddings, "shape", None), "a 2-D array (n, dim)")
    tokens = np.asarray(token_counts, dtype=np.int64)
    check(tokens.shape == (len(matrix),), "token_counts", f"{len(tokens)} values",
          f"one count per embedding row ({len(matrix)})")
    check(bool(np.isfinite(matrix).all()), "embeddings", "non-finite values", "finite numbers")
    if len(matrix) == 0:
        return []

    def compute(counters: ClusterStats) -> list[np.ndarray]:
        run = _Run(matrix, tokens, config, random_state, counters)
        clusters = run.bound_tokens(run.raptor_pass(np.arange(len(matrix))))
        seen: set[bytes] = set()
        unique = []
        for c in clusters:
            key = c.tobytes()
            if key not in seen:
                seen.add(key)
                unique.append(c)
        return unique

    return cached(matrix, tokens, config, random_state, stats if stats is not None else ClusterStats(), compute)


class _Run:
    """One call of :func:`cluster`: the shared inputs of its recursive steps."""

    def __init__(self, matrix: np.ndarray, tokens: np.ndarray, config: ClusteringConfig, random_state: int,
                 stats: ClusterStats) -> None:
        self.matrix, self.tokens, self.config = matrix, tokens, config
        self.random_state, self.stats = random_state, stats

    def raptor_pass(self, rows: np.ndarray) -> list[np.ndarray]:
        """Global then local clustering of ``rows`` (sorted); returns sorted row subsets."""
        if not self._reducible(rows):
            return [rows]
        groups = [rows[members] for members in self._step(rows, global_step=True)]
        reducible = [self._reducible(g) for g in groups]
        pool = self._pool()
        pending = [pool.submit(_local_step, self.matrix[g], self.config, self.random_state)
                   if pool is not None and r else None for g, r in zip(groups, reducible)]
        out: list[np.ndarray] = []
        for global_rows, can_reduce, future in zip(groups, reducible, pending):
            if future is not None:
                local, stats = future.result()
                self.stats.merge(stats)
                out.extend(global_rows[m] for m in local)
            elif not can_reduce:
                out.append(global_rows)
            else:
                out.extend(global_rows[m] for m in self._step(global_rows, global_step=False))
        return out

    def bound_tokens(self, clusters: list[np.ndarray]) -> list[np.ndarray]:
        """Re-cluster every cluster over the token limit until all fit (or are single rows); in the worker
        processes of the enclosing block when there are any, each cluster on its own."""
        pool = self._pool()
        if pool is None:
            return self._bound_here(clusters)
        pending = [pool.submit(_bound_step, self.matrix[rows], self.tokens[rows], self.config, self.random_state)
                   if self._over_limit(rows) else None for rows in clusters]
        out: list[np.ndarray] = []
        for rows, future in zip(clusters, pending):
            if future is None:
                out.extend(self._bound_here([rows]))
                continue
            parts, stats = future.result()
            self.stats.merge(stats)
            out.extend(rows[p] for p in parts)
        return out

    def _bound_here(self, clusters: list[np.ndarray]) -> list[np.ndarray]:
        limit = self.config.max_cluster_tokens
        out: list[np.ndarray] = []
        for rows in clusters:
            if not self._over_limit(rows):
                out.append(rows)
                continue
            self.stats.reclustered += 1
            parts = self.raptor_pass(rows)
            if any(len(p) == len(rows) for p in parts):  # a part is the whole cluster: it never shrinks
                self.stats.forced_splits += 1
                parts = consecutive_runs(rows, self.tokens[rows], limit)
                logger.info("a cluster of %d rows (%d tokens) did not split when re-clustered; cut it into "
                            "%d runs of consecutive rows within %d tokens", len(rows),
                            int(self.tokens[rows].sum()), len(parts), limit)
                out.extend(parts)
            else:
                out.extend(self._bound_here(parts))
        return out

    def _over_limit(self, rows: np.ndarray) -> bool:
        return len(rows) > 1 and int(self.tokens[rows].sum()) > self.config.max_cluster_tokens

    def _pool(self) -> ClusterProcesses | None:
        """The worker processes to use (None: everything here; always None inside a worker, and when the
        searches' matrices are kept for a benchmark)."""
        return None if self.stats.keep_reduced else active_pool(len(self.matrix))

    def _reducible(self, rows: np.ndarray) -> bool:
        """More than ``reduction_dim + 1`` rows, and as many distinct ones: enough to reduce."""
        limit = self.config.reduction_dim + 1
        return len(rows) > limit and len(np.unique(self.matrix[rows], axis=0)) > limit

    def _step(self, rows: np.ndarray, *, global_step: bool) -> list[np.ndarray]:
        """One global (UMAP ``n_neighbors = sqrt(n - 1)``) or local (``LOCAL_NEIGHBORS``) step over ``rows``:
        clusters as positions into ``rows``; on a sample when ``rows`` is over the sampling size
        (:mod:`sirerag.clustering.sample`)."""
        if len(rows) > max(self.config.sample_above, self.config.sample_size):
            return sample_and_assign(self.matrix[rows], global_step=global_step, config=self.config,
                                     random_state=self.random_state, stats=self.stats,
                                     local_neighbors=LOCAL_NEIGHBORS)
        n_neighbors = int(math.sqrt(len(rows) - 1)) if global_step else min(LOCAL_NEIGHBORS, len(rows) - 1)
        return self._soft_clusters(self._reduce(rows, n_neighbors=n_neighbors))

    def _reduce(self, rows: np.ndarray, *, n_neighbors: int) -> np.ndarray:
        start, cpu = time.perf_counter(), time.process_time()
        reduced = umap_reduce(self.matrix[rows], n_neighbors=n_neighbors, dim=self.config.reduction_dim,
                              random_state=self.random_state)
        self.stats.umap_fits += 1
        self.stats.seconds_umap += time.perf_counter() - start
        self.stats.cpu_seconds_umap += time.process_time() - cpu
        return reduced

    def _soft_clusters(self, reduced: np.ndarray) -> list[np.ndarray]:
        return soft_cluster(reduced, max_clusters=self.config.max_clusters, threshold=self.config.threshold,
                            random_state=self.random_state, search=self.config.bic_search, stats=self.stats)


def _local_step(matrix: np.ndarray, config: ClusteringConfig, random_state: int) -> tuple[list[np.ndarray],
                                                                                  ClusterStats]:
    """In a worker: the local step of one global cluster (its rows' vectors, in order)."""
    run = _Run(matrix, np.zeros(len(matrix), dtype=np.int64), config, random_state, ClusterStats())
    return run._step(np.arange(len(matrix)), global_step=False), run.stats


def _bound_step(matrix: np.ndarray, tokens: np.ndarray, config: ClusteringConfig,
                random_state: int) -> tuple[list[np.ndarray], ClusterStats]:
    """In a worker: one cluster over the token limit, re-clustered until every part fits."""
    run = _Run(matrix, tokens, config, random_state, ClusterStats())
    return run._bound_here([np.arange(len(matrix))]), run.stats


def consecutive_runs(rows: np.ndarray, tokens: np.ndarray, limit: int) -> list[np.ndarray]:
    """Cut ``rows`` (in order) into consecutive runs whose ``tokens`` sum to at most
    ``limit``; a single row over the limit is a run of its own."""
    out: list[np.ndarray] = []
    start, total = 0, 0
    for i, t in enumerate(tokens.tolist()):
        if i > start and total + t > limit:
            out.append(rows[start:i])
            start, total = i, 0
        total += t
    out.append(rows[start:])
    return out
