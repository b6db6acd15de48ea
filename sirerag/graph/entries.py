"""Pool entries as seen from the entity graph: which nodes an entry covers, and entry scores from node mass."""
from __future__ import annotations

from array import array

import numpy as np
import scipy.sparse as sp

from sirerag.core.types import Node, Pool
from sirerag.graph.build import EntityGraph


def entry_node_pairs(pool: Pool, passage_index: dict[str, int]) -> np.ndarray:
    """``(2, n)`` int64: every ``(entry row, passage node)`` once, sorted: the passages each entry covers."""
    rows, cols = array("q"), array("q")  # 8 bytes a pair, where a list of ints took 36
    for i, entry in enumerate(pool.scan()):
        for passage in entry.passages:
            node = passage_index.get(passage)
            if node is not None:
                rows.append(i)
                cols.append(node)
    n_nodes = max(cols, default=0) + 1  # (entry, node) keyed as one integer
    keys = np.unique(np.asarray(rows, dtype=np.int64) * n_nodes + np.asarray(cols, dtype=np.int64))
    return np.stack([keys // n_nodes, keys % n_nodes]) if keys.size else np.zeros((2, 0), np.int64)


def entry_node_matrix(pool: Pool, graph: EntityGraph, pairs: np.ndarray | None = None) -> sp.csr_matrix:
    """``(n_entries, n_nodes)``: row ``i`` averages the passage nodes entry ``i`` covers (an aggregate's entity
    node is not counted); entries covering none are zero. ``pairs``: :func:`entry_node_pairs` computed before (a
    search loads them)."""
    if pairs is None:
        pairs = entry_node_pairs(pool, graph.passage_index)
    row, col = (np.asarray(a, dtype=np.int64) for a in pairs)
    counts = np.bincount(row, minlength=len(pool))
    data = 1.0 / counts[row].astype(np.float64) if row.size else np.zeros(0)
    shape = (len(pool), graph.n_nodes)
    if row.size and bool(np.all((row[1:] > row[:-1]) | ((row[1:] == row[:-1]) & (col[1:] > col[:-1])))):
        # sorted and each pair once, as stored: the CSR arrays as they are, without a conversion
        indptr = np.zeros(len(pool) + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return sp.csr_matrix((data, col, indptr), shape=shape)
    return sp.csr_matrix((data, (row, col)), shape=shape)


class PassageLeaves:
    """The leaf entries of a passage, in pool order: :meth:`Pool.leaves_of`, answered for a passage of the graph
    from the entry-node matrix (:func:`entry_node_matrix`, every ``(entry, passage node)`` pair), so that the pool
    rule's first lift does not read the passages of every leaf (``entries.jsonl``'s leaf lines, 0.3 s at 100,000
    passages). A passage outside the graph is asked of the pool."""

    def __init__(self, pool: Pool, graph: EntityGraph, nodes: sp.csr_matrix) -> None:
        self.pool, self.graph, self.nodes = pool, graph, nodes
        self._by_node: sp.csc_matrix | None = None  # the matrix by column, made at the first question

    def __call__(self, passage: str) -> tuple[Node, ...]:
        node = self.graph.passage_index.get(passage)
        if node is None:
            return self.pool.leaves_of(passage)
        if self._by_node is None:
            self._by_node = self.nodes.tocsc()
        rows = self._by_node.indices[self._by_node.indptr[node]:self._by_node.indptr[node + 1]]
        kinds = self.pool.kinds
        return tuple(self.pool.entries[row] for row in sorted(rows.tolist()) if kinds[row] == "leaf")


def entry_scores(mass: np.ndarray, nodes: sp.csr_matrix) -> np.ndarray:
    """Scores ``(n_entries, n_queries)`` of pool entries from node mass ``(n_nodes, n_queries)``: the mean mass of
    the passages each entry covers."""
    return np.asarray(nodes @ mass)


class GroupMax:
    """Values grouped by a group id in ``0 .. n - 1`` (one per value), sorted once here: ``order`` puts the values
    in group order and ``bounds[g]:bounds[g + 1]`` is group ``g``'s slice of it. Calling it gives each group's
    largest value, as ``np.maximum.at`` does, by one ``np.maximum.reduceat`` (a few times faster on the hundreds of
    thousands of leaves of a large pool)."""

    def __init__(self, groups: np.ndarray, n: int) -> None:
        groups = np.asarray(groups, dtype=np.int64)
        self.n = n
        self.order = np.argsort(groups, kind="stable")
        self.bounds = np.searchsorted(groups[self.order], np.arange(n + 1))
        self.present = np.flatnonzero(self.bounds[1:] > self.bounds[:-1])

    def __call__(self, values: np.ndarray, fill: float) -> np.ndarray:
        """``(n,)`` float64: each group's largest value and ``fill``, whichever is larger (``fill`` for a group
        without values)."""
        out = np.full(self.n, fill, dtype=np.float64)
        if self.present.size:
            best = np.maximum.reduceat(np.asarray(values, dtype=np.float64)[self.order], self.bounds[self.present])
            out[self.present] = np.maximum(best, fill)
        return out
