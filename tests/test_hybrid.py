"""Reciprocal-rank fusion."""
from __future__ import annotations

import re

import pytest

from sirerag.core.errors import ConfigError
from sirerag.retrievers.base import Hit
from sirerag.retrievers.hybrid import FusionRetriever, load, reciprocal_rank_fusion


class Ranked:
    """A fixed ranking (the parts of a fusion; the fusion itself is under test)."""

    def __init__(self, name: str, ids: list[str]) -> None:
        self.name, self.ids = name, ids

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return [Hit(i, 1.0 / (r + 1)) for r, i in enumerate(self.ids[:k])]

    def search_many(self, queries, k: int = 10):
        return [self.search(q, k) for q in queries]


def test_rrf_scores_on_known_rankings():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a", "d"]], rrf_k=60)
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62) and scores["d"] == pytest.approx(1 / 63)
    assert [i for i, _ in fused] == ["a", "c", "b", "d"]


def test_rrf_ties_keep_first_appearance_and_weights():
    assert [i for i, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    weighted = reciprocal_rank_fusion([["x", "y"], ["y", "x"]], weights=[1.0, 2.0], rrf_k=0)
    assert [i for i, _ in weighted] == ["y", "x"] and dict(weighted)["y"] == pytest.approx(1 / 2 + 2 / 1)
    with pytest.raises(ConfigError, match="weights"):
        reciprocal_rank_fusion([["x"]], weights=[1.0, 1.0])


def test_fusion_retriever_depth_and_name():
    fusion = FusionRetriever([Ranked("dense", list("abcdef")), Ranked("ppr", list("fedcba"))], depth=2)
    hits = fusion.search("q", k=6)  # each part is asked for max(k, depth) = 6 entries
    assert fusion.name == "dense+ppr" and len(hits) == 6
    assert {h.entry_id for h in hits} == set("abcdef")
    shallow = FusionRetriever([Ranked("dense", list("abcdef")), Ranked("ppr", list("fedcba"))], depth=1)
    assert [h.entry_id for h in shallow.search("q", k=1)] == ["a"]  # a and f tie; a appears first
    assert shallow.search_many(["q1", "q2"], k=2)[1] == shallow.search("q", k=2)


def test_load_rejects_bad_names():
    for name in ("dense+", "dense+dense", "dense+nope"):
        with pytest.raises(ConfigError, match=re.escape(repr(name))):
            load(name, index=None)


def test_score_fusion_arithmetic():
    from sirerag.retrievers.hybrid import score_fusion

    dense = [Hit("a", 0.9), Hit("b", 0.7), Hit("c", 0.5)]  # min-max: a 1, b 0.5, c 0
    lexical = [Hit("c", 12.0), Hit("d", 4.0), Hit("a", 2.0)]  # c 1, d 0.2, a 0
    fused = score_fusion([dense, lexical])
    assert fused == [("a", pytest.approx(1.0)), ("c", pytest.approx(1.0)), ("b", pytest.approx(0.5)),
                     ("d", pytest.approx(0.2))]
    weighted = dict(score_fusion([dense, lexical], weights=[1.0, 3.0]))
    assert weighted["c"] == pytest.approx(3.0) and weighted["d"] == pytest.approx(0.6)
    assert score_fusion([[Hit("x", 5.0)], []]) == [("x", 1.0)]  # one score counts fully
    with pytest.raises(ConfigError, match="weights"):
        score_fusion([dense], weights=[1.0, 2.0])


def test_fusion_modes_differ_where_scores_matter():
    # dense is sure of a (far ahead), lexical ranks b first by a hair: score fusion keeps a, RRF ties them
    parts = [Ranked("dense", ["a", "b"]), Ranked("bm25", ["b", "a"])]
    parts[0].search = lambda q, k=10: [Hit("a", 1.0), Hit("b", 0.0), Hit("z", 0.0)][:k]
    parts[1].search = lambda q, k=10: [Hit("b", 1.0), Hit("a", 0.9), Hit("z", 0.0)][:k]
    assert [h.entry_id for h in FusionRetriever(parts).search("q", 2)] == ["a", "b"]
    with pytest.raises(ConfigError, match="fusion"):
        FusionRetriever(parts, fusion="max")
