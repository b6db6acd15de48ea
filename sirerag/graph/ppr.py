"""Personalized PageRank by power iteration over a ``scipy.sparse`` matrix.

The walk follows an edge with probability ``damping`` (choosing among a node's
edges in proportion to their weights) and jumps back to the reset distribution
otherwise. A node without edges (a dangling node) sends all its mass to the reset
distribution, which is what ``igraph.Graph.personalized_pagerank`` does, so the
two agree to the convergence tolerance (the tests check L1 < 1e-6).

The transition matrix is prepared once per graph; each query then costs a few
sparse matrix-vector products (about ``log(tol) / log(damping)`` of them: 27 at
the defaults), and several queries run together as one sparse matrix-matrix
product per iteration.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config.sections import GraphConfig
from sirerag.core.errors import check

logger = logging.getLogger(__name__)


class PersonalizedPageRank:
    """Personalized PageRank over one weighted graph.

    Args:
        adjacency: ``(n, n)`` non-negative edge weights; ``adjacency[i, j]`` is the
            weight of the edge ``i -> j`` (symmetric for an undirected graph).
        damping: probability of following an edge rather than resetting.
        tol: stop when the L1 change between two iterations is below this.
        max_iter: iteration cap; reaching it logs a warning.
        (All three default to the build's, :class:`~sirerag.core.config.GraphConfig`.)
    """

    def __init__(self, adjacency: sp.spmatrix | np.ndarray, *, damping: float = GraphConfig.damping,
                 tol: float = GraphConfig.tol, max_iter: int = GraphConfig.max_iter) -> None:
        check(0.0 <= float(damping) < 1.0, "damping", damping, "a number in [0, 1)")
        check(float(tol) > 0.0, "tol", tol, "a positive number")
        check(isinstance(max_iter, int) and max_iter >= 1, "max_iter", max_iter, "an integer >= 1")
        matrix = sp.csr_matrix(adjacency, dtype=np.float64)
        if matrix.shape[0] != matrix.shape[1]:
            raise ValueError(f"adjacency must be square, got shape {matrix.shape}")
        if matrix.nnz and matrix.data.min() < 0:
            raise ValueError("adjacency must have non-negative weights")
        self.damping = float(damping)
        self.tol = float(tol)
        self.max_iter = max_iter
        self.n = matrix.shape[0]
        strength = np.asarray(matrix.sum(axis=1)).ravel()
        self.dangling = strength <= 0
        self._dangling_rows = np.flatnonzero(self.dangling)  # indexed once, not masked every iteration
        inverse = np.zeros_like(strength)
        inverse[~self.dangling] = 1.0 / strength[~self.dangling]
        # transposed transition matrix: column i holds the out-probabilities of node i
        self.transition_t = (sp.diags(inverse) @ matrix).T.tocsr()
        self.last_iterations = 0

    def run(self, reset: np.ndarray) -> np.ndarray:
        """PageRank mass of every node for one reset vector ``(n,)`` or several ``(n, q)``.

        The reset vector is normalised to sum 1 (per column); the result sums to 1.

        Raises:
            ValueError: a reset vector has the wrong length, a negative or non-finite
                entry, or sums to zero.
        """
        r = np.asarray(reset, dtype=np.float64)
        one_d = r.ndim == 1
        if one_d:
            r = r[:, None]
        if r.ndim != 2 or r.shape[0] != self.n:
            raise ValueError(f"reset must have shape ({self.n},) or ({self.n}, q), got {np.shape(reset)}")
        if not np.isfinite(r).all() or (r < 0).any():
            raise ValueError("reset must be finite and non-negative")
        totals = r.sum(axis=0)
        if (totals <= 0).any():
            raise ValueError("every reset vector needs a positive entry")
        r = r / totals
        p = r.copy()
        d = self.damping
        it = 0
        for it in range(1, self.max_iter + 1):
            dangling_mass = p[self._dangling_rows].sum(axis=0) if self._dangling_rows.size else 0.0
            new = d * (self.transition_t @ p) + (d * dangling_mass + (1.0 - d)) * r
            delta = np.abs(new - p).sum(axis=0).max()
            p = new
            if delta < self.tol:
                break
        else:
            logger.warning("personalized PageRank did not converge in %d iterations (last L1 change %.2e)",
                           self.max_iter, delta)
        self.last_iterations = it
        p /= p.sum(axis=0)
        return p[:, 0] if one_d else p

    def run_entries(self, resets: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """:meth:`run` on resets given as ``(nodes, weights)`` (a node may repeat: its weights add up), one per
        query; returns ``(n, len(resets))``."""
        matrix = np.zeros((self.n, len(resets)), dtype=np.float64)
        for column, (nodes, weights) in enumerate(resets):
            np.add.at(matrix[:, column], nodes, weights)
        return self.run(matrix)


def personalized_pagerank(adjacency: sp.spmatrix | np.ndarray, reset: np.ndarray, *,
                          damping: float = GraphConfig.damping, tol: float = GraphConfig.tol,
                          max_iter: int = GraphConfig.max_iter) -> np.ndarray:
    """One-off Personalized PageRank (see :class:`PersonalizedPageRank`)."""
    return PersonalizedPageRank(adjacency, damping=damping, tol=tol, max_iter=max_iter).run(reset)
