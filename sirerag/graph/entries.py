"""Pool entries as seen from the entity graph: which nodes an entry covers, and entry scores from node mass."""
from __future__ import annotations

from typing import Callable

import numpy as np
import scipy.sparse as sp

from sirerag.core.types import Pool
from sirerag.graph.build import EntityGraph

ENTRY_SCORES = ("max", "mean", "entity")


def entry_node_pairs(pool: Pool, passage_index: dict[str, int],
                     entity_node: Callable[[str], int | None] | None = None) -> np.ndarray:
    """``(2, n)`` int64: every ``(entry row, graph node)`` once, sorted: the passages each entry covers, plus with
    ``entity_node`` an aggregate's entity."""
    rows: list[int] = []
    cols: list[int] = []
    for i, entry in enumerate(pool.entries):
        for passage in entry.passages:
            node = passage_index.get(passage)
            if node is not None:
                rows.append(i)
                cols.append(node)
        if entity_node is not None and entry.entity is not None:
            entity = entity_node(entry.entity)
            if entity is not None:
                rows.append(i)
                cols.append(entity)
    n_nodes = max(cols, default=0) + 1  # (entry, node) keyed as one integer
    keys = np.unique(np.asarray(rows, dtype=np.int64) * n_nodes + np.asarray(cols, dtype=np.int64))
    return np.stack([keys // n_nodes, keys % n_nodes]) if keys.size else np.zeros((2, 0), np.int64)


def entry_node_matrix(pool: Pool, graph: EntityGraph, *, with_entity: bool = True,
                      pairs: np.ndarray | None = None) -> sp.csr_matrix:
    """``(n_entries, n_nodes)``: row ``i`` averages the graph nodes entry ``i`` covers
    (its passages, plus with ``with_entity`` its entity for an aggregate); entries covering
    none are zero. ``pairs``: :func:`entry_node_pairs` computed before (a search loads them)."""
    if pairs is None:
        pairs = entry_node_pairs(pool, graph.passage_index, graph.entity_node if with_entity else None)
    row, col = pairs
    covered = np.bincount(row, minlength=len(pool)).astype(np.float64)
    return sp.csr_matrix((1.0 / covered[row] if row.size else np.zeros(0), (row, col)),
                         shape=(len(pool), graph.n_nodes))


def entry_scores(mass: np.ndarray, nodes: sp.csr_matrix, how: str) -> np.ndarray:
    """Scores ``(n_entries, n_queries)`` of pool entries from node mass ``(n_nodes, n_queries)``:
    ``max`` = the mass of the entry's best passage, ``mean``/``entity`` = the mean over its nodes."""
    if how != "max":
        return np.asarray(nodes @ mass)
    out = np.zeros((nodes.shape[0], mass.shape[1]))
    nonempty = np.flatnonzero(np.diff(nodes.indptr))
    if nonempty.size:
        out[nonempty] = np.maximum.reduceat(mass[nodes.indices], nodes.indptr[nonempty], axis=0)
    return out
