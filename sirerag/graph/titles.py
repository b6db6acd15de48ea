"""The graph's title edges as a search reads them: arrays, not a list of ``(node, passage id)`` pairs.

A title node bridges through the facts of the passages it titles (:mod:`sirerag.graph.bridging`), and a bridged
title node gives its passages reset weight of their own. A search used to turn every title edge into a
``(node, passage id)`` pair, a dict of passage ids and a Python loop per edge: about 0.17 s of a one-shot search
at 30,000 passages, growing with the corpus. Here the same structures are built with numpy from the adjacency's
arrays:

* :func:`title_edge_arrays`: the ``(entity node, passage node)`` of every title edge, read from the entity rows of
  the adjacency;
* :class:`TitleMap`: entity node -> the passage nodes it titles, a read-only mapping over those arrays;
* :class:`TitleFacts`: which facts a title node reaches through its passages, looked up per question.
"""
from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np
import scipy.sparse as sp

from sirerag.graph.csr import row_positions

_EMPTY = np.zeros(0, dtype=np.int64)


def title_edge_arrays(adjacency: sp.csr_matrix, n_entities: int, title_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """``(entity nodes, passage nodes)`` of the title edges of a graph built with ``title_weight``, in the
    adjacency's order: an entity-passage edge weighs 1 for a mention, ``title_weight`` for a title and their sum
    for both, so with ``title_weight`` > 1 the edges of at least that weight are the titles (none otherwise)."""
    if title_weight <= 1.0 or adjacency.shape[0] <= n_entities:
        return _EMPTY, _EMPTY
    indptr = np.asarray(adjacency.indptr[:n_entities + 1], dtype=np.int64)
    stop = int(indptr[-1])
    indices, data = np.asarray(adjacency.indices[:stop]), np.asarray(adjacency.data[:stop])
    keep = np.flatnonzero((indices >= n_entities) & (data >= title_weight - 1e-9))
    rows = np.searchsorted(indptr, keep, side="right") - 1  # the entity row of each kept edge
    return rows.astype(np.int64), indices[keep].astype(np.int64)


class TitleMap(Mapping[int, list[int]]):
    """Entity node -> the passage nodes it titles (in edge order), over two arrays (read-only); built with the two
    sides swapped, a passage -> the entity nodes that title it.

    Args:
        entities, passages: one title edge per position: its entity node and its passage node.
    """

    def __init__(self, entities: np.ndarray, passages: np.ndarray) -> None:
        entities, passages = np.asarray(entities, dtype=np.int64), np.asarray(passages, dtype=np.int64)
        if entities.shape != passages.shape or entities.ndim != 1:
            raise ValueError(f"title edges: {entities.shape} entity nodes for {passages.shape} passage nodes")
        order = np.argsort(entities, kind="stable")
        self._entities, self._passages = entities[order], passages[order]
        self._keys = np.unique(self._entities)

    def _span(self, node: int) -> tuple[int, int]:
        return (int(np.searchsorted(self._entities, node, side="left")),
                int(np.searchsorted(self._entities, node, side="right")))

    def edges(self, nodes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(entity nodes, passage nodes)`` of the edges of ``nodes`` (each once; None: every edge), grouped by
        entity node in ascending order."""
        if nodes is None:
            return self._entities, self._passages
        wanted = np.unique(np.asarray(nodes, dtype=np.int64))
        at = row_positions(np.searchsorted(self._entities, wanted, side="left"),
                           np.searchsorted(self._entities, wanted, side="right"))
        return self._entities[at], self._passages[at]

    def __getitem__(self, node: int) -> list[int]:
        start, stop = self._span(int(node))
        if start == stop:
            raise KeyError(node)
        return self._passages[start:stop].tolist()

    def __contains__(self, node: object) -> bool:
        if not isinstance(node, (int, np.integer)):
            return False
        start, stop = self._span(int(node))
        return stop > start

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys.tolist())

    def __len__(self) -> int:
        return int(self._keys.size)

    def mask(self, n_entities: int) -> np.ndarray:
        """``(n_entities,)`` bool: the entity nodes that title a passage."""
        out = np.zeros(n_entities, dtype=bool)
        out[self._keys[self._keys < n_entities]] = True
        return out


class TitleFacts:
    """Which facts a title node reaches through the passages it titles, leaving out those that name it already,
    and through which title nodes a fact is reached: looked up per question in sorted arrays (a search asks for
    a few frontier nodes), not tabulated for every title at load.

    Args:
        fact_passage: a key of each fact's passage (-1: none; two facts of one passage share a key).
        title_entity, title_passage: one title edge per position, its entity node and the key of its passage
            (-1: a passage of no fact).
        named_indptr, named: fact ``i`` names the entity nodes ``named[named_indptr[i]:named_indptr[i + 1]]``.
    """

    def __init__(self, fact_passage: np.ndarray, title_entity: np.ndarray, title_passage: np.ndarray,
                 named_indptr: np.ndarray, named: np.ndarray) -> None:
        self._fact_passage = np.asarray(fact_passage, dtype=np.int64)
        self._order = np.argsort(self._fact_passage, kind="stable")  # the facts grouped by passage key
        self._keys = self._fact_passage[self._order]
        self._by_entity = TitleMap(title_entity, title_passage)  # title node -> its passages' keys
        self._by_passage = TitleMap(title_passage, title_entity)  # passage key -> its title nodes
        self._indptr, self._named = np.asarray(named_indptr, dtype=np.int64), np.asarray(named, dtype=np.int64)

    def _naming(self, entity: np.ndarray, fact: np.ndarray) -> np.ndarray:
        """Bool per ``(entity, fact)`` pair: the fact names the entity."""
        lengths = self._indptr[fact + 1] - self._indptr[fact]
        pair = np.repeat(np.arange(fact.size, dtype=np.int64), lengths)
        hits = self._named[row_positions(self._indptr[fact], self._indptr[fact + 1])] == entity[pair]
        return np.bincount(pair[hits], minlength=fact.size) > 0

    def pairs(self, entities: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(title nodes, facts)``: each fact of a passage that one of ``entities`` (None: every title node)
        titles and that does not name it, once per title edge."""
        title, keys = self._by_entity.edges(entities)
        starts = np.searchsorted(self._keys, keys, side="left")
        stops = np.where(keys >= 0, np.searchsorted(self._keys, keys, side="right"), starts)
        entity = np.repeat(title, np.maximum(stops - starts, 0))
        fact = self._order[row_positions(starts, stops)]
        keep = ~self._naming(entity, fact)
        return entity[keep], fact[keep]

    def facts_of(self, entities: np.ndarray) -> np.ndarray:
        """The facts the title nodes among ``entities`` reach through their passages (sorted, each once)."""
        return np.unique(self.pairs(entities)[1])

    def titles_of(self, fact: int) -> tuple[int, ...]:
        """The title nodes of ``fact``'s passage that it does not name, ascending."""
        key = int(self._fact_passage[fact])
        if key < 0:
            return ()
        found = self._by_passage.get(key, [])
        named = set(self._named[self._indptr[fact]:self._indptr[fact + 1]].tolist())
        return tuple(sorted({int(e) for e in found if e not in named}))
