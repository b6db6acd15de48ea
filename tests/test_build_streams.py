"""The graph stage's streamed parts give what the in-memory ones gave: the names' vectors written in slices, the
edges summed from arrays, the pool's entries scanned without being kept, BM25 over a stream of texts."""
from __future__ import annotations

import hashlib
import io
import itertools

import numpy as np

from sirerag.core.types import Node, Pool, Proposition
from sirerag.graph.build import build_graph, names_in_memory
from sirerag.graph.edges import structural_edges
from sirerag.graph.name_vectors import NameVectorWriter
from sirerag.pool.bm25 import build_lexical_index, save_lexical_index
from sirerag.pool.entries import LazyEntries, map_file
from sirerag.pool.store import ENTRIES, save_pool, write_flat_pool
from sirerag.trees.base import TreeResult


class HashEmbedder:
    """Unit rows from each text's sha256; records the texts of each call."""

    dim = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode_documents(self, texts):  # noqa: ANN001, ANN201
        self.calls.append(list(texts))
        rows = np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], np.uint8) for t in texts],
                        dtype=np.float32).reshape(len(texts), self.dim) - 127.5
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


NAMES = ["Paris", "NY", "Alice Smith", "Bo", "Carol", "Danube River", "Eve", "5", "Franz Liszt", "Gdansk"]


def test_the_name_vectors_written_in_slices_are_the_file_of_the_names_embedded_at_once(tmp_path) -> None:
    eligible = np.array([len(n) >= 3 for n in NAMES])
    whole, kept_whole = names_in_memory(HashEmbedder(), NAMES, eligible)
    embedder = HashEmbedder()
    writer = NameVectorWriter(tmp_path, slice_names=3)
    mapped, kept = writer(embedder, NAMES, eligible)
    buffer = io.BytesIO()
    np.save(buffer, whole, allow_pickle=False)
    assert writer.written and (tmp_path / "entity_embeddings.npy").read_bytes() == buffer.getvalue()
    np.testing.assert_array_equal(mapped, whole)
    np.testing.assert_array_equal(kept, kept_whole)
    # slices of the names in length order, as the embedding cache orders the texts it encodes
    assert [len(c) for c in embedder.calls] == [3, 3, 3, 1]
    lengths = [len(t) for t in itertools.chain(*embedder.calls)]
    assert lengths == sorted(lengths)


def test_a_graph_with_its_names_written_in_slices_is_the_graph_built_in_memory(tmp_path) -> None:
    props = [Proposition(id=f"f{i}", text=f"fact {i}", doc_id=f"p{i % 4}", chunk_id=f"c{i % 4}", index=0,
                         entities=tuple(NAMES[j % len(NAMES)] for j in range(i, i + 1 + i % 3))) for i in range(12)]
    args = dict(titles=["Paris", "Vienna", "", "Eve"], embedder=HashEmbedder(), synonym_threshold=0.1,
                synonym_max_neighbors=2)
    streamed = build_graph([f"p{i}" for i in range(4)], props, name_vectors=NameVectorWriter(tmp_path, slice_names=2),
                           **args)
    in_memory = build_graph([f"p{i}" for i in range(4)], props, **args)
    assert streamed.stats["synonym_edges"] > 0
    assert (streamed.adjacency != in_memory.adjacency).nnz == 0
    np.testing.assert_array_equal(streamed.entity_embeddings, in_memory.entity_embeddings)


def _reference_edges(passages, props):  # noqa: ANN001, ANN202
    """The dicts the graph's edges were summed in before they were arrays."""
    from sirerag.graph.edges import _entities_of

    position, entity, cooc, contains = {p: i for i, p in enumerate(passages)}, {}, {}, set()
    for prop in props:
        nodes = [entity.setdefault(key, len(entity)) for key, _ in _entities_of(prop)]
        for a, x in enumerate(nodes):
            contains.add((x, position[prop.doc_id]))
            for y in nodes[a + 1:]:
                cooc[(min(x, y), max(x, y))] = cooc.get((min(x, y), max(x, y)), 0.0) + 1.0
    return cooc, {(e, len(entity) + p): 1.0 for e, p in contains}


def test_the_edges_summed_from_arrays_are_the_edges_of_the_dicts() -> None:
    rng = np.random.default_rng(3)
    words = [f"Entity {i}" for i in range(40)]
    passages = [f"p{i}" for i in range(15)]
    props = [Proposition(id=f"f{i}", text="t", doc_id=passages[int(rng.integers(15))], chunk_id="c", index=0,
                         entities=tuple(words[int(j)] for j in rng.integers(0, 40, size=int(rng.integers(0, 6)))))
             for i in range(200)]
    _, cooc, contains, counts, _ = structural_edges(passages, props)
    want_cooc, want_contains = _reference_edges(passages, props)
    assert cooc.as_dict() == want_cooc and contains.as_dict() == want_contains
    assert counts.tolist() == np.bincount([e for e, _ in want_contains], minlength=len(counts)).tolist()


def _tree(kind: str, n: int) -> TreeResult:
    nodes = [Node(id=f"{kind}{i}", text=f"text {kind} {i}", kind="leaf" if kind == "c" else "summary",
                  tree="similarity", level=0 if kind == "c" else 1, passages=(f"p{i}",)) for i in range(n)]
    return TreeResult(nodes=tuple(nodes), embeddings=np.eye(n, 4, dtype=np.float32))


def test_the_written_pool_is_read_back_lazily_and_scanned_without_keeping_entries(tmp_path) -> None:
    trees = [_tree("c", 3), _tree("s", 2)]
    pool = write_flat_pool(tmp_path, trees)
    assert isinstance(pool.entries, LazyEntries)
    assert [e.text for e in pool.scan()] == [n.text for t in trees for n in t.nodes]
    assert pool.counts() == {"similarity/leaf/level0": 3, "similarity/summary/level1": 2}
    assert pool.leaf_passages() == {0: ("p0",), 1: ("p1",), 2: ("p2",)}
    assert pool.entries.parsed == 0  # every pass parsed the lines again, none kept
    save_pool(tmp_path / "again", Pool(entries=tuple(pool.entries), embeddings=np.asarray(pool.embeddings)))
    assert (tmp_path / "again" / ENTRIES).read_bytes() == bytes(map_file(tmp_path / ENTRIES))


def test_a_scan_that_hands_back_its_pages_as_it_goes_reads_every_entry(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("sirerag.pool.entries._RELEASE_BYTES", 1)  # hand back after every entry
    trees = [_tree("c", 3000)]
    pool = write_flat_pool(tmp_path, trees)
    assert len(bytes(map_file(tmp_path / ENTRIES))) > 4 * 4096  # several pages
    for _ in range(2):  # the pages handed back are read again from the file
        assert [e.id for e in pool.scan()] == [n.id for n in trees[0].nodes]
    assert pool.get("c2999").text == "text c 2999"


def test_bm25_over_a_stream_of_texts_is_bm25_over_their_list(tmp_path) -> None:
    texts = ["the red fox", "a red car and a fox", "blue sky", ""]
    save_lexical_index(build_lexical_index(texts), tmp_path / "list")
    save_lexical_index(build_lexical_index(t for t in texts), tmp_path / "stream")
    for path in sorted((tmp_path / "list").iterdir()):
        assert path.read_bytes() == (tmp_path / "stream" / path.name).read_bytes(), path.name
