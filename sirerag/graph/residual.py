"""Residual ranking of the passages a question reached (``bridge_residual``).

PageRank spreads the reset weight of a seed or a bridged entity over all the passages that name it, and nothing in
the walk tells them apart. "Who did the state where Christian Science Pleasant View Home was located vote for in
2016?" links the home, bridges to New Hampshire through "Pleasant View Home is located in Concord, New Hampshire",
and the passage "2016 United States presidential election in New Hampshire" is one of New Hampshire's 23. What
picks it is the part of the question not used yet, "state vote 2016": the question's content words without those of
the linked names and those the bridging propositions matched (:class:`~sirerag.graph.chain.Rest`, as hop-by-hop
bridging computes it along the branch that reached the entity).

So, for every bridged entity and (``residual_seeds``) every seed, the passages that name it, but those it titles
(the title edge and the bridged-title weight reach them already) and the passage of the proposition that bridged
it (where the question already is), are scored by the cosine of their vector with what is left of the question
(``residual_by = "rest"``: embedded with the query encoder, all the rests of a search in one batch) or with the
question itself (``"question"``: no encoding). The best passage gets reset weight of its own: ``residual`` times
the entity's reset weight. An entity with nothing left of the question gives none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config.retrieval import BridgeSettings
from sirerag.core.types import Pool
from sirerag.graph.bridging import PropositionBridge
from sirerag.graph.build import EntityGraph
from sirerag.graph.chain import Rest
from sirerag.graph.entries import GroupMax
from sirerag.graph.facts import FactTable
from sirerag.graph.linking import Seeds


@dataclass(frozen=True)
class Anchor:
    """An entity whose passages compete: its node, its reset weight, what is left of the question along the branch
    that reached it, and the passage nodes it does not pick."""

    node: int
    weight: float
    rest: Rest
    skip: frozenset[int]


class Units:
    """Vectors grouped by passage: the leaves of each passage, or its propositions.

    Args:
        vectors: L2-normalised rows (a memory map is read only where a search needs it).
        rows, passages: the row of ``vectors`` of each unit and its passage (position: node minus the entities).
        n_passages: the number of passages.
    """

    def __init__(self, vectors: np.ndarray, rows: np.ndarray, passages: np.ndarray, n_passages: int) -> None:
        groups = GroupMax(passages, n_passages)
        self.vectors = vectors
        self.rows = np.asarray(rows, dtype=np.int64)[groups.order]
        self.bounds = groups.bounds

    def of(self, position: int) -> np.ndarray:
        """The rows of the passage at ``position``."""
        return self.rows[self.bounds[position]:self.bounds[position + 1]]

    def best(self, positions: np.ndarray, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``positions`` that have units, and the best cosine of each one's units with ``vector``."""
        starts, stops = self.bounds[positions], self.bounds[positions + 1]
        has = stops > starts
        positions, starts, stops = positions[has], starts[has], stops[has]
        if not positions.size:
            return positions, np.zeros(0, dtype=np.float32)
        rows = self.rows[np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])]
        scores = np.asarray(self.vectors[rows], dtype=np.float32) @ np.asarray(vector, dtype=np.float32)
        return positions, np.maximum.reduceat(scores, np.r_[0, np.cumsum(stops - starts)[:-1]])


class ResidualPassages:
    """The passages of seeds and bridged entities ranked by what is left of the question.

    Args:
        adjacency: the graph's adjacency (entity nodes first, then passage nodes).
        n_entities: the number of entity nodes.
        leaf_vectors: the pool's entry vectors (L2-normalised rows).
        leaf_rows, leaf_passages: the pool rows of the passages' leaves and the passage (position, node minus
            ``n_entities``) of each; a passage with several leaves scores as its best.
        titled: entity node -> the passage nodes it titles.
        leaf_text: pool row -> the text of that leaf, for ``residual_words`` (None: no pick is checked by words).
    """

    def __init__(self, adjacency: sp.csr_matrix, n_entities: int, leaf_vectors: np.ndarray, leaf_rows: np.ndarray,
                 leaf_passages: np.ndarray, titled: Mapping[int, Sequence[int]],
                 leaf_text: Callable[[int], str] | None = None) -> None:
        if len(leaf_rows) != len(leaf_passages):
            raise ValueError(f"{len(leaf_rows)} leaf rows for {len(leaf_passages)} leaf passages")
        self.adjacency, self.n_entities, self.titled, self.leaf_text = adjacency, n_entities, titled, leaf_text
        n_passages = adjacency.shape[0] - n_entities
        self.leaves = Units(leaf_vectors, leaf_rows, leaf_passages, n_passages)
        self.propositions: Units | None = None  # (``residual_propositions``) set by :meth:`with_propositions`

    def with_propositions(self, bridge: PropositionBridge, passage_index: Mapping[str, int]) -> "ResidualPassages":
        """These passages scored by their propositions too (``residual_propositions``): the graph facts of ``bridge``
        and their vectors; ``passage_index``: passage id -> node."""
        facts = bridge.facts
        passage_nodes = facts.passage_nodes if isinstance(facts, FactTable) else np.fromiter(
            (passage_index.get(f.passage, -1) for f in facts), np.int64, count=len(facts))
        vectors = bridge.vectors
        rows = bridge.rows if bridge.rows is not None else np.arange(len(facts), dtype=np.int64)
        keep = np.asarray(passage_nodes) >= self.n_entities
        self.propositions = Units(vectors, np.asarray(rows)[keep], np.asarray(passage_nodes)[keep] - self.n_entities,
                                  self.adjacency.shape[0] - self.n_entities)
        return self

    def anchors(self, seeds: Seeds, question: str, names: Sequence[str], settings: BridgeSettings) -> list[Anchor]:
        """The seeds (``residual_seeds``) and bridged entities of one question, each with what is left of it."""
        base = Rest.of(question, names)
        bridged = {b.node for b in seeds.bridges}
        rests: dict[int, Rest] = {}
        out = []
        for node, weight in seeds.entities.items():
            if node not in bridged:
                rests[node] = base
                if settings.residual_seeds:
                    out.append(Anchor(node, weight, base, frozenset(self.titled.get(node, ()))))
        for b in seeds.bridges:  # in hop order: a bridge's parent comes before it
            rests[b.node] = rests.get(b.via, base).after(b.text)
            out.append(Anchor(b.node, seeds.entities.get(b.node, 0.0), rests[b.node],
                              frozenset(self.titled.get(b.node, ())) | {b.passage}))
        return out

    def scores(self, anchor: Anchor, vector: np.ndarray, propositions: bool = False) -> tuple[list[int], np.ndarray]:
        """The passage nodes of ``anchor`` that compete (in adjacency order) and the cosine of each with ``vector``
        (its best leaf's, or with ``propositions`` its best proposition's; a passage without any is left out)."""
        units = self.propositions if propositions and self.propositions is not None else self.leaves
        row = self.adjacency.indices[self.adjacency.indptr[anchor.node]:self.adjacency.indptr[anchor.node + 1]]
        positions = np.asarray([int(n) for n in row if n >= self.n_entities and int(n) not in anchor.skip],
                               dtype=np.int64) - self.n_entities
        positions, best = units.best(positions, vector)
        return [int(p) + self.n_entities for p in positions], best

    def best(self, anchor: Anchor, vector: np.ndarray, propositions: bool = False) -> tuple[int, float] | None:
        """``(passage node, cosine)`` of the passage of ``anchor`` closest to ``vector``, None when it has none."""
        nodes, scores = self.scores(anchor, vector, propositions)
        if not nodes:
            return None
        i = int(np.argmax(scores))  # the first of equals: the lowest node of the adjacency row
        return nodes[i], float(scores[i])

    def shares_a_word(self, passage: int, rest: Rest) -> bool:
        """Whether a leaf of ``passage`` (a node) shares a word with what is left (by key; true without texts)."""
        if self.leaf_text is None:
            return True
        return any(rest.matches(self.leaf_text(int(r))) for r in self.leaves.of(passage - self.n_entities))

    def add_to(self, seeds: Sequence[Seeds], questions: Sequence[str], names: Sequence[Sequence[str]],
               query_vectors: np.ndarray, settings: BridgeSettings,
               encode: Callable[[list[str]], np.ndarray]) -> None:
        """Give the best passage of every anchor of each question reset weight of its own (in ``seeds``' passages, in
        place). ``encode``: texts -> L2-normalised query vectors (called once, for ``residual_by = "rest"``)."""
        if settings.residual <= 0:
            return
        anchors = [self.anchors(s, q, n, settings) for s, q, n in zip(seeds, questions, names)]
        vectors: dict[str, np.ndarray] = {}
        if settings.residual_by == "rest":
            texts = list(dict.fromkeys(a.rest.text for group in anchors for a in group if a.rest.text))
            if texts:
                vectors = dict(zip(texts, np.asarray(encode(texts), dtype=np.float32)))
        for s, group, query in zip(seeds, anchors, query_vectors):
            picks = []  # (reset weight x cosine, passage node, the anchor)
            for anchor in group:
                if not anchor.rest.text or anchor.weight <= 0:
                    continue  # nothing left of the question: the entity's passages stay as the walk ranks them
                vector = query if settings.residual_by == "question" else vectors[anchor.rest.text]
                found = self.best(anchor, vector, settings.residual_propositions)
                if found is not None and (not settings.residual_words or self.shares_a_word(found[0], anchor.rest)):
                    picks.append((anchor.weight * found[1], found[0], anchor))
            if settings.residual_top:
                picks = sorted(picks, key=lambda p: (-p[0], p[1]))[:settings.residual_top]
            for _, passage, anchor in picks:
                s.passages[passage] = s.passages.get(passage, 0.0) + settings.residual * anchor.weight


def residual_passages(graph: EntityGraph, pool: Pool, leaf_rows: np.ndarray, leaf_passages: np.ndarray,
                      bridge: PropositionBridge, settings: BridgeSettings) -> ResidualPassages:
    """The :class:`ResidualPassages` of a PPR search over ``graph`` and ``pool`` (its leaves' rows and passages), by
    their propositions too when ``settings.residual_propositions``."""
    residual = ResidualPassages(graph.adjacency, graph.n_entities, pool.embeddings, leaf_rows, leaf_passages,
                                bridge.titled, lambda r: pool.entries[r].text)
    return residual.with_propositions(bridge, graph.passage_index) if settings.residual_propositions else residual


__all__ = ["Anchor", "ResidualPassages", "Units", "residual_passages"]
