"""The entity graph's structural edges, accumulated in arrays (no I/O).

The co-occurrence and contains edges of a corpus are about 40 per passage. They are collected as compact int32
buffers of node pairs, one pair per occurrence, and summed by :func:`numpy.unique` at the end, where a dict keyed
by ``(i, j)`` tuples took about 200 bytes an edge (10 KiB per passage) until the adjacency matrix was made.
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from sirerag.extraction.normalize import entity_key, is_entity, normalize_entity
from sirerag.core.types import Proposition


@dataclass(frozen=True)
class GraphFact:
    """A proposition as the graph sees it: its id, text, passage and entity node indices."""

    id: str
    text: str
    passage: str
    entities: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Edges:
    """Undirected edges as parallel arrays: ``rows[i] - cols[i]`` weighs ``weights[i]`` (int64, int64, float64),
    each pair once, sorted by ``(row, col)``."""

    rows: np.ndarray
    cols: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return int(self.rows.size)

    def as_dict(self) -> dict[tuple[int, int], float]:
        """``{(row, col): weight}`` (for reading them in a test or a log)."""
        return {(int(r), int(c)): float(w) for r, c, w in zip(self.rows, self.cols, self.weights)}

    def shifted(self, offset: int) -> "Edges":
        """The same edges with ``offset`` added to every column (passage nodes move when title nodes are added)."""
        return Edges(self.rows, self.cols + offset, self.weights)

    def keys(self, n_nodes: int) -> np.ndarray:
        """Each edge as one integer ``row * n_nodes + col``."""
        return self.rows * n_nodes + self.cols


def summed(rows: array | np.ndarray, cols: array | np.ndarray, n_cols: int, *, ones: bool = False) -> Edges:
    """The distinct ``(row, col)`` pairs of two buffers, sorted, weighing how often each occurs (1 with ``ones``)."""
    keys = np.asarray(rows, dtype=np.int64) * n_cols + np.asarray(cols, dtype=np.int64)
    unique, counts = np.unique(keys, return_counts=True)
    return Edges(unique // n_cols if n_cols else unique, unique % n_cols if n_cols else unique,
                 np.ones(unique.size) if ones else counts.astype(np.float64))


def _entities_of(prop: Proposition) -> list[tuple[str, str]]:
    """Distinct ``(key, display name)`` of a proposition's entities, in order; names that
    are not entities after normalisation (empty, pronouns, punctuation) are dropped."""
    seen: dict[str, str] = {}
    for name in prop.entities:
        if is_entity(name):
            seen.setdefault(entity_key(name), normalize_entity(name))
    return list(seen.items())


def structural_edges(passages: Sequence[str], propositions: Iterable[Proposition]
                     ) -> tuple[list[str], Edges, Edges, np.ndarray, list[GraphFact]]:
    """Entity table, co-occurrence and contains edges of the propositions.

    Returns:
        ``(entities, cooccurrence, contains, entity_passages, facts)``: entity display
        names in order of first mention (one node per :func:`entity_key`); co-occurrence edges ``(i, j)`` with
        ``i < j`` (entity nodes) weighing the propositions that name both; contains edges ``(entity node,
        passage node)`` weighing 1; passage counts per entity; the facts with their entity nodes.

    Raises:
        ValueError: a proposition names a passage that is not in ``passages``.
    """
    passage_pos = {pid: i for i, pid in enumerate(passages)}
    if len(passage_pos) != len(passages):
        raise ValueError("passages contain duplicate ids")
    entity_pos: dict[str, int] = {}  # entity key -> node
    names: list[str] = []  # display form of each entity node (its first mention)
    pair_lo, pair_hi = array("i"), array("i")  # one co-occurrence per pair of entities of a proposition
    held_entity, held_passage = array("i"), array("i")  # one (entity, passage position) per mention
    facts: list[GraphFact] = []
    for prop in propositions:
        if prop.doc_id not in passage_pos:
            raise ValueError(f"proposition {prop.id} belongs to passage {prop.doc_id!r}, which is not in the corpus")
        nodes = []
        for key, display in _entities_of(prop):
            if key not in entity_pos:
                entity_pos[key] = len(entity_pos)
                names.append(display)
            nodes.append(entity_pos[key])
        position = passage_pos[prop.doc_id]
        for a in range(len(nodes)):
            held_entity.append(nodes[a])
            held_passage.append(position)
            for b in range(a + 1, len(nodes)):
                pair_lo.append(min(nodes[a], nodes[b]))
                pair_hi.append(max(nodes[a], nodes[b]))
        if nodes:
            facts.append(GraphFact(id=prop.id, text=prop.text, passage=prop.doc_id, entities=tuple(nodes)))
    n_entities = len(entity_pos)
    cooc = summed(pair_lo, pair_hi, n_entities)
    contains = summed(held_entity, held_passage, max(len(passages), 1), ones=True)
    counts = np.bincount(contains.rows, minlength=n_entities).astype(np.int64)
    # passage node index = n_entities + position in the corpus
    return names, cooc, contains.shifted(n_entities), counts, facts


def title_edges(titles: Sequence[str], entities: list[str], n_passages: int) -> Edges:
    """Title node of every passage with a title, as edges ``(entity node, passage position)`` weighing 1.

    The title is an alias of the entity of the same key: an existing node is reused,
    otherwise a node is appended to ``entities`` (in place)."""
    index = {entity_key(name): i for i, name in enumerate(entities)}
    rows, cols = array("i"), array("i")
    for pos, title in enumerate(titles[:n_passages]):
        if not title or not is_entity(title):
            continue
        key = entity_key(title)
        if key not in index:
            index[key] = len(entities)
            entities.append(normalize_entity(title))
        rows.append(index[key])
        cols.append(pos)
    return summed(rows, cols, max(n_passages, 1), ones=True)


def linked_titles(titled: Edges, contains: Edges, n_entities: int) -> int:
    """Passages whose title is an entity that another passage's propositions name: the links PPR follows from a
    passage found by its title to the next one (many in entity-centric corpora such as Wikipedia paragraphs,
    none in a folder of files titled by their paths). ``titled`` holds passage positions, ``contains`` nodes."""
    if not len(titled):
        return 0
    named = np.bincount(contains.rows, minlength=n_entities)  # passages naming each entity
    titled = titled.shifted(n_entities)
    n_nodes = int(max(titled.cols.max(), contains.cols.max(initial=0))) + 1
    own = np.isin(titled.keys(n_nodes), contains.keys(n_nodes))  # named by its own passage too
    return int(np.count_nonzero(named[titled.rows] - own > 0))
