"""Personalized PageRank against igraph's, on random graphs and on a real entity graph."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _graphs import random_graph

from sirerag.core.errors import ConfigError
from sirerag.graph.ppr import PersonalizedPageRank, personalized_pagerank

ig = pytest.importorskip("igraph")


def igraph_ppr(adjacency: sp.csr_matrix, reset: np.ndarray, damping: float) -> np.ndarray:
    upper = sp.triu(adjacency, k=1).tocoo()
    g = ig.Graph(n=adjacency.shape[0], edges=list(zip(upper.row.tolist(), upper.col.tolist())), directed=False)
    g.es["weight"] = upper.data.tolist()
    return np.array(g.personalized_pagerank(damping=damping, reset=reset.tolist(), weights="weight",
                                            directed=False, implementation="prpack"))


@pytest.mark.parametrize("n,m,seed", [(30, 40, 0), (400, 700, 1), (3000, 5000, 2)])
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_matches_igraph_on_random_graphs(n, m, seed, damping):
    adjacency = random_graph(n, m, seed)
    dangling = np.asarray(adjacency.sum(axis=1)).ravel() == 0
    assert dangling.any()  # the dangling-node rule is exercised
    rng = np.random.default_rng(seed + 10)
    reset = np.zeros(n)
    reset[rng.choice(n, 5, replace=False)] = rng.random(5)
    reset[np.flatnonzero(dangling)[0]] = 0.3  # mass on a dangling node too
    ours = personalized_pagerank(adjacency, reset, damping=damping, tol=1e-10, max_iter=500)
    ref = igraph_ppr(adjacency, reset, damping)
    assert np.abs(ours - ref).sum() < 1e-6
    assert ours.sum() == pytest.approx(1.0)


def test_batched_equals_one_by_one():
    adjacency = random_graph(500, 900, 4)
    rng = np.random.default_rng(5)
    resets = rng.random((500, 3)) * (rng.random((500, 3)) < 0.02)
    resets[0] += 1.0
    ppr = PersonalizedPageRank(adjacency, tol=1e-10)  # both converged far below the bound checked
    batched = ppr.run(resets)
    for j in range(3):
        assert np.abs(batched[:, j] - ppr.run(resets[:, j])).sum() < 1e-7


def test_reset_validation_and_settings():
    ppr = PersonalizedPageRank(random_graph(10, 15, 0))
    with pytest.raises(ValueError, match="positive entry"):
        ppr.run(np.zeros(10))
    with pytest.raises(ValueError, match="non-negative"):
        ppr.run(-np.ones(10))
    with pytest.raises(ValueError, match="shape"):
        ppr.run(np.ones(9))
    with pytest.raises(ConfigError, match="damping"):
        PersonalizedPageRank(random_graph(10, 15, 0), damping=1.0)
    with pytest.raises(ConfigError, match="max_iter"):
        PersonalizedPageRank(random_graph(10, 15, 0), max_iter=0)


def test_isolated_seed_keeps_its_mass():
    # a seed without edges: all of its mass returns to the reset distribution
    adjacency = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=float))
    np.testing.assert_allclose(personalized_pagerank(adjacency, np.array([0, 0, 1.0])), [0, 0, 1], atol=1e-12)
