"""Synonym edges of the entity graph: exact cosine kNN over entity-name embeddings.

Computed in row blocks, so memory stays bounded; each entity keeps at most a given
number of synonyms, strongest first. Names with fewer than 3 alphanumeric
characters ("NY", "5") get none.
"""
from __future__ import annotations

import numpy as np

from sirerag.core.errors import check

#: entities with fewer alphanumeric characters than this get no synonym edges
MIN_SYNONYM_CHARS = 3


def alnum_count(text: str) -> int:
    """Number of alphanumeric characters of ``text`` (Unicode aware)."""
    return sum(ch.isalnum() for ch in text)


def synonym_edges(
    embeddings: np.ndarray,
    *,
    threshold: float = 0.8,
    max_neighbors: int = 100,
    eligible: np.ndarray | None = None,
    block_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synonym pairs by exact cosine kNN, computed in row blocks so memory stays bounded.

    Every eligible entity proposes its ``max_neighbors`` most similar eligible entities
    with cosine ``>= threshold``; the proposed pairs are then accepted strongest first
    while both ends have fewer than ``max_neighbors`` synonyms, so no entity ends up
    with more than ``max_neighbors`` synonym edges.

    Args:
        embeddings: ``(n, dim)`` L2-normalised rows.
        threshold: minimum cosine similarity.
        max_neighbors: maximum synonym edges per entity (0 disables synonyms).
        eligible: boolean mask of entities that may get synonyms (default: all).
        block_size: rows per block (default: about 16M similarities per block).

    Returns:
        ``(rows, cols, sims)`` with ``rows < cols``, sorted by decreasing similarity.
    """
    check(0.0 < float(threshold) <= 1.0, "synonym threshold", threshold, "a cosine similarity in (0, 1]")
    check(int(max_neighbors) >= 0, "synonym max_neighbors", max_neighbors, "an integer >= 0")
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    n = x.shape[0]
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if n < 2 or max_neighbors == 0:
        return empty
    mask = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    idx = np.flatnonzero(mask)
    if idx.size < 2:
        return empty
    sub = x if idx.size == n else x[idx]  # no copy when every row is eligible
    m = sub.shape[0]
    block = block_size or max(1, min(4096, (1 << 24) // m))
    k = min(max_neighbors, m - 1)
    rows_l, cols_l, sims_l = [], [], []
    for start in range(0, m, block):
        stop = min(start + block, m)
        sims = sub[start:stop] @ sub.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        # a row's k best at or above the threshold: every candidate when it has at most k (the usual case:
        # a name has few near-duplicates), else its k best (the same set a partition of the whole row gives)
        hit_r, hit_c = np.nonzero(sims >= threshold)
        crowded = np.flatnonzero(np.bincount(hit_r, minlength=stop - start) > k)
        if crowded.size:
            drop = np.isin(hit_r, crowded)
            hit_r, hit_c = hit_r[~drop], hit_c[~drop]
            top = np.argpartition(-sims[crowded], k - 1, axis=1)[:, :k]
            hit_r = np.concatenate([hit_r, np.repeat(crowded, k)])
            hit_c = np.concatenate([hit_c, top.ravel()])
            order = np.argsort(hit_r, kind="stable")  # rows in order, as the pairs are deduplicated below
            hit_r, hit_c = hit_r[order], hit_c[order]
        rows_l.append(hit_r + start)
        cols_l.append(hit_c)
        sims_l.append(sims[hit_r, hit_c].astype(np.float64))
    rows = np.concatenate(rows_l)
    cols = np.concatenate(cols_l)
    sims = np.concatenate(sims_l)
    if rows.size == 0:
        return empty
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    _, first = np.unique(lo * m + hi, return_index=True)
    lo, hi, sims = lo[first], hi[first], sims[first]
    order = np.lexsort((hi, lo, -sims))  # strongest first, ties by index
    degree = np.zeros(m, dtype=np.int64)
    accepted = np.zeros(order.size, dtype=bool)
    for pos, pair in enumerate(order.tolist()):
        a, b = int(lo[pair]), int(hi[pair])
        if degree[a] < max_neighbors and degree[b] < max_neighbors:
            degree[a] += 1
            degree[b] += 1
            accepted[pos] = True
    chosen = order[accepted]
    return idx[lo[chosen]], idx[hi[chosen]], sims[chosen]
