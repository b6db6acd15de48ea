"""Pool entries as seen from the entity graph: which nodes an entry covers, and entry scores from node mass."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sirerag.core.types import Pool
from sirerag.graph.build import EntityGraph

ENTRY_SCORES = ("max", "mean", "entity")


def entry_node_matrix(pool: Pool, graph: EntityGraph, *, with_entity: bool = True) -> sp.csr_matrix:
    """``(n_entries, n_nodes)``: row ``i`` averages the graph nodes entry ``i`` covers
    (its passages, plus with ``with_entity`` its entity for an aggregate); entries covering
    none are zero."""
    rows: list[int] = []
    cols: list[int] = []
    passage_node = graph.passage_index
    for i, entry in enumerate(pool.entries):
        for passage in entry.passages:
            node = passage_node.get(passage)
            if node is not None:
                rows.append(i)
                cols.append(node)
        if with_entity and entry.entity is not None:
            entity = graph.entity_node(entry.entity)
            if entity is not None:
                rows.append(i)
                cols.append(entity)
    n_nodes = graph.n_nodes
    keys = np.unique(np.asarray(rows, dtype=np.int64) * n_nodes + np.asarray(cols, dtype=np.int64))
    row, col = keys // n_nodes, keys % n_nodes  # each (entry, node) once
    covered = np.bincount(row, minlength=len(pool)).astype(np.float64)
    return sp.csr_matrix((1.0 / covered[row] if row.size else np.zeros(0), (row, col)), shape=(len(pool), n_nodes))


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
