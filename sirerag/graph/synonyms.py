"""Synonym edges of the entity graph: cosine kNN over entity-name embeddings.

Exact by default, computed in row blocks so memory stays bounded; that costs a product of every name with every
other, which grows with the square of the names. Given HNSW settings (``ann``: the graph's
``synonym_ann_min_names``), each name's candidates come from an HNSW index of the names instead (usearch, extra
``ann``), which grows about as ``n log n``: a name's ``SYNONYM_PROBE`` nearest are re-scored exactly, and a name
all of whose probed neighbours pass the threshold (it may have more) is searched again for as many as it may keep. Each entity
keeps at most a given number of synonyms, strongest first. Names with fewer than 3 alphanumeric characters
("NY", "5") get none.
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from sirerag.core.config.dense import DenseConfig
from sirerag.core.errors import check

logger = logging.getLogger(__name__)

#: entities with fewer alphanumeric characters than this get no synonym edges
MIN_SYNONYM_CHARS = 3
#: neighbours an HNSW search asks for per name (a name has few near-duplicates; one with more is searched exactly)
SYNONYM_PROBE = 16
_PAIRS = 65_536  # query-neighbour pairs re-scored at a time (two float32 rows each)
#: the HNSW search's candidate list: twice the neighbours asked for, at least this many. A synonym is a near
#: duplicate (cosine >= 0.8), which a short list finds: on 134,465 real names a list of 64 found 99.97% of
#: the pairs a list of 256 found, in a third of the time (docs/scale.md)
_MIN_EXPANSION = 64


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
    ann: DenseConfig | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synonym pairs by cosine kNN: exact, in row blocks so memory stays bounded, or through HNSW (``ann``).

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
        ann: HNSW build parameters (connectivity, ``expansion_add``, stored dtype, build threads; the search's
            candidate list is set here); None searches exactly.

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
    if ann is None:
        rows, cols, sims = _exact_candidates(sub, np.arange(m), float(threshold), k, block)
    else:
        rows, cols, sims = _hnsw_candidates(sub, float(threshold), k, ann)
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


def _exact_candidates(sub: np.ndarray, queries: np.ndarray, threshold: float, k: int,
                      block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each query row's candidates by an exact product with every row: its ``k`` best at or above
    ``threshold``, as ``(rows, cols, sims)`` in row order."""
    rows_l, cols_l, sims_l = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.float64)]
    for start in range(0, queries.size, block):
        rows = queries[start:start + block]
        sims = sub[rows] @ sub.T
        sims[np.arange(rows.size), rows] = -np.inf
        # a row's k best at or above the threshold: every candidate when it has at most k (the usual case:
        # a name has few near-duplicates), else its k best (the same set a partition of the whole row gives)
        hit_r, hit_c = np.nonzero(sims >= threshold)
        crowded = np.flatnonzero(np.bincount(hit_r, minlength=rows.size) > k)
        if crowded.size:
            drop = np.isin(hit_r, crowded)
            hit_r, hit_c = hit_r[~drop], hit_c[~drop]
            top = np.argpartition(-sims[crowded], k - 1, axis=1)[:, :k]
            hit_r = np.concatenate([hit_r, np.repeat(crowded, k)])
            hit_c = np.concatenate([hit_c, top.ravel()])
            order = np.argsort(hit_r, kind="stable")  # rows in order, as the pairs are deduplicated below
            hit_r, hit_c = hit_r[order], hit_c[order]
        rows_l.append(rows[hit_r])
        cols_l.append(hit_c.astype(np.int64))
        sims_l.append(sims[hit_r, hit_c].astype(np.float64))
    return np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(sims_l)


def _hnsw_candidates(sub: np.ndarray, threshold: float, k: int,
                     settings: DenseConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's candidates through an HNSW index of the rows: its ``SYNONYM_PROBE`` nearest, re-scored
    exactly and kept at or above ``threshold``; a row whose probed neighbours all pass (it may have more) is
    searched again for its ``k`` nearest. At most ``k`` per row, strongest first, as ``(rows, cols, sims)`` in
    row order."""
    from sirerag.pool.ann import build_ann

    m = sub.shape[0]
    probe = min(k, SYNONYM_PROBE)
    index = build_ann(sub, settings, purpose="synonym edges over many entity names (graph.synonym_ann_min_names)")
    rows, cols, sims = _nearest(index, sub, np.arange(m), probe, threshold)
    crowded = np.flatnonzero(np.bincount(rows, minlength=m) >= probe) if probe < k else np.zeros(0, np.int64)
    keep = ~np.isin(rows, crowded)
    more = _nearest(index, sub, crowded, k, threshold)
    del index
    logger.info("synonym edges over %d names by HNSW; %d names with over %d near-duplicates searched for %d",
                m, crowded.size, probe - 1, k)
    rows, cols, sims = (np.concatenate([a[keep], b]) for a, b in zip((rows, cols, sims), more))
    order = np.lexsort((-sims, rows))
    rows, cols, sims = rows[order], cols[order], sims[order]
    rank = np.arange(rows.size) - np.searchsorted(rows, rows, side="left")
    return rows[rank < k], cols[rank < k], sims[rank < k]


def _nearest(index: Any, sub: np.ndarray, queries: np.ndarray, count: int,
             threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``count`` nearest rows of each query row by ``index`` (a usearch Index, of an optional extra: ``Any``;
    the row itself left out), re-scored exactly, at or above ``threshold``: ``(rows, cols, sims)``."""
    rows_l, cols_l, sims_l = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.float64)]
    block = max(1, _PAIRS // (count + 1))
    index.expansion_search = max(_MIN_EXPANSION, 2 * (count + 1))
    for start in range(0, queries.size, block):
        q = queries[start:start + block]
        found = index.search(sub[q], count + 1, threads=0)
        keys = np.atleast_2d(found.keys).astype(np.int64)
        counts = np.atleast_1d(found.counts) if hasattr(found, "counts") else np.array([len(found.keys)])
        valid = np.arange(keys.shape[1])[None, :] < counts[:, None]  # one query: usearch answers with one list
        rows = np.broadcast_to(q[:, None], keys.shape)
        keep = valid & (keys != rows)
        r, c = rows[keep], keys[keep]
        sims = np.einsum("ij,ij->i", sub[r], sub[c]).astype(np.float64)
        passed = sims >= threshold
        rows_l.append(r[passed])
        cols_l.append(c[passed])
        sims_l.append(sims[passed])
    return np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(sims_l)
