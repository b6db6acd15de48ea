"""UMAP reduction with cosine distance, seeded.

UMAP finds exact nearest neighbours below 4,096 points and switches to
approximate NN-descent (pynndescent) above. Up to :data:`EXACT_KNN_MAX` points we
compute the exact cosine neighbours ourselves with a blocked matrix product and
hand them to UMAP: on a 6.8k-passage corpus that takes about a second and saves
NN-descent's run and its numba compilation (roughly half of the global UMAP
fit), while the neighbour graph can only get more accurate.
"""
from __future__ import annotations

import warnings

import numpy as np

#: UMAP's own limit for computing exact neighbours.
UMAP_EXACT_LIMIT = 4096
#: Largest input for which exact neighbours are computed here (O(n^2 d) work).
EXACT_KNN_MAX = 20_000
#: Entries of one block of the similarity matrix (float32: 16 MiB; with the block's partition indices about
#: 64 MiB at once, whatever ``n``). Each row's neighbours are computed alone, so the block size does not
#: change them.
_BLOCK_ENTRIES = 1 << 22


def exact_cosine_knn(points: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest rows of every row by cosine distance (``1 - cos``), the row
    itself first at distance 0, then by increasing distance (ties: lower index).

    Returns:
        ``(indices int64 (n, k), distances float32 (n, k))``.
    """
    n = len(points)
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    unit = (points / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    indices = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float32)
    block = max(1, _BLOCK_ENTRIES // max(n, 1))
    for start in range(0, n, block):
        stop = min(n, start + block)
        dist = 1.0 - unit[start:stop] @ unit.T
        rows = np.arange(stop - start)
        dist[rows, rows + start] = -1.0  # the row itself comes first, even among duplicates
        part = np.argpartition(dist, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (stop - start, 1))
        part_dist = np.take_along_axis(dist, part, axis=1)
        order = np.lexsort((part, part_dist), axis=1)
        indices[start:stop] = np.take_along_axis(part, order, axis=1)
        distances[start:stop] = np.maximum(np.take_along_axis(part_dist, order, axis=1), 0.0)
    return indices, distances


def umap_reduce(points: np.ndarray, *, n_neighbors: int, dim: int, random_state: int) -> np.ndarray:
    """Fit UMAP (cosine metric, ``n_jobs=1`` as a fixed seed requires) and return the
    ``(n, dim)`` embedding of ``points``."""
    from umap import UMAP

    n_neighbors = max(2, min(n_neighbors, len(points) - 1))
    knn: tuple[np.ndarray | None, np.ndarray | None, None] = (None, None, None)
    if UMAP_EXACT_LIMIT <= len(points) <= EXACT_KNN_MAX:
        indices, distances = exact_cosine_knn(points, n_neighbors)
        knn = (indices, distances, None)
    reducer = UMAP(n_neighbors=n_neighbors, n_components=dim, metric="cosine", random_state=random_state,
                   n_jobs=1, precomputed_knn=knn)
    with warnings.catch_warnings():
        # tiny inputs make UMAP fall back from spectral initialisation, and precomputed
        # neighbours come without a search index (only needed by transform): both warn
        warnings.simplefilter("ignore", UserWarning)
        return np.asarray(reducer.fit_transform(points))
