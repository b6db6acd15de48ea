"""Query-conditioned bridging through propositions (sirerag.graph.bridging): which entities a query reaches
from its seeds, hop by hop, through the propositions that best match it, and the reset weights they get."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sirerag.core.errors import ConfigError
from sirerag.graph.bridge_load import load_bridge
from sirerag.graph.bridging import BridgeSettings, PropositionBridge
from sirerag.graph.build import GraphFact
from sirerag.graph.linking import Seeds

# entities: 0 film, 1 director, 2 actor, 3 spouse, 4 city
FACTS = [
    GraphFact("f0", "The film was directed by the director.", "p0", (0, 1)),
    GraphFact("f1", "The film stars the actor.", "p0", (0, 2)),
    GraphFact("f2", "The director married the spouse.", "p1", (1, 3)),
    GraphFact("f3", "The actor was born in the city.", "p2", (2, 4)),
]


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


#: the query is "who is the spouse of the director of the film": close to f0, then f2
QUERY = _unit(1.0, 1.0, 0.0)
VECTORS = np.stack([_unit(1.0, 0.2, 0.0), _unit(0.0, 0.1, 1.0), _unit(0.2, 1.0, 0.0), _unit(0.0, 0.0, 1.0)])


@pytest.fixture
def bridge():
    return PropositionBridge(FACTS, VECTORS, entity_passages=np.array([2, 4, 1, 2, 1]))


def test_one_hop_follows_the_proposition_that_matches_the_query(bridge):
    found = bridge.bridges(QUERY, [0], BridgeSettings(hops=1, top=1))
    assert [(b.node, b.hop, b.via, b.text) for b in found] == [(1, 1, 0, FACTS[0].text)]
    assert found[0].score == pytest.approx(float(VECTORS[0] @ QUERY))


def test_two_hops_reach_the_second_entity_and_never_revisit(bridge):
    found = bridge.bridges(QUERY, [0], BridgeSettings(hops=2, top=1))
    assert [(b.node, b.hop, b.via) for b in found] == [(1, 1, 0), (3, 2, 1)]
    wide = bridge.bridges(QUERY, [0], BridgeSettings(hops=2, top=4))
    assert sorted(b.node for b in wide) == [1, 2, 3, 4] and 0 not in {b.node for b in wide}
    assert {b.node: b.hop for b in wide}[1] == 1


def test_the_threshold_keeps_weak_propositions_out(bridge):
    cut = float(VECTORS[0] @ QUERY) - 1e-3
    found = bridge.bridges(QUERY, [0], BridgeSettings(hops=1, top=4, threshold=cut))
    assert [b.node for b in found] == [1]
    assert bridge.bridges(QUERY, [0], BridgeSettings(hops=1, top=4, threshold=0.999)) == []


def test_bridged_entities_get_weight_cosine_and_the_smaller_of_specificity_and_parent_weight(bridge):
    seeds = Seeds(entities={0: 1.0})
    bridge.add_to(seeds, QUERY, BridgeSettings(hops=2, top=1, weight=0.5))
    s0, s2 = float(VECTORS[0] @ QUERY), float(VECTORS[2] @ QUERY)
    assert seeds.entities[0] == 1.0
    # the director is in 4 passages, 3 besides the bridging one: specificity 1 / sqrt(3)
    assert seeds.entities[1] == pytest.approx(0.5 * s0 / 3 ** 0.5)
    # a bridge never outweighs the entity it came from: entity 3 (2 passages, specificity 1) gets its parent's weight
    assert seeds.entities[3] == pytest.approx(0.5 * s2 * seeds.entities[1])
    for exponent, expected in ((1.0, 1 / 3), (0.0, 1.0)):
        other = Seeds(entities={0: 1.0})
        bridge.add_to(other, QUERY, BridgeSettings(hops=1, top=1, weight=0.5, specificity=exponent))
        assert other.entities[1] == pytest.approx(0.5 * s0 * expected)
    capped = Seeds(entities={0: 0.5})  # a lighter seed caps its bridge: min(1 / sqrt(3), 0.5)
    bridge.add_to(capped, QUERY, BridgeSettings(hops=1, top=1, weight=0.5))
    assert capped.entities[1] == pytest.approx(0.5 * s0 * 0.5)
    assert [b.node for b in seeds.bridges] == [1, 3]
    off = Seeds(entities={0: 0.5})
    bridge.add_to(off, QUERY, BridgeSettings(hops=0))
    assert off.entities == {0: 0.5} and off.bridges == []


def test_a_question_with_two_seeds_bridges_from_each_on_its_own_lightly(bridge):
    seeds = Seeds(entities={0: 0.5, 4: 1.0})  # the film and the city
    bridge.add_to(seeds, QUERY, BridgeSettings(hops=2, top=3, weight=0.5, seed_weight=0.3))
    s0, s3 = float(VECTORS[0] @ QUERY), float(VECTORS[3] @ QUERY)
    # one hop from each: the film's best proposition (f0) reaches the director (not the actor, f1), the city's
    # only one (f3) the actor; nothing goes on to the spouse
    assert [(b.node, b.hop, b.via) for b in seeds.bridges] == [(1, 1, 0), (2, 1, 4)]
    assert seeds.entities[1] == pytest.approx(0.15 * s0 * 0.5)  # min(1 / sqrt(3), the film's 0.5)
    assert seeds.entities[2] == pytest.approx(0.15 * s3 * 1.0)
    assert seeds.entities[0] == 0.5 and seeds.entities[4] == 1.0 and 3 not in seeds.entities
    # another seed is never reached: from the actor alone with the film avoided, f1 leads nowhere new
    assert bridge.bridges(QUERY, [2], BridgeSettings(hops=1, top=3), avoid=[0]) == [
        b for b in bridge.bridges(QUERY, [2], BridgeSettings(hops=1, top=3)) if b.node != 0]
    one_seed = Seeds(entities={0: 0.5})  # one seed: the joint bridging, the three best propositions
    bridge.add_to(one_seed, QUERY, BridgeSettings(hops=1, top=3, weight=0.5, seed_weight=0.3))
    assert sorted(b.node for b in one_seed.bridges) == [1, 2]
    off = Seeds(entities={0: 0.5, 4: 1.0})
    bridge.add_to(off, QUERY, BridgeSettings(seed_weight=0.0))
    assert off.entities == {0: 0.5, 4: 1.0} and off.bridges == []


def test_fact_vectors_come_from_stored_rows_then_embedding():
    from sirerag.trees.proposition_vectors import vectors_for

    rows = {"f0": VECTORS[0], "f2": VECTORS[2]}
    asked = []

    class Embedder:
        dim = 3

        def encode_documents(self, texts):
            asked.extend(texts)
            return np.stack([VECTORS[[f.text for f in FACTS].index(t)] for t in texts])

    out = vectors_for(FACTS, rows, Embedder())  # what load_bridge gives facts: stored rows, then embedding
    assert np.allclose(out, VECTORS) and asked == [FACTS[1].text, FACTS[3].text]
    graph = SimpleNamespace(facts=FACTS, fact_embeddings=VECTORS, entity_passages=np.ones(5),
                            title_edges=lambda weight: (np.zeros(0, np.int64), np.zeros(0, np.int64)),
                            passage_index={}, adjacency=None, entity_embeddings=np.zeros((0, 3), np.float32))
    # fact embeddings stored with the graph: no index read
    stored = load_bridge(None, graph, Embedder(), title_weight=0.0, synonym_threshold=0.8)
    assert np.allclose(stored.vectors, VECTORS) and len(asked) == 2


def test_a_title_node_bridges_through_the_propositions_of_the_passage_it_titles():
    """Node 5 is the title of p0, whose propositions name "the film" (0), not the title: with the title edge
    the title node reaches the director through f0, as the film does; without it, or with titles off, nothing."""
    specific = np.array([2, 4, 1, 2, 1, 1])
    titled = PropositionBridge(FACTS, VECTORS, entity_passages=specific, titles=[(5, "p0"), (1, "p1")])
    found = titled.bridges(QUERY, [5], BridgeSettings(hops=2, top=1))
    assert [(b.node, b.hop, b.via) for b in found] == [(0, 1, 5), (1, 1, 5), (3, 2, 1)]
    assert [b.text for b in found] == [FACTS[0].text, FACTS[0].text, FACTS[2].text]
    assert [titled.title_nodes(i) for i in range(4)] == [(5,), (5,), (), ()]  # f2 names its title (1) already
    assert titled.bridges(QUERY, [5], BridgeSettings(hops=2, top=1, titles=False)) == []
    assert PropositionBridge(FACTS, VECTORS, entity_passages=specific).bridges(QUERY, [5], BridgeSettings()) == []
    seeds = Seeds(entities={5: 1.0})
    titled.add_to(seeds, QUERY, BridgeSettings(hops=1, top=1, weight=0.5))
    assert seeds.entities[1] == pytest.approx(0.5 * float(VECTORS[0] @ QUERY) / 3 ** 0.5)


def test_a_bridged_entity_puts_its_weight_on_the_passages_it_titles_too():
    """The director (1) titles passage node 7: bridged from the film, it adds ``title_passages`` times its own
    gain to that passage's reset weight; a seed's titled passage gets none, nor does anything with 0."""
    from sirerag.graph.linking import reset_vector

    specific = np.array([1, 1, 1, 1, 1])
    titles = [(0, "p0"), (1, "p1")]
    bridge = PropositionBridge(FACTS, VECTORS, specific, titles=titles, passage_index={"p0": 6, "p1": 7, "p2": 8})
    assert bridge.titled == {0: [6], 1: [7]}
    seeds = Seeds(entities={0: 1.0})
    bridge.add_to(seeds, QUERY, BridgeSettings(hops=1, top=1, weight=0.5, title_passages=2.0))
    gain = 0.5 * float(VECTORS[0] @ QUERY)
    assert seeds.entities[1] == pytest.approx(gain) and seeds.passages == {7: pytest.approx(2.0 * gain)}
    graph = SimpleNamespace(n_nodes=9, n_entities=5, passages=("p0", "p1", "p2"))
    reset = reset_vector(graph, seeds, None, 0.0)
    assert reset[7] == pytest.approx(2.0 * gain) and reset[6] == 0.0 and reset[0] == 1.0
    off = Seeds(entities={0: 1.0})
    bridge.add_to(off, QUERY, BridgeSettings(hops=1, top=1, weight=0.5, title_passages=0.0))
    assert off.passages == {} and off.entities == seeds.entities
    unindexed = Seeds(entities={0: 1.0})  # without passage nodes nothing is titled
    PropositionBridge(FACTS, VECTORS, specific, titles=titles).add_to(unindexed, QUERY, BridgeSettings(hops=1, top=1))
    assert unindexed.passages == {}


def test_a_bridged_entity_that_titles_nothing_gives_a_share_to_its_closest_synonyms_title():
    """The spouse (3) titles nothing; its neighbours 1 (cosine 0.9) and 4 (0.95) title p1 and p2: bridged, it
    gives synonym_titles x 0.95 of its gain to p2 (node 8); not below the threshold, nor with 0."""
    import scipy.sparse as sp

    vectors = np.array([[1, 0, 0], [0.9, np.sqrt(1 - 0.81), 0], [0, 1, 0], [1, 0, 0],
                        [0.95, 0, np.sqrt(1 - 0.9025)]], dtype=np.float32)
    edges = [(3, 1), (3, 4), (3, 2)]  # 2 titles nothing: not a candidate
    rows, cols = zip(*(edges + [(b, a) for a, b in edges]))
    adjacency = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(9, 9))
    bridge = PropositionBridge(FACTS, VECTORS, np.ones(5), titles=[(1, "p1"), (4, "p2")],
                               passage_index={"p0": 6, "p1": 7, "p2": 8}, adjacency=adjacency,
                               entity_vectors=vectors, synonym_threshold=0.8)
    settings = BridgeSettings(synonym_titles=0.3)
    assert bridge.title_passages(1, settings) == [(7, 1.0)]  # its own title first
    assert bridge.title_passages(3, settings) == [(8, pytest.approx(0.3 * 0.95))]
    assert bridge.title_passages(3, BridgeSettings(synonym_titles=0.0)) == []
    strict = PropositionBridge(FACTS, VECTORS, np.ones(5), titles=[(1, "p1"), (4, "p2")],
                               passage_index={"p0": 6, "p1": 7, "p2": 8}, adjacency=adjacency,
                               entity_vectors=vectors, synonym_threshold=0.96)
    assert strict.title_passages(3, settings) == []
    seeds = Seeds(entities={1: 1.0})  # the director bridges to the spouse through f2
    bridge.add_to(seeds, QUERY, BridgeSettings(hops=1, top=2, weight=0.5, synonym_titles=0.3))
    assert seeds.passages == {8: pytest.approx(0.3 * 0.95 * seeds.entities[3])}


def test_title_edges_are_read_from_the_adjacency_by_their_weight():
    """A mention edge weighs 1, a title edge title_weight, both their sum: the title edges are those of at least
    title_weight, and none can be told apart when title_weight is at most 1."""
    from sirerag.graph.build import build_graph
    from sirerag.core.types import Proposition

    props = [Proposition(id="a", text="Alpha met Beta.", entities=("Alpha", "Beta"), chunk_id="c0", doc_id="p0",
                         index=0),
             Proposition(id="b", text="Beta saw Gamma.", entities=("Beta", "Gamma"), chunk_id="c1", doc_id="p1",
                         index=0)]
    graph = build_graph(["p0", "p1"], props, titles=["Alpha", "Delta (film)"], title_weight=2.0)
    names = {graph.entities[e]: passage for e, passage in graph.titled(2.0)}
    assert names == {"Alpha": "p0", "Delta (film)": "p1"}  # mentioned and titled; titled only; not Beta/Gamma
    assert graph.titled(1.0) == [] and build_graph(["p0"], props[:1], titles=["Alpha"], title_weight=1.0) \
        .titled(1.0) == []


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="bridge_hops"):
        BridgeSettings.from_options(hops=4)
    with pytest.raises(ConfigError, match="bridge_top"):
        BridgeSettings.from_options(hops=1, top=0)
    with pytest.raises(ConfigError, match="bridge_seed_weight"):
        BridgeSettings.from_options(seed_weight=1.5)
    with pytest.raises(ConfigError, match="bridge_weight"):
        BridgeSettings.from_options(hops=1, weight=0.0)
    with pytest.raises(ConfigError, match="bridge_titles.*true or false"):
        BridgeSettings.from_options(titles=1)
    with pytest.raises(ConfigError, match=r"bridge_synonym_titles.*a number in \[0, 1\]"):
        BridgeSettings.from_options(synonym_titles=1.5)
    with pytest.raises(ConfigError, match="bridge_title_passages.*a number >= 0"):
        BridgeSettings.from_options(title_passages=-1.0)
    with pytest.raises(ConfigError, match="bridge_specificity.*a number in \\[0, 1\\]"):
        BridgeSettings.from_options(specificity=1.5)
    assert BridgeSettings.from_options(hops=2) == BridgeSettings(hops=2)
    with pytest.raises(ValueError, match="3 proposition vectors for 4 graph facts"):
        PropositionBridge(FACTS, VECTORS[:3], entity_passages=np.ones(5))


def test_vectors_read_through_fact_rows_bridge_as_the_vectors_in_fact_order(tmp_path):
    # a stored matrix with the facts' rows in another order and a row no fact uses, memory-mapped
    stored = np.stack([np.zeros(3, np.float32), VECTORS[3], VECTORS[1], VECTORS[0], VECTORS[2]])
    np.save(tmp_path / "vectors.npy", stored, allow_pickle=False)
    mapped = np.load(tmp_path / "vectors.npy", mmap_mode="r", allow_pickle=False)
    by_rows = PropositionBridge(FACTS, mapped, np.array([2, 4, 1, 2, 1]), rows=np.array([3, 2, 4, 1]))
    plain = PropositionBridge(FACTS, VECTORS, np.array([2, 4, 1, 2, 1]))
    settings = BridgeSettings(hops=2, top=2)
    assert by_rows.bridges(QUERY, [0], settings) == plain.bridges(QUERY, [0], settings)
    with pytest.raises(ValueError, match="3 vector rows for 4 graph facts"):
        PropositionBridge(FACTS, mapped, np.ones(5), rows=np.array([3, 2, 4]))
    with pytest.raises(ValueError, match="a row outside the 5 vectors"):
        PropositionBridge(FACTS, mapped, np.ones(5), rows=np.array([3, 2, 4, 5]))


def test_a_saved_graphs_fact_table_bridges_as_its_facts_do(tmp_path):
    from sirerag.graph.build import EntityGraph
    from sirerag.graph.facts import FactTable, save_fact_arrays

    passages = ("p0", "p1", "p2")
    facts = [*FACTS, GraphFact("f4", "The city lies on a river.", "p2", (4, 4))]  # an entity named twice
    (tmp_path / "facts.jsonl").write_text("".join(
        f'{{"id": "{f.id}", "text": "{f.text}", "passage": "{f.passage}", "entities": {list(f.entities)}}}\n'
        for f in facts), encoding="utf-8")
    index = {p: 5 + i for i, p in enumerate(passages)}
    save_fact_arrays(tmp_path, facts, index)
    table = FactTable.open(tmp_path, tmp_path / "facts.jsonl", passages, 5)
    (tmp_path / "facts.jsonl").unlink()  # read when opened
    assert isinstance(table, FactTable) and list(table) == facts
    vectors = np.vstack([VECTORS, _unit(0.1, 0.1, 0.1)])
    titles = [(3, "p1"), (4, "p0")]  # the spouse titles p1 (whose f2 names it), the city p0 (f0, f1)
    plain = PropositionBridge(facts, vectors, np.array([2, 1, 1, 1, 2]), titles=titles)
    served = PropositionBridge(table, vectors, np.array([2, 1, 1, 1, 2]), titles=titles)
    assert (plain.entity_facts != served.entity_facts).nnz == 0 and plain.entity_facts.max() == 1
    assert plain.title_facts is not None and served.title_facts is not None
    pairs = [tuple(a.tolist()) for a in plain.title_facts.pairs()]
    assert pairs == [tuple(a.tolist()) for a in served.title_facts.pairs()] and len(pairs[0]) == 2
    for settings in (BridgeSettings(hops=2, top=2), BridgeSettings(hops=3, top=1, titles=False)):
        assert served.bridges(QUERY, [0], settings) == plain.bridges(QUERY, [0], settings) != []
    assert isinstance(EntityGraph(entities=("a",) * 5, passages=passages, adjacency=plain.entity_facts[:0, :0],
                                  entity_passages=np.ones(5), facts=table).facts, FactTable)


def test_a_fact_table_reads_its_lines_at_the_stored_offsets(tmp_path, monkeypatch):
    from sirerag.core.errors import IndexFormatError
    from sirerag.core.io import save_npy
    from sirerag.graph.facts import FACT_LINES, FactTable, save_fact_arrays

    passages = ("p0", "p1", "p2")
    facts_file = tmp_path / "facts.jsonl"
    facts_file.write_text("".join(f'{{"id": "{f.id}", "text": "{f.text}", "passage": "{f.passage}", '
                                  f'"entities": {list(f.entities)}}}\n' for f in FACTS), encoding="utf-8")
    save_fact_arrays(tmp_path, FACTS, {p: 5 + i for i, p in enumerate(passages)}, facts_file)
    lines = np.load(tmp_path / FACT_LINES)
    raw = facts_file.read_bytes()
    assert lines.shape == (len(FACTS), 2) and raw[lines[1, 0]:lines[1, 1]].startswith(b'{"id": "f1"')
    table = FactTable.open(tmp_path, facts_file, passages, 5)
    monkeypatch.setattr(np, "flatnonzero", lambda *_: (_ for _ in ()).throw(AssertionError("scanned")))
    assert table[3] == FACTS[3] and list(table) == FACTS  # no scan of the file for its lines
    monkeypatch.undo()
    save_npy(tmp_path / FACT_LINES, lines[::-1].copy())  # offsets out of order
    with pytest.raises(IndexFormatError, match=r"fact_lines\.npy: does not give the lines of 4 facts"):
        FactTable.open(tmp_path, facts_file, passages, 5)
