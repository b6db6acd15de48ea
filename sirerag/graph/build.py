"""Construction of the entity graph (no I/O).

Nodes are the entities of the propositions (phrase nodes, first), one per
normalised key (:func:`~sirerag.extraction.normalize.entity_key`: "Paris" and
"paris" are one node), and the corpus passages (passage nodes, after them), as in
HippoRAG 2. Edges are undirected and weighted:

* entity-entity *co-occurrence*: weight = number of propositions that mention both;
* passage-entity *contains*: weight 1 for every entity mentioned in the passage;
* passage-title *title*: the document's title is an entity node (an alias of the
  entity of the same name, or a node of its own) tied to each of the document's
  passages with a heavier weight (``title_weight``, default 2);
* entity-entity *synonym*: weight = cosine similarity of the entity embeddings,
  for pairs at or above a threshold, each entity keeping at most a given number of
  synonyms (strongest first). Entities with fewer than 3 alphanumeric characters
  get no synonym edges.

When one pair of entities gets edges of several kinds their weights add up.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.errors import check
from sirerag.embedding.base import Embedder
from sirerag.extraction.normalize import entity_key, is_entity, normalize_entity
from sirerag.graph.synonyms import MIN_SYNONYM_CHARS, alnum_count, synonym_edges
from sirerag.core.types import Proposition

logger = logging.getLogger(__name__)


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
    facts: Sequence[GraphFact] = ()
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

    def titled(self, title_weight: float) -> list[tuple[int, str]]:
        """``(entity node, passage id)`` of every title edge of a graph built with ``title_weight``: an
        entity-passage edge weighs 1 for a mention, ``title_weight`` for a title and their sum for both, so
        with ``title_weight`` > 1 the edges of at least that weight are the titles (none otherwise)."""
        if title_weight <= 1.0 or not self.passages:
            return []
        n_e = len(self.entities)
        upper = self.adjacency[:n_e].tocoo()
        keep = (upper.col >= n_e) & (upper.data >= title_weight - 1e-9)
        return [(int(e), self.passages[int(c) - n_e]) for e, c in zip(upper.row[keep], upper.col[keep])]


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
                pair = (min(nodes[a], nodes[b]), max(nodes[a], nodes[b]))
                cooc[pair] = cooc.get(pair, 0.0) + 1.0
        if nodes:
            facts.append(GraphFact(id=prop.id, text=prop.text, passage=prop.doc_id, entities=tuple(nodes)))
    n_entities = len(entity_pos)
    counts = np.zeros(n_entities, dtype=np.int64)
    for entity, _ in contains:
        counts[entity] += 1
    # passage node index = n_entities + position in the corpus
    contains_edges = {(e, n_entities + p): 1.0 for e, p in sorted(contains)}
    return names, cooc, contains_edges, counts, facts


def title_edges(titles: Sequence[str], entities: list[str], n_passages: int) -> dict[tuple[int, int], float]:
    """Title node of every passage with a title, as ``{(entity node, passage position): 1}``.

    The title is an alias of the entity of the same key: an existing node is reused,
    otherwise a node is appended to ``entities`` (in place)."""
    index = {entity_key(name): i for i, name in enumerate(entities)}
    edges: dict[tuple[int, int], float] = {}
    for pos, title in enumerate(titles[:n_passages]):
        if not title or not is_entity(title):
            continue
        key = entity_key(title)
        if key not in index:
            index[key] = len(entities)
            entities.append(normalize_entity(title))
        edges[(index[key], pos)] = 1.0
    return edges


def linked_titles(titled: dict[tuple[int, int], float], contains: dict[tuple[int, int], float], n_entities: int) -> int:
    """Passages whose title is an entity that another passage's propositions name: the links PPR follows from a
    passage found by its title to the next one (many in entity-centric corpora such as Wikipedia paragraphs,
    none in a folder of files titled by their paths)."""
    named_in: dict[int, set[int]] = {}
    for entity, node in contains:
        named_in.setdefault(entity, set()).add(node - n_entities)
    return sum(1 for entity, pos in titled if named_in.get(entity, set()) - {pos})


def build_graph(
    passages: Sequence[str],
    propositions: Sequence[Proposition],
    *,
    titles: Sequence[str] | None = None,
    title_weight: float = 2.0,
    embedder: Embedder | None = None,
    embed_facts: bool = True,
    synonym_threshold: float = 0.8,
    synonym_max_neighbors: int = 100,
    block_size: int | None = None,
    name_embedder: Embedder | None = None,
) -> EntityGraph:
    """Build the entity graph of a corpus.

    Args:
        passages: passage (document) ids in corpus order; every one becomes a node.
        propositions: propositions with normalised entities and their ``doc_id``.
        titles: the title of each passage's document ("" for none), aligned with
            ``passages``: the title becomes an entity node (or is an alias of the entity
            of the same name) tied to the passage with weight ``title_weight``.
        title_weight: weight of a title edge (a mention edge weighs 1).
        embedder: embeds entity names (for synonym edges and query linking) and, with
            ``embed_facts``, proposition texts (for fact linking); None builds no synonym
            edges and stores no embeddings.
        embed_facts: also embed the facts (only ``fact`` linking needs them).
        synonym_threshold: minimum cosine for a synonym edge.
        synonym_max_neighbors: maximum synonym edges per entity.
        block_size: rows per block of the synonym kNN.
        name_embedder: embeds the entity names in place of ``embedder`` (a static embedder,
            ``graph.name_vectors``); the same dimension.

    Returns:
        The :class:`EntityGraph`; ``stats["seconds"]`` holds the time of each stage.

    Raises:
        ValueError: a proposition names a passage not in ``passages``.
    """
    check(float(title_weight) >= 0, "graph.title_weight", title_weight, "a number >= 0")
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    entities, cooc, contains, counts, facts = structural_edges(passages, propositions)
    n_mentioned = len(entities)
    titled = title_edges(list(titles or ()), entities, len(passages)) if title_weight > 0 else {}
    n_e = len(entities)
    n = n_e + len(passages)
    # entity nodes created by titles shift passage nodes: re-key the contains edges
    contains = {(e, p - n_mentioned + n_e): w for (e, p), w in contains.items()}
    linked = {(e, n_e + p): float(title_weight) for (e, p), _ in titled.items()}
    mentioned = set(contains)
    counts = np.concatenate([counts, np.zeros(n_e - n_mentioned, np.int64)])
    for edge in linked:
        if edge not in mentioned:
            counts[edge[0]] += 1
    seconds["structure"] = time.perf_counter() - start
    dim = int(embedder.dim) if embedder is not None else 0
    ent_emb = np.zeros((n_e, dim), dtype=np.float32)
    fact_emb = np.zeros((len(facts) if embed_facts else 0, dim), dtype=np.float32)
    syn = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    if embedder is not None and n_e:
        start = time.perf_counter()
        ent_emb = np.asarray((name_embedder or embedder).encode_documents(entities), dtype=np.float32)
        seconds["embed_entities"] = time.perf_counter() - start
        start = time.perf_counter()
        eligible = np.array([alnum_count(e) >= MIN_SYNONYM_CHARS for e in entities], dtype=bool)
        syn = synonym_edges(ent_emb, threshold=synonym_threshold, max_neighbors=synonym_max_neighbors,
                            eligible=eligible, block_size=block_size)
        seconds["synonyms"] = time.perf_counter() - start
    if embedder is not None and embed_facts and facts:
        start = time.perf_counter()
        fact_emb = np.asarray(embedder.encode_documents([f.text for f in facts]), dtype=np.float32)
        seconds["embed_facts"] = time.perf_counter() - start
    start = time.perf_counter()
    parts = [(cooc, 1.0), (contains, 1.0), (linked, 1.0)]
    rows = np.concatenate([np.fromiter((a for a, _ in d), dtype=np.int64, count=len(d)) for d, _ in parts]
                          + [syn[0]])
    cols = np.concatenate([np.fromiter((b for _, b in d), dtype=np.int64, count=len(d)) for d, _ in parts]
                          + [syn[1]])
    weights = np.concatenate([np.fromiter(d.values(), dtype=np.float64, count=len(d)) for d, _ in parts]
                             + [syn[2]])
    upper = sp.coo_matrix((weights, (rows, cols)), shape=(n, n))
    adjacency = (upper + upper.T).tocsr()  # duplicate pairs are summed
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    seconds["adjacency"] = time.perf_counter() - start
    stats = {"entity_nodes": n_e, "title_only_nodes": n_e - n_mentioned, "passage_nodes": len(passages),
             "linked_titles": linked_titles(titled, contains, n_e),
             "cooccurrence_edges": len(cooc), "contains_edges": len(contains), "title_edges": len(linked),
             "synonym_edges": int(syn[0].size), "undirected_edges": int(adjacency.nnz // 2), "facts": len(facts),
             "fact_embeddings": int(fact_emb.shape[0]),
             "seconds": {k: round(v, 3) for k, v in seconds.items()}}
    logger.info("entity graph: %d entities (%d from titles only), %d passages, %d co-occurrence / %d contains / "
                "%d title / %d synonym edges", n_e, n_e - n_mentioned, len(passages), len(cooc), len(contains),
                len(linked), syn[0].size)
    return EntityGraph(entities=tuple(entities), passages=tuple(passages), adjacency=adjacency,
                       entity_passages=counts, facts=tuple(facts), entity_embeddings=ent_emb,
                       fact_embeddings=fact_emb, stats=stats)
