"""PageRank by local push: the power iteration's vector at a small tolerance, a query's work bounded by the
tolerance whatever the graph's size, the reset as (nodes, weights), and the retriever's ``walk`` setting."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _graphs import random_graph

from sirerag.core.config.retrieval import PPRSettings
from sirerag.core.errors import ConfigError
from sirerag.graph.linking import Seeds, reset_entries, reset_vector
from sirerag.graph.ppr import PersonalizedPageRank
from sirerag.graph.push import LocalPush


@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_push_converges_to_the_power_iteration(damping):
    adjacency = random_graph(2000, 5000, 3)
    dangling = np.flatnonzero(np.asarray(adjacency.sum(axis=1)).ravel() == 0)
    assert dangling.size  # the dangling-node rule is exercised
    rng = np.random.default_rng(4)
    nodes = np.concatenate([rng.choice(2000, 40, replace=False), dangling[:1], [7, 7]])  # 7 twice: weights add
    weights = np.concatenate([rng.random(40), [0.3], [0.2, 0.1]])
    reset = np.zeros(2000)
    np.add.at(reset, nodes, weights)
    exact = PersonalizedPageRank(adjacency, damping=damping, tol=1e-12, max_iter=1000).run(reset)
    push = LocalPush(adjacency, damping=damping, tol=1e-9)
    ours = push.run(nodes, weights)
    assert ours.sum() == pytest.approx(1.0)
    assert np.abs(ours - exact).sum() < 1e-5
    coarse = LocalPush(adjacency, damping=damping, tol=1e-4).run(nodes, weights)
    assert np.abs(coarse - exact).sum() > np.abs(ours - exact).sum()  # the tolerance is what bounds the error


def test_a_query_touches_at_most_the_bound_whatever_the_graph():
    tol, damping = 1e-4, 0.5
    touched = []
    for n in (5_000, 50_000):
        adjacency = random_graph(n, 4 * n, 5)
        push = LocalPush(adjacency, damping=damping, tol=tol)
        push.run(np.array([1, 2, 3]), np.array([1.0, 0.5, 0.25]))
        touched.append(push.last_edges)
        # every push removes (1 - damping) x its residual, at least tol x its edges: Andersen et al.'s bound
        assert 0 < push.last_edges <= 1 / ((1 - damping) * tol)
    # ten times the graph: about the same work (the power iteration's would grow tenfold)
    assert touched[1] < 2 * touched[0]


def test_reset_validation():
    push = LocalPush(random_graph(10, 15, 0), damping=0.5, tol=1e-6)
    with pytest.raises(ValueError, match="positive weight"):
        push.run(np.array([1]), np.array([0.0]))
    with pytest.raises(ValueError, match="non-negative"):
        push.run(np.array([1]), np.array([-1.0]))
    with pytest.raises(ValueError, match=r"in 0\.\.9"):
        push.run(np.array([10]), np.array([1.0]))
    with pytest.raises(ValueError, match="one length"):
        push.run(np.array([1, 2]), np.array([1.0]))
    with pytest.raises(ConfigError, match="push_tol"):
        LocalPush(random_graph(10, 15, 0), damping=0.5, tol=0.0)
    with pytest.raises(ConfigError, match="push_tol"):
        PPRSettings(push_tol=1.5).validate()
    with pytest.raises(ConfigError, match="walk"):
        PPRSettings.from_options(walk="random")


def test_reset_entries_add_up_to_the_reset_vector():
    from sirerag.graph.build import build_graph
    from sirerag.core.types import Proposition

    props = [Proposition(id=f"p{i}", text=f"t{i}", entities=tuple(ents), chunk_id=f"c{i}", doc_id=doc, index=0)
             for i, (doc, ents) in enumerate([("d1", ["a", "b"]), ("d2", ["b", "c"]), ("d3", ["c"])])]
    graph = build_graph(["d1", "d2", "d3"], props)
    seeds = Seeds(entities={0: 1.0, 2: 0.5}, passages={graph.n_entities + 1: 0.25})
    scores = np.array([0.1, 0.9, 0.4])
    nodes, weights = reset_entries(graph, seeds, scores, 0.05)
    dense = np.zeros(graph.n_nodes)
    np.add.at(dense, nodes, weights)
    np.testing.assert_array_equal(dense, reset_vector(graph, seeds, scores, 0.05))
    assert dense[graph.n_entities + 1] == pytest.approx(0.25 + 0.05)  # a bridged passage also has its dense share
    nodes, _ = reset_entries(graph, seeds, scores, 0.0)
    assert set(nodes.tolist()) == {0, 2, graph.n_entities + 1}  # no dense share at weight 0
