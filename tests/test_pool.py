"""The retrieval pool: flattening trees in order, round trips, shape checks, manifest components, record
validation."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import write_manifest
from sirerag.pool.store import flatten, load_pool, register_component, save_pool
from sirerag.pool.loaded import load_index
from sirerag.trees.base import TreeResult
from sirerag.core.types import Node, Pool, document_id


def _node(i: int, tree: str = "similarity", kind: str = "leaf", level: int = 0, children=()) -> Node:
    text = f"text {tree} {i}"
    return Node(id=Node.make_id(kind, tree, level, text, children), text=text, kind=kind, tree=tree,
                level=level, children=tuple(children), passages=(f"p{i}",))


def _tree(nodes, dim=4, seed=0):
    rng = np.random.default_rng(seed)
    return TreeResult(nodes=tuple(nodes), embeddings=rng.normal(size=(len(nodes), dim)).astype(np.float32))


def test_flatten_keeps_order_and_drops_repeated_ids():
    a = _tree([_node(0), _node(1)])
    b = _tree([_node(0, tree="relatedness", kind="aggregate"), _node(1)], seed=1)
    pool = flatten([a, b])
    assert [e.tree for e in pool.entries] == ["similarity", "similarity", "relatedness"]
    np.testing.assert_array_equal(pool.embeddings[2], b.embeddings[0])
    assert pool.position(b.nodes[0].id) == 2


def test_pool_round_trip(tmp_path):
    leaves = [_node(i) for i in range(3)]
    summary = _node(9, kind="summary", level=1, children=[n.id for n in leaves])
    pool = flatten([_tree(leaves + [summary])])
    save_pool(tmp_path, pool)
    write_manifest(tmp_path, components={})
    loaded = load_index(tmp_path).pool
    assert loaded.entries == pool.entries
    assert loaded.embeddings.dtype == np.float32
    np.testing.assert_array_equal(loaded.embeddings, pool.embeddings)
    assert loaded.get(summary.id).children == tuple(n.id for n in leaves)


def test_load_pool_checks_shapes(tmp_path):
    pool = flatten([_tree([_node(0), _node(1)])])
    save_pool(tmp_path, pool)
    np.save(tmp_path / "embeddings.npy", np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(IndexFormatError, match=r"expected float32 of shape \(2, dim\)"):
        load_pool(tmp_path)


def test_register_component_updates_manifest(tmp_path):
    save_pool(tmp_path, flatten([_tree([_node(0)])]))
    write_manifest(tmp_path, components={"pool": {"type": "pool"}})
    register_component(tmp_path, "graph", path="graph", type="entity_graph")
    index = load_index(tmp_path)
    assert index.component("graph") == tmp_path / "graph"
    assert index.component("colbert") is None


def test_records_validate_kind_tree_and_ids():
    with pytest.raises(ValueError, match="Node.kind must be one of"):
        Node(id="x", text="t", kind="chunk", tree="similarity", level=0)
    with pytest.raises(ValueError, match="duplicate ids"):
        Pool(entries=(_node(0), _node(0)), embeddings=np.zeros((2, 3), dtype=np.float32))
    # the id scheme of shared/bench corpora
    assert document_id("Keala Settle", "Keala  Joan Settle\n") == document_id("Keala Settle", "Keala Joan Settle")
