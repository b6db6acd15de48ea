"""Construction of the entity graph (no I/O).

Nodes are the entities of the propositions (phrase nodes, first), one per
normalised key (:func:`~sirerag.extraction.normalize.entity_key`: "Paris" and
"paris" are one node), and the corpus passages (passage nodes, after them), as in
HippoRAG 2. Edges are undirected and weighted:

* entity-entity *co-occurrence*: weight = number of propositions that mention both;
* passage-entity *contains*: weight 1 for every entity mentioned in the passage;
* entity-entity *synonym*: weight = cosine similarity of the entity embeddings,
  for pairs at or above a threshold, each entity keeping at most a given number of
  synonyms (strongest first). Entities with fewer than 3 alphanumeric characters
  get no synonym edges.

When one pair of entities gets edges of several kinds their weights add up.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.errors import check
from sirerag.extraction.normalize import entity_key, is_entity, normalize_entity
from sirerag.types import Proposition

logger = logging.getLogger(__name__)

#: entities with fewer alphanumeric characters than this get no synonym edges
MIN_SYNONYM_CHARS = 3


@dataclass(frozen=True)
class GraphFact:
    """A proposition as the graph sees it: its id, text, passage and entity node indices."""

    id: str
    text: str
    passage: str
    entities: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class EntityGraph:
    """The entity graph: node ``i < len(entities)`` is an entity, the rest are passages.

    Attributes:
        entities: normalised entity names (phrase nodes ``0 .. E-1``).
        passages: passage (document) ids (nodes ``E .. E+P-1``), in corpus order.
        adjacency: symmetric ``(E+P, E+P)`` float64 CSR matrix of edge weights, no self-loops.
        entity_passages: ``(E,)`` int64, the number of passages each entity occurs in.
        facts: the propositions that mention at least one entity, in input order.
        entity_embeddings: ``(E, dim)`` float32 L2-normalised rows (empty if not embedded).
        fact_embeddings: ``(len(facts), dim)`` float32 L2-normalised rows.
        stats: node and edge counts by kind.
    """

    entities: tuple[str, ...]
    passages: tuple[str, ...]
    adjacency: sp.csr_matrix
    entity_passages: np.ndarray
    facts: tuple[GraphFact, ...] = ()
    entity_embeddings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    fact_embeddings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_nodes(self) -> int:
        return len(self.entities) + len(self.passages)

    @cached_property
    def entity_index(self) -> dict[str, int]:
        """Entity key (:func:`~sirerag.extraction.normalize.entity_key`) -> node index."""
        return {entity_key(name): i for i, name in enumerate(self.entities)}

    def entity_node(self, name: str) -> int | None:
        """Node of an entity name in any case or spacing variant, None if absent."""
        return self.entity_index.get(entity_key(name))

    @cached_property
    def passage_index(self) -> dict[str, int]:
        """Passage id -> node index (``n_entities + position``)."""
        offset = len(self.entities)
        return {pid: offset + i for i, pid in enumerate(self.passages)}


def alnum_count(text: str) -> int:
    """Number of alphanumeric characters of ``text`` (Unicode aware)."""
    return sum(ch.isalnum() for ch in text)


def _entities_of(prop: Proposition) -> list[tuple[str, str]]:
    """Distinct ``(key, display name)`` of a proposition's entities, in order; names that
    are not entities after normalisation (empty, pronouns, punctuation) are dropped."""
    seen: dict[str, str] = {}
    for name in prop.entities:
        if is_entity(name):
            seen.setdefault(entity_key(name), normalize_entity(name))
    return list(seen.items())


def structural_edges(
    passages: Sequence[str], propositions: Iterable[Proposition]
) -> tuple[list[str], dict[tuple[int, int], float], dict[tuple[int, int], float], np.ndarray, list[GraphFact]]:
    """Entity table, co-occurrence and contains edges of the propositions.

    Returns:
        ``(entities, cooccurrence, contains, entity_passages, facts)``: entity display
        names in order of first mention (one node per :func:`entity_key`); co-occurrence weights keyed ``(i, j)`` with ``i < j``
        (entity nodes); contains edges keyed ``(entity node, passage node)`` with weight
        1; passage counts per entity; the facts with their entity nodes.

    Raises:
        ValueError: a proposition names a passage that is not in ``passages``.
    """
    passage_pos = {pid: i for i, pid in enumerate(passages)}
    if len(passage_pos) != len(passages):
        raise ValueError("passages contain duplicate ids")
    entity_pos: dict[str, int] = {}  # entity key -> node
    names: list[str] = []  # display form of each entity node (its first mention)
    cooc: dict[tuple[int, int], float] = {}
    contains: set[tuple[int, int]] = set()
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
        for a in range(len(nodes)):
            contains.add((nodes[a], passage_pos[prop.doc_id]))
            for b in range(a + 1, len(nodes)):
                key = (min(nodes[a], nodes[b]), max(nodes[a], nodes[b]))
                cooc[key] = cooc.get(key, 0.0) + 1.0
        if nodes:
            facts.append(GraphFact(id=prop.id, text=prop.text, passage=prop.doc_id, entities=tuple(nodes)))
    n_entities = len(entity_pos)
    counts = np.zeros(n_entities, dtype=np.int64)
    for entity, _ in contains:
        counts[entity] += 1
    # passage node index = n_entities + position in the corpus
    contains_edges = {(e, n_entities + p): 1.0 for e, p in sorted(contains)}
    return names, cooc, contains_edges, counts, facts


def synonym_edges(
    embeddings: np.ndarray,
    *,
    threshold: float = 0.8,
    max_neighbors: int = 100,
    eligible: np.ndarray | None = None,
    block_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synonym pairs by exact cosine kNN, computed in row blocks so memory stays bounded.

    Every eligible entity proposes its ``max_neighbors`` most similar eligible entities
    with cosine ``>= threshold``; the proposed pairs are then accepted strongest first
    while both ends have fewer than ``max_neighbors`` synonyms, so no entity ends up
    with more than ``max_neighbors`` synonym edges.

    Args:
        embeddings: ``(n, dim)`` L2-normalised rows.
        threshold: minimum cosine similarity.
        max_neighbors: maximum synonym edges per entity (0 disables synonyms).
        eligible: boolean mask of entities that may get synonyms (default: all).
        block_size: rows per block (default: about 16M similarities per block).

    Returns:
        ``(rows, cols, sims)`` with ``rows < cols``, sorted by decreasing similarity.
    """
    check(0.0 < float(threshold) <= 1.0, "synonym threshold", threshold, "a cosine similarity in (0, 1]")
    check(int(max_neighbors) >= 0, "synonym max_neighbors", max_neighbors, "an integer >= 0")
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    n = x.shape[0]
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if n < 2 or max_neighbors == 0:
        return empty
    mask = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    idx = np.flatnonzero(mask)
    if idx.size < 2:
        return empty
    sub = x[idx]
    m = sub.shape[0]
    block = block_size or max(1, min(4096, (1 << 24) // m))
    k = min(max_neighbors, m - 1)
    rows_l, cols_l, sims_l = [], [], []
    for start in range(0, m, block):
        stop = min(start + block, m)
        sims = sub[start:stop] @ sub.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        if k < m - 1:
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        else:
            top = np.broadcast_to(np.arange(m), (stop - start, m))
        top_sims = np.take_along_axis(sims, top, axis=1)
        keep = top_sims >= threshold
        r = np.repeat(np.arange(start, stop), keep.sum(axis=1))
        rows_l.append(r)
        cols_l.append(top[keep])
        sims_l.append(top_sims[keep].astype(np.float64))
    rows = np.concatenate(rows_l)
    cols = np.concatenate(cols_l)
    sims = np.concatenate(sims_l)
    if rows.size == 0:
        return empty
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    _, first = np.unique(lo * m + hi, return_index=True)
    lo, hi, sims = lo[first], hi[first], sims[first]
    order = np.lexsort((hi, lo, -sims))  # strongest first, ties by index
    degree = np.zeros(m, dtype=np.int64)
    accepted = np.zeros(order.size, dtype=bool)
    for pos, pair in enumerate(order.tolist()):
        a, b = int(lo[pair]), int(hi[pair])
        if degree[a] < max_neighbors and degree[b] < max_neighbors:
            degree[a] += 1
            degree[b] += 1
            accepted[pos] = True
    chosen = order[accepted]
    return idx[lo[chosen]], idx[hi[chosen]], sims[chosen]


def build_graph(
    passages: Sequence[str],
    propositions: Sequence[Proposition],
    *,
    embedder: Any | None = None,
    synonym_threshold: float = 0.8,
    synonym_max_neighbors: int = 100,
    block_size: int | None = None,
) -> EntityGraph:
    """Build the entity graph of a corpus.

    Args:
        passages: passage (document) ids in corpus order; every one becomes a node.
        propositions: propositions with normalised entities and their ``doc_id``.
        embedder: embeds entity names (for synonym edges and query linking) and
            proposition texts (for fact linking); None builds no synonym edges and
            stores no embeddings.
        synonym_threshold: minimum cosine for a synonym edge.
        synonym_max_neighbors: maximum synonym edges per entity.
        block_size: rows per block of the synonym kNN.

    Returns:
        The :class:`EntityGraph`.

    Raises:
        ValueError: a proposition names a passage not in ``passages``.
    """
    entities, cooc, contains, counts, facts = structural_edges(passages, propositions)
    n_e = len(entities)
    n = n_e + len(passages)
    dim = int(embedder.dim) if embedder is not None else 0
    ent_emb = np.zeros((n_e, dim), dtype=np.float32)
    fact_emb = np.zeros((len(facts), dim), dtype=np.float32)
    syn = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if embedder is not None:
        if n_e:
            ent_emb = np.asarray(embedder.encode_documents(entities), dtype=np.float32)
            eligible = np.array([alnum_count(e) >= MIN_SYNONYM_CHARS for e in entities], dtype=bool)
            syn = synonym_edges(ent_emb, threshold=synonym_threshold, max_neighbors=synonym_max_neighbors,
                                eligible=eligible, block_size=block_size)
        if facts:
            fact_emb = np.asarray(embedder.encode_documents([f.text for f in facts]), dtype=np.float32)
    rows = np.concatenate([
        np.fromiter((a for a, _ in cooc), dtype=np.int64, count=len(cooc)),
        np.fromiter((a for a, _ in contains), dtype=np.int64, count=len(contains)),
        syn[0],
    ])
    cols = np.concatenate([
        np.fromiter((b for _, b in cooc), dtype=np.int64, count=len(cooc)),
        np.fromiter((b for _, b in contains), dtype=np.int64, count=len(contains)),
        syn[1],
    ])
    weights = np.concatenate([np.fromiter(cooc.values(), dtype=np.float64, count=len(cooc)),
                              np.ones(len(contains)), syn[2]])
    upper = sp.coo_matrix((weights, (rows, cols)), shape=(n, n))
    adjacency = (upper + upper.T).tocsr()  # duplicate pairs are summed
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    stats = {"entity_nodes": n_e, "passage_nodes": len(passages), "cooccurrence_edges": len(cooc),
             "contains_edges": len(contains), "synonym_edges": int(syn[0].size),
             "undirected_edges": int(adjacency.nnz // 2), "facts": len(facts)}
    logger.info("entity graph: %d entities, %d passages, %d co-occurrence / %d contains / %d synonym edges",
                n_e, len(passages), len(cooc), len(contains), syn[0].size)
    return EntityGraph(entities=tuple(entities), passages=tuple(passages), adjacency=adjacency,
                       entity_passages=counts, facts=tuple(facts), entity_embeddings=ent_emb,
                       fact_embeddings=fact_emb, stats=stats)
