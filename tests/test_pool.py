"""The retrieval pool: flattening trees in order, round trips, shape checks, manifest components, record
validation."""
from __future__ import annotations

import io
import mmap

import numpy as np
import pytest

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import write_manifest
from sirerag.pool import store
from sirerag.pool.store import flatten, load_pool, register_component, save_pool, write_flat_pool
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


@pytest.mark.parametrize("block_rows", [1, 2, 4096])
def test_the_streamed_pool_writes_the_bytes_of_the_flattened_one(tmp_path, monkeypatch, block_rows):
    monkeypatch.setattr(store, "_BLOCK_ROWS", block_rows)  # rows copied into the mapped file a few at a time
    a = _tree([_node(i) for i in range(5)], dim=6)
    b = TreeResult(nodes=(_node(0, tree="relatedness", kind="aggregate"), _node(3), _node(7, tree="relatedness")),
                   embeddings=np.random.default_rng(2).normal(size=(3, 6)))  # float64, cast as flatten casts
    save_pool(tmp_path / "stacked", flatten([a, b]))
    streamed = write_flat_pool(tmp_path / "streamed", [a, b])
    for name in ("entries.jsonl", "embeddings.npy"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "stacked" / name).read_bytes()
    assert len(streamed) == 7 and streamed.position(b.nodes[2].id) == 6
    assert isinstance(streamed.embeddings.base, mmap.mmap) and not streamed.embeddings.flags.writeable
    np.testing.assert_array_equal(streamed.embeddings, flatten([a, b]).embeddings)


def test_an_empty_streamed_pool_is_an_empty_matrix(tmp_path):
    pool = write_flat_pool(tmp_path, [TreeResult(nodes=(), embeddings=np.zeros((0, 4), dtype=np.float32))])
    assert len(pool) == 0 and pool.embeddings.shape == (0, 4)
    assert (tmp_path / "embeddings.npy").read_bytes() == _npy_bytes(np.zeros((0, 4), dtype=np.float32))


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


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
