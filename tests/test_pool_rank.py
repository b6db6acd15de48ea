"""The pool ranking rule: summaries and aggregates never push out the passages (no model needed)."""
from __future__ import annotations

import numpy as np
import pytest

from sirerag.core.errors import ConfigError
from sirerag.retrievers.base import Hit
from sirerag.retrievers.pool_rank import PoolRanker, PoolRule, arrange
from sirerag.core.types import Node, Pool, Proposition


def leaf(i: int) -> Node:
    return Node(id=f"l{i}", text=f"passage {i}", kind="leaf", tree="similarity", level=0, passages=(f"p{i}",))


def aggregate(name: str, *passages: int, entity: str | None = None) -> Node:
    return Node(id=name, text=name, kind="aggregate", tree="relatedness", level=0,
                passages=tuple(f"p{i}" for i in passages), entity=entity)


def make_pool(entries, dim: int = 2) -> Pool:
    return Pool(entries=tuple(entries), embeddings=np.zeros((len(entries), dim), np.float32))


POOL = make_pool([leaf(0), leaf(1), leaf(2), leaf(3), aggregate("a01", 0, 1), aggregate("a23", 2, 3),
                  aggregate("a0", 0), aggregate("a5", 5)])


def ids(hits):
    return [h.entry_id for h in hits]


def test_arrange_drops_covered_anchors_and_reserves_leaves():
    native = [Hit(i, 1.0) for i in ("a23", "a01", "l0", "a0", "l1", "l2", "a5", "l3")]
    assert ids(arrange(native, POOL, PoolRule(drop_covered=False, anchor=False, leaf_share=0.0))) == ids(native)
    # a23 and a01 wait for a passage of theirs; a0 adds nothing after l0; l1 is covered by a01; a5 never anchors
    assert ids(arrange(native, POOL, PoolRule(leaf_share=0.5))) == ["l0", "a01", "l2", "a23", "a5"]
    # the default share (0.9): the aggregates wait behind the leaves, which then cover them (dropped)
    assert ids(arrange(native, POOL, PoolRule())) == ["l0", "l1", "l2", "l3", "a5"]
    only_leaves = arrange(native, POOL, PoolRule(drop_covered=False, anchor=False, leaf_share=1.0))
    assert ids(only_leaves)[:4] == ["l0", "l1", "l2", "l3"]  # with share 1 every other entry waits


def test_pool_rule_validates():
    with pytest.raises(ConfigError, match="leaf_share"):
        PoolRanker(None, POOL, PoolRule(leaf_share=1.5))
    with pytest.raises(ConfigError, match="lift_ratio.*0 \\(off\\) or a number >= 1"):
        PoolRanker(None, POOL, PoolRule(lift_ratio=0.5))


def test_a_dominant_aggregate_lifts_the_passage_it_brings():
    """The share holds an aggregate of p0 and p4 back behind leaves that score a fraction of it; with a lift
    ratio, its unranked passage's own leaf is placed before such a leaf (the best-scoring leaf of that passage,
    when a document has several); a ratio it does not reach changes nothing."""
    chunk = Node(id="l4b", text="passage 4, second chunk", kind="leaf", tree="similarity", level=0, passages=("p4",))
    pool = make_pool([leaf(0), leaf(1), leaf(2), leaf(3), leaf(4), chunk, aggregate("a04", 0, 4),
                      aggregate("a9", 9)])
    native = [Hit("l0", 1.0), Hit("a04", 0.5), Hit("l1", 0.08), Hit("l2", 0.07), Hit("l3", 0.06),
              Hit("l4b", 0.02), Hit("l4", 0.01)]
    held = arrange(native, pool, PoolRule(leaf_share=0.8))
    assert ids(held) == ["l0", "l1", "l2", "l3", "a04"]  # the aggregate brings p4 at rank 5
    lifted = arrange(native, pool, PoolRule(leaf_share=0.8, lift_ratio=5.0))
    assert ids(lifted) == ["l0", "l4b", "l1", "l2", "l3"]  # p4 at rank 2; a04 is then covered and dropped
    assert lifted[1].score == 0.02  # the leaf keeps its own score
    assert ids(arrange(native, pool, PoolRule(leaf_share=0.8, lift_ratio=10.0))) == ids(held)  # 0.5 < 10 x 0.06
    unscored = [h for h in native if not h.entry_id.startswith("l4")]
    assert [(h.entry_id, h.score) for h in arrange(unscored, pool, PoolRule(leaf_share=0.8, lift_ratio=5.0))[:2]] \
        == [("l0", 1.0), ("l4", 0.5)]  # a leaf outside the ranking: the first of its passage, the aggregate's score
    assert ids(arrange([Hit("a04", 2.0), Hit("l1", 0.1)], pool, PoolRule(leaf_share=0.8, lift_ratio=5.0))) == \
        ["l1", "a04"]  # never anchored (no passage of it ranked): no lift, it waits to the end


@pytest.mark.parametrize("linking", ["ner", "fact"])
def test_seed_aggregates_cannot_crowd_out_the_gold_passage(linking):
    """PPR ranks the gold passage p0 first: aggregates of the seed entity S are scored by the mass of their
    passages, not by that of the node S, which a seed keeps."""
    from sirerag.graph.build import build_graph
    from sirerag.retrievers.ppr import PPRRetriever

    props = [Proposition(id="f0", text="gold fact", entities=("Q",), chunk_id="c0", doc_id="p0", index=0)]
    props += [Proposition(id=f"f{i}", text=f"S fact {i}", entities=("S", f"X{i}"), chunk_id=f"c{i}", doc_id=f"p{i}",
                          index=0) for i in range(1, 5)]
    props.append(Proposition(id="f10", text="Q and S", entities=("Q", "S"), chunk_id="c0", doc_id="p0", index=1))
    names = ["Q", "S"] + [f"X{i}" for i in range(1, 5)]
    texts = names + [p.text for p in props]
    axis = {t: i for i, t in enumerate(texts)}

    class OneHot:
        spec, dim = "onehot", len(texts)

        def encode_documents(self, batch):
            out = np.zeros((len(batch), self.dim), np.float32)
            for row, t in enumerate(batch):
                out[row, axis.get(t, axis["Q and S"])] = 1.0
            return out

        encode_queries = encode_documents

    graph = build_graph([f"p{i}" for i in range(5)], props, embedder=OneHot(), synonym_max_neighbors=0)
    entries = [leaf(i) for i in range(5)]
    entries += [aggregate(f"aggS{j}", j, entity="S") for j in range(1, 5)]
    pool = make_pool(entries, len(texts))
    tagger = (lambda q: ["Q", "S"]) if linking == "ner" else None
    new = PPRRetriever(graph, pool, OneHot(), linking=linking, tagger=tagger, surface=False)
    query = "Q and S"
    ranked = ids(PoolRanker(new, pool).search(query, k=5))
    assert ranked[0] == "l0"
    assert ids(new.search(query, k=9))[0] == "l0"


def test_default_leaf_share_is_measured_per_retriever(monkeypatch):
    """PPR takes the share measured best for it (0.8), other retrievers 0.9; a given share wins."""
    import sirerag.retrievers as retrievers

    class Index:
        pool = POOL

        def component(self, name):
            return None

    class Base:
        def __init__(self, name):
            self.name = name

    monkeypatch.setattr(retrievers, "load_base", lambda name, index, **options: Base(name))
    assert retrievers.load_retriever("ppr", Index()).rule.leaf_share == 0.8
    assert retrievers.load_retriever("dense", Index()).rule.leaf_share == 0.9
    assert retrievers.load_retriever("ppr", Index(), leaf_share=0.6).rule.leaf_share == 0.6
    assert retrievers.load_retriever("ppr", Index()).rule.lift_ratio == 5.0
    assert retrievers.load_retriever("dense", Index()).rule.lift_ratio == 0.0
    assert retrievers.load_retriever("ppr", Index(), lift_ratio=0.0).rule.lift_ratio == 0.0
    assert not isinstance(retrievers.load_retriever("ppr", Index(), pool_rule="native"), PoolRanker)
