"""Random weighted graphs for the PageRank tests."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def random_graph(n: int, m: int, seed: int) -> sp.csr_matrix:
    """Symmetric weighted graph without self-loops; some nodes end up isolated (dangling)."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, size=(m, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    upper = sp.coo_matrix((rng.random(len(edges)) + 0.1, (edges.min(1), edges.max(1))), shape=(n, n)).tocsr()
    upper.sum_duplicates()
    return (upper + upper.T).tocsr()
