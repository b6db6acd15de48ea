"""The graph's title edges as arrays (sirerag.graph.titles): the same edges, map and fact incidence as the
pairwise reading they replace, on random graphs."""
import numpy as np
import pytest
import scipy.sparse as sp

from sirerag.graph.titles import TitleFacts, TitleMap, title_edge_arrays


def _graph(rng: np.random.Generator, n_e: int, n_p: int, title_weight: float) -> sp.csr_matrix:
    """A symmetric adjacency: mentions (1), titles (``title_weight``), both (their sum) and entity edges."""
    rows, cols, data = [], [], []
    for p in range(n_p):
        for e in rng.choice(n_e, size=3, replace=False):
            rows.append(e), cols.append(n_e + p), data.append(rng.choice([1.0, title_weight, 1.0 + title_weight]))
    for a, b in rng.integers(0, n_e, size=(40, 2)):
        if a != b:
            rows.append(a), cols.append(b), data.append(float(rng.integers(1, 4)))
    upper = sp.coo_matrix((data, (rows, cols)), shape=(n_e + n_p, n_e + n_p))
    return (upper + upper.T).tocsr()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_title_edges_are_the_heavy_entity_passage_edges_in_adjacency_order(seed: int) -> None:
    n_e, n_p, weight = 30, 12, 2.0
    adjacency = _graph(np.random.default_rng(seed), n_e, n_p, weight)
    entities, passages = title_edge_arrays(adjacency, n_e, weight)
    upper = adjacency[:n_e].tocoo()
    keep = (upper.col >= n_e) & (upper.data >= weight - 1e-9)
    assert entities.tolist() == upper.row[keep].tolist() and passages.tolist() == upper.col[keep].tolist()
    assert entities.size and all(adjacency[e, p] >= weight for e, p in zip(entities, passages))
    none = title_edge_arrays(adjacency, n_e, 1.0)  # a weight of 1 or less tells no title from a mention
    assert none[0].size == 0 and none[1].size == 0


def test_title_map_reads_like_a_dict_of_lists() -> None:
    titled = TitleMap(np.array([4, 1, 4, 7]), np.array([10, 11, 12, 13]))
    assert dict(titled) == {1: [11], 4: [10, 12], 7: [13]} and len(titled) == 3
    assert 4 in titled and 2 not in titled and "4" not in titled and titled.get(2, ()) == ()
    assert titled.mask(6).tolist() == [False, True, False, False, True, False]  # node 7 is past the entities
    with pytest.raises(KeyError, match="2"):
        titled[2]
    with pytest.raises(ValueError, match="title edges"):
        TitleMap(np.array([1, 2]), np.array([3]))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_title_facts_are_the_facts_of_the_titled_passages_that_do_not_name_their_title(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_e, n_facts = 25, 60
    fact_passage = rng.integers(-1, 8, size=n_facts)  # -1: a fact of no graph passage
    named = [list(dict.fromkeys(rng.integers(0, n_e, size=rng.integers(1, 4)).tolist())) for _ in range(n_facts)]
    indptr = np.concatenate([[0], np.cumsum([len(n) for n in named])])
    nodes = np.array([e for n in named for e in n], dtype=np.int64)
    title_entity = rng.integers(0, n_e, size=15)
    title_passage = rng.integers(-1, 10, size=15)  # some passages have no facts, some titles no passage
    table = TitleFacts(fact_passage, title_entity, title_passage, indptr, nodes)
    expected = {(int(e), f) for e, p in zip(title_entity, title_passage) if p >= 0
                for f in range(n_facts) if fact_passage[f] == p and int(e) not in named[f]}
    assert expected and set(zip(*(a.tolist() for a in table.pairs()))) == expected
    for wanted in ([0, 3, 7], title_entity[:4].tolist(), [n_e + 1]):  # a frontier's title nodes, or none
        assert table.facts_of(np.array(wanted)).tolist() == sorted({f for e, f in expected if e in wanted})
    for f in range(n_facts):
        assert table.titles_of(f) == tuple(sorted({e for e, g in expected if g == f}))


def test_no_title_edge_reaches_no_fact() -> None:
    empty = np.zeros(0, np.int64)
    table = TitleFacts(np.array([0, 1]), empty, empty, np.array([0, 1, 2]), np.array([0, 1]))
    assert table.pairs()[0].size == 0 and table.facts_of(np.array([0, 1])).size == 0 and table.titles_of(1) == ()
    # the only fact of the titled passage names its title already
    named = TitleFacts(np.array([0]), np.array([2]), np.array([0]), np.array([0, 1]), np.array([2]))
    assert named.facts_of(np.array([2])).size == 0 and named.titles_of(0) == ()
    with pytest.raises(ValueError, match="title edges"):
        TitleFacts(np.array([0]), np.array([2, 3]), np.array([0]), np.array([0, 1]), np.array([2]))
