"""Personalized PageRank by local push from a sparse reset vector.

Power iteration (:mod:`sirerag.graph.ppr`) multiplies the whole transition matrix about
``log(tol) / log(damping)`` times per query, so a query's cost grows with the graph. The
forward push of Andersen, Chung and Lang ("Local graph partitioning using PageRank vectors",
FOCS 2006) instead keeps a residual per node: pushing node ``u`` moves its residual into its
estimate and sends ``damping`` times it along ``u``'s edges. A node is pushed only while its
residual exceeds ``tol`` times the reset's total times its number of edges, so the edges a query
touches are at most ``1 / ((1 - damping) * tol)``, whatever the size of the graph.

The estimate solves the same equation as :class:`~sirerag.graph.ppr.PersonalizedPageRank`:
with dangling nodes sending their mass back to the reset, that fixed point is proportional to
``(I - damping * T) ^ -1 @ reset`` (``T`` the transition matrix), so both return it normalised
to sum 1. The residual left below the threshold is added to its own node's estimate (the first
term of what it would have spread), so a node the push never reached keeps its share of the reset.

The push here is synchronous: each round pushes every node over its limit at once, with numpy (a
node's edges gathered from the CSR arrays, their shares summed by ``bincount``), instead of one node
at a time from a queue. The bound above holds for it too, and it needs about as many rounds as the
walk needs hops to fall below the limit (7-8 on the 30,000-passage scale index). A sequential push
compiled with numba was as fast per query, but importing and loading it cost a one-shot search
0.6-0.8 s.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config.retrieval import Walk
from sirerag.core.errors import check
from sirerag.graph.csr import row_positions
from sirerag.graph.ppr import PersonalizedPageRank

logger = logging.getLogger(__name__)


def _push(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, damping: float, limit: np.ndarray,
          residual: np.ndarray) -> tuple[np.ndarray, int]:
    """Push ``residual`` (changed in place) until no node's residual exceeds its ``limit``; returns the estimate
    (the residual left added in) and the number of edges pushed along. A pushed node sends ``damping`` times its
    residual along its edges in proportion to their weights ``data`` (its row of the CSR arrays)."""
    n = residual.shape[0]
    estimate = np.zeros(n)
    touched = 0
    while True:
        active = np.flatnonzero(residual > limit)
        if not active.size:
            break
        mass = residual[active]
        residual[active] = 0.0
        estimate[active] += mass
        starts = indptr[active]
        counts = indptr[active + 1] - starts
        spreading = counts > 0  # a node without edges keeps its mass
        starts, counts, mass = starts[spreading], counts[spreading], mass[spreading]
        total = int(counts.sum())
        if not total:
            continue
        touched += total
        edges = row_positions(starts, starts + counts)  # the active nodes' edges in the CSR arrays, row after row
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))  # where each active node's edges begin in ``edges``
        weights = np.asarray(data[edges], dtype=np.float64)
        strength = np.add.reduceat(weights, offsets)  # each active node's weight, summed in row order
        share = np.divide(damping, strength, out=np.zeros(strength.size), where=strength > 0)
        residual += np.bincount(indices[edges], weights=weights * np.repeat(share, counts) * np.repeat(mass, counts),
                                minlength=n)
    return estimate + residual, touched  # a residual left below the limit counts as its own node's mass


class LocalPush:
    """Personalized PageRank over one weighted graph, by forward push from a sparse reset.

    Args:
        adjacency: ``(n, n)`` non-negative edge weights, as for
            :class:`~sirerag.graph.ppr.PersonalizedPageRank`.
        damping: probability of following an edge rather than resetting.
        tol: a node is pushed while its residual exceeds ``tol`` times the reset's total times its number
            of edges (at least 1).
    """

    def __init__(self, adjacency: sp.spmatrix | np.ndarray, *, damping: float, tol: float) -> None:
        check(0.0 <= float(damping) < 1.0, "damping", damping, "a number in [0, 1)")
        check(0.0 < float(tol) < 1.0, "push_tol", tol, "a number in (0, 1)")
        matrix: sp.csr_matrix = adjacency if isinstance(adjacency, sp.csr_matrix) else sp.csr_matrix(adjacency)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"adjacency must be square, got shape {matrix.shape}")
        data = np.asarray(matrix.data, dtype=np.float64)
        if data.size and data.min() < 0:
            raise ValueError("adjacency must have non-negative weights")
        self.n = matrix.shape[0]
        self.damping, self.tol = float(damping), float(tol)
        # the CSR arrays as loaded (memory-mapped): a push divides the weights of the rows it pushes by their sums,
        # so nothing here reads every edge (at 100,000 passages the graph has about 9M)
        self.indptr = np.asarray(matrix.indptr, dtype=np.int64)
        self.indices = np.asarray(matrix.indices, dtype=np.int64)
        self.data = data
        self.limit = self.tol * np.maximum(np.diff(self.indptr), 1).astype(np.float64)
        self.last_edges = 0  # edges the last query touched

    def run(self, nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """PageRank mass ``(n,)`` of every node for the reset ``weights`` on ``nodes`` (a node may repeat: its
        weights add up), normalised to sum 1.

        Raises:
            ValueError: a node out of range, a negative or non-finite weight, or weights summing to zero.
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float64)
        if nodes.shape != weights.shape or nodes.ndim != 1:
            raise ValueError(f"nodes and weights must be 1-d and of one length, got {nodes.shape} and "
                             f"{weights.shape}")
        if nodes.size and (nodes.min() < 0 or nodes.max() >= self.n):
            raise ValueError(f"reset nodes must be in 0..{self.n - 1}")
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise ValueError("reset weights must be finite and non-negative")
        total = float(weights.sum())
        if total <= 0:
            raise ValueError("the reset needs a positive weight")
        residual = np.bincount(nodes, weights=weights / total, minlength=self.n)
        estimate, self.last_edges = _push(self.indptr, self.indices, self.data, self.damping, self.limit, residual)
        return estimate / estimate.sum()

    def run_entries(self, resets: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """:meth:`run` for each ``(nodes, weights)`` reset; returns ``(n, len(resets))``."""
        return np.stack([self.run(nodes, weights) for nodes, weights in resets], axis=1)


def make_walk(adjacency: sp.spmatrix, walk: Walk, *, damping: float, tol: float, max_iter: int,
              push_tol: float) -> PersonalizedPageRank | LocalPush:
    """The PageRank of ``walk``: ``power`` (:class:`~sirerag.graph.ppr.PersonalizedPageRank`, to ``tol`` within
    ``max_iter`` iterations) or ``push`` (:class:`LocalPush`, to ``push_tol``)."""
    if walk == "push":
        return LocalPush(adjacency, damping=damping, tol=push_tol)
    return PersonalizedPageRank(adjacency, damping=damping, tol=tol, max_iter=max_iter)
