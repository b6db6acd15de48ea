"""Entity graph construction, synonym edges and the on-disk format."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sirerag.core.config import GraphConfig
from sirerag.core.errors import IndexFormatError
from sirerag.graph.build import build_graph, structural_edges
from sirerag.graph.facts import FACT_ARRAYS, FactTable
from sirerag.graph.synonyms import synonym_edges
from sirerag.graph.store import build_and_save_graph, load_graph, save_graph
from sirerag.core.types import Document, Proposition


def prop(i: int, doc: str, *entities: str, text: str | None = None) -> Proposition:
    return Proposition(id=f"f{i}", text=text or f"fact {i}", entities=tuple(entities), chunk_id=f"c{doc}",
                       doc_id=doc, index=i)


# p1: Alice and Bob co-occur twice, Alice and Paris once; p2: Bob and Carol; p3 has no entity.
PROPS = [
    prop(0, "p1", "Alice", "Bob"),
    prop(1, "p1", "Alice", "Bob", "Paris"),
    prop(2, "p2", "Bob", "Carol"),
    prop(3, "p2", "Carol", "carol ", " ", "he"),  # case/space variants are one entity; blanks and pronouns none
    prop(4, "p3"),
]
PASSAGES = ["p1", "p2", "p3"]


class TableEmbedder:
    """Embeds names by a fixed table (the synonym tests need exact cosines)."""

    spec = "table"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = {k: np.asarray(v, np.float32) / np.linalg.norm(v) for k, v in table.items()}
        self.dim = len(next(iter(table.values())))

    def encode_documents(self, texts):
        return np.stack([self.table.get(t, self.table["*"]) for t in texts])

    encode_queries = encode_documents


def test_structural_edges_exact():
    entities, cooc, contains, counts, facts = structural_edges(PASSAGES, PROPS)
    assert entities == ["Alice", "Bob", "Paris", "Carol"]
    assert cooc.as_dict() == {(0, 1): 2.0, (0, 2): 1.0, (1, 2): 1.0, (1, 3): 1.0}
    e = len(entities)  # passage nodes follow the entities
    assert contains.as_dict() == {(0, e + 0): 1.0, (1, e + 0): 1.0, (2, e + 0): 1.0, (1, e + 1): 1.0, (3, e + 1): 1.0}
    assert counts.tolist() == [1, 2, 1, 1]  # Bob is in p1 and p2
    assert [f.id for f in facts] == ["f0", "f1", "f2", "f3"]  # f4 has no entity
    assert facts[3].entities == (3,)


def test_adjacency_is_symmetric_with_summed_weights():
    g = build_graph(PASSAGES, PROPS)
    a = g.adjacency.toarray()
    np.testing.assert_array_equal(a, a.T)
    assert np.all(np.diag(a) == 0)
    alice, bob, paris, carol = (g.entity_node(n) for n in ("Alice", "Bob", "Paris", "Carol"))
    p1, p2, p3 = (g.passage_index[p] for p in PASSAGES)
    # Alice-Bob: 2 propositions; one undirected edge stored as (i, j) and (j, i)
    assert a[alice, bob] == 2.0 and a[bob, carol] == 1.0 and a[alice, carol] == 0.0
    assert a[p1, alice] == a[p1, bob] == a[p1, paris] == 1.0 and a[p2, bob] == a[p2, carol] == 1.0
    assert a[p3].sum() == 0.0  # a passage without entities is an isolated node
    assert g.stats["cooccurrence_edges"] == 4 and g.stats["contains_edges"] == 5
    assert g.stats["undirected_edges"] == 9 and g.adjacency.nnz == 18


def test_unknown_passage_is_an_error():
    with pytest.raises(ValueError, match="not in the corpus"):
        build_graph(["p1"], [prop(0, "p9", "X")])


def _brute_force_candidates(x: np.ndarray, threshold: float, eligible: np.ndarray) -> set[tuple[int, int]]:
    sims = x @ x.T
    return {(i, j) for i in range(len(x)) for j in range(i + 1, len(x))
            if eligible[i] and eligible[j] and sims[i, j] >= threshold}


@pytest.mark.parametrize("block_size", [1, 7, None])
def test_synonym_edges_respect_threshold_and_cap(block_size):
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(4, 16))
    x = np.concatenate([c + 0.35 * rng.normal(size=(12, 16)) for c in centers]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    eligible = np.ones(len(x), bool)
    eligible[[0, 13]] = False
    rows, cols, sims = synonym_edges(x, threshold=0.8, max_neighbors=3, eligible=eligible, block_size=block_size)
    exact = x @ x.T
    assert rows.size > 0 and np.all(rows < cols)
    np.testing.assert_allclose(sims, exact[rows, cols], rtol=1e-5)
    assert sims.min() >= 0.8  # threshold
    degree = np.bincount(np.concatenate([rows, cols]), minlength=len(x))
    assert degree.max() <= 3  # neighbour cap
    assert degree[0] == degree[13] == 0  # ineligible entities
    candidates = _brute_force_candidates(x, 0.8, eligible)
    chosen = set(zip(rows.tolist(), cols.tolist()))
    assert chosen <= candidates and len(chosen) < len(candidates)  # the cap binds here
    # each entity proposes its 3 most similar candidates; proposals are accepted strongest
    # first, so a rejected proposal has an end already at the cap
    proposed = set()
    for i in range(len(x)):
        mine = sorted((j for j in range(len(x)) if (min(i, j), max(i, j)) in candidates), key=lambda j: -exact[i, j])
        proposed |= {(min(i, j), max(i, j)) for j in mine[:3]}
    assert chosen <= proposed
    for i, j in proposed - chosen:
        assert degree[i] == 3 or degree[j] == 3
    # without a binding cap every candidate pair is an edge
    rows2, cols2, _ = synonym_edges(x, threshold=0.8, max_neighbors=len(x), eligible=eligible, block_size=block_size)
    assert set(zip(rows2.tolist(), cols2.tolist())) == candidates


def test_synonym_edges_in_graph_skip_short_names():
    near = [1.0, 0.05, 0.0]
    emb = TableEmbedder({"New York City": [1, 0, 0], "New York": near, "NY": near, "N.Y.": near,
                         "*": [0, 0, 1]})
    props = [prop(0, "p1", "New York City"), prop(1, "p2", "New York"), prop(2, "p3", "NY"),
             prop(3, "p3", "N.Y.")]
    g = build_graph(["p1", "p2", "p3"], props, embedder=emb, synonym_threshold=0.8)
    a = g.adjacency.toarray()
    nyc, ny_long, ny, nydot = (g.entity_node(n) for n in ("New York City", "New York", "NY", "N.Y."))
    cos = float(emb.table["New York City"] @ emb.table["New York"])
    assert a[nyc, ny_long] == pytest.approx(cos)  # weight = cosine
    assert a[ny].sum() == 1.0 and a[nydot].sum() == 1.0  # < 3 alphanumerics: only the contains edge
    assert g.stats["synonym_edges"] == 1
    assert g.entity_embeddings.shape == (4, 3) and g.fact_embeddings.shape == (4, 3)
    g_high = build_graph(["p1", "p2", "p3"], props, embedder=emb, synonym_threshold=0.9999)
    assert g_high.stats["synonym_edges"] == 0


def test_save_load_round_trip(tmp_path):
    emb = TableEmbedder({"*": [1, 0], "Alice": [1, 1], "Bob": [0, 1]})
    g = build_graph(PASSAGES, PROPS, embedder=emb)
    save_graph(tmp_path / "graph", g, settings={"damping": 0.5})
    loaded, meta = load_graph(tmp_path / "graph")
    assert loaded.entities == g.entities and loaded.passages == g.passages
    assert (loaded.adjacency != g.adjacency).nnz == 0
    np.testing.assert_array_equal(loaded.entity_passages, g.entity_passages)
    np.testing.assert_array_equal(loaded.entity_embeddings, g.entity_embeddings)
    np.testing.assert_array_equal(loaded.fact_embeddings, g.fact_embeddings)
    assert isinstance(loaded.facts, FactTable)  # served from the stored arrays, each text parsed when asked for
    assert list(loaded.facts) == list(g.facts) and loaded.facts[-1] == g.facts[-1]
    assert loaded.facts[1:3] == list(g.facts[1:3])
    with pytest.raises(IndexError, match="fact 4 of 4"):
        loaded.facts[4]
    assert meta.settings.recorded() == {"damping": 0.5} and meta.stats == g.stats
    for path in (tmp_path / "graph").iterdir():  # plain formats only
        assert path.suffix in (".json", ".jsonl", ".npy")
        if path.suffix == ".npy":
            np.load(path, allow_pickle=False)


def test_a_graph_saved_before_the_fact_arrays_and_node_names_reads_its_files_whole(tmp_path):
    g = build_graph(PASSAGES, PROPS)
    save_graph(tmp_path / "graph", g)
    for name in (*FACT_ARRAYS, "node_names.json", "entity_passages.npy"):
        (tmp_path / "graph" / name).unlink()
    loaded, _ = load_graph(tmp_path / "graph")
    assert loaded.facts == g.facts  # a tuple, as before
    assert loaded.entities == g.entities and loaded.passages == g.passages
    np.testing.assert_array_equal(loaded.entity_passages, g.entity_passages)


def test_node_names_that_do_not_match_the_graph_are_refused(tmp_path):
    g = build_graph(PASSAGES, PROPS)
    save_graph(tmp_path / "graph", g)
    (tmp_path / "graph" / "node_names.json").write_text('{"names": []}', encoding="utf-8")
    with pytest.raises(IndexFormatError, match="node_names.json and entity_passages.npy do not describe"):
        load_graph(tmp_path / "graph")
    (tmp_path / "graph" / "node_names.json").write_text(json.dumps(list(g.entities)), encoding="utf-8")
    with pytest.raises(IndexFormatError, match="adjacency arrays do not describe a 4-node CSR matrix"):
        load_graph(tmp_path / "graph")  # the passages are missing


def test_fact_arrays_that_do_not_match_the_graph_are_refused(tmp_path):
    g = build_graph(PASSAGES, PROPS)
    save_graph(tmp_path / "graph", g)
    nodes = np.load(tmp_path / "graph" / "fact_entity_nodes.npy")
    np.save(tmp_path / "graph" / "fact_entity_nodes.npy", nodes + len(g.entities))
    with pytest.raises(IndexFormatError, match=r"the fact arrays .* do not describe 4 facts over 4 entities"):
        load_graph(tmp_path / "graph")
    save_graph(tmp_path / "graph", g)
    lines = (tmp_path / "graph" / "facts.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "graph" / "facts.jsonl").write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(IndexFormatError, match=r"facts\.jsonl: \d+ bytes, shorter than the lines of its 4 facts"):
        load_graph(tmp_path / "graph")  # the stored line offsets tell at once
    (tmp_path / "graph" / "fact_lines.npy").unlink()  # a graph saved before them: the scan tells
    loaded, _ = load_graph(tmp_path / "graph")
    with pytest.raises(IndexFormatError, match=r"facts\.jsonl: 3 facts, the fact arrays beside it describe 4"):
        loaded.facts[0]


def test_build_and_save_graph_component(tmp_path):
    docs = [Document(id=p, text=f"text of {p}") for p in PASSAGES]
    emb = TableEmbedder({"*": [1, 0], "Alice": [1, 1]})
    info = build_and_save_graph(tmp_path, docs, PROPS, embedder=emb, config=GraphConfig(enabled=True, damping=0.3))
    assert info["path"] == "graph" and info["type"] == "entity_graph" and info["embedder"] == "table"
    assert info["settings"]["damping"] == 0.3 and info["stats"]["entity_nodes"] == 4
    json.dumps(info)  # goes into the manifest
    graph, _ = load_graph(tmp_path / "graph")
    assert graph.passages == tuple(PASSAGES)


def test_load_graph_errors(tmp_path):
    with pytest.raises(IndexFormatError, match="--graph"):
        load_graph(tmp_path)
    g = build_graph(PASSAGES, PROPS)
    save_graph(tmp_path / "g", g)
    np.save(tmp_path / "g" / "adjacency_indptr.npy", np.zeros(3, np.int64))
    with pytest.raises(IndexFormatError, match="CSR"):
        load_graph(tmp_path / "g")
