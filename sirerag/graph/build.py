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
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config.dense import DenseConfig
from sirerag.core.errors import check
from sirerag.embedding.base import Embedder
from sirerag.extraction.normalize import entity_key
from sirerag.graph.edges import Edges, GraphFact, linked_titles, structural_edges, title_edges
from sirerag.graph.titles import title_edge_arrays
from sirerag.graph.synonyms import MIN_SYNONYM_CHARS, alnum_count, synonym_edges
from sirerag.core.types import Proposition

__all__ = ["EntityGraph", "GraphFact", "NameVectors", "build_graph", "names_in_memory", "structural_edges"]

logger = logging.getLogger(__name__)


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

    def title_edges(self, title_weight: float) -> tuple[np.ndarray, np.ndarray]:
        """``(entity nodes, passage nodes)`` of every title edge of a graph built with ``title_weight``
        (:func:`~sirerag.graph.titles.title_edge_arrays`), as two arrays."""
        return title_edge_arrays(self.adjacency, len(self.entities), title_weight)

    def titled(self, title_weight: float) -> list[tuple[int, str]]:
        """``(entity node, passage id)`` of every title edge of a graph built with ``title_weight``: an
        entity-passage edge weighs 1 for a mention, ``title_weight`` for a title and their sum for both, so
        with ``title_weight`` > 1 the edges of at least that weight are the titles (none otherwise)."""
        entities, passages = self.title_edges(title_weight)
        n_e = len(self.entities)
        return [(e, self.passages[p - n_e]) for e, p in zip(entities.tolist(), passages.tolist())]


#: ``(embedder, names, eligible) -> (one row per name, the rows of the eligible names)``: how the entity names
#: are embedded (:func:`names_in_memory`; a build writes them to their file in slices,
#: :func:`sirerag.graph.name_vectors.name_vector_writer`)
NameVectors = Callable[[Embedder, Sequence[str], np.ndarray], tuple[np.ndarray, np.ndarray]]


def names_in_memory(embedder: Embedder, names: Sequence[str], eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every name's row, in memory, and the rows of the ``eligible`` ones (a copy)."""
    rows = np.asarray(embedder.encode_documents(list(names)), dtype=np.float32)
    return rows, rows[np.flatnonzero(eligible)]


def build_graph(
    passages: Sequence[str],
    propositions: Iterable[Proposition],
    *,
    titles: Sequence[str] | None = None,
    title_weight: float = 2.0,
    embedder: Embedder | None = None,
    embed_facts: bool = True,
    synonym_threshold: float = 0.8,
    synonym_max_neighbors: int = 100,
    block_size: int | None = None,
    name_embedder: Embedder | None = None,
    name_vectors: NameVectors | None = None,
    synonym_ann_min_names: int = -1,
    ann: DenseConfig | None = None,
) -> EntityGraph:
    """Build the entity graph of a corpus.

    Args:
        passages: passage (document) ids in corpus order; every one becomes a node.
        propositions: propositions with normalised entities and their ``doc_id`` (read once).
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
        name_embedder: embeds the entity names in place of ``embedder`` (MiniLM's int8 export or a static
            embedder, ``graph.name_vectors``); the same dimension.
        name_vectors: how the names' rows are made and held (default :func:`names_in_memory`).
        synonym_ann_min_names: with at least this many eligible names the synonym kNN goes through HNSW
            (``graph.synonym_ann_min_names``; -1: never).
        ann: the HNSW parameters for it (default ``DenseConfig()``'s).

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
    titled = title_edges(list(titles or ()) if title_weight > 0 else [], entities, len(passages))
    n_e = len(entities)
    n = n_e + len(passages)
    # entity nodes created by titles shift passage nodes: re-key the contains edges
    contains = contains.shifted(n_e - n_mentioned)
    linked = Edges(titled.rows, titled.cols + n_e, np.full(len(titled), float(title_weight)))
    counts = np.concatenate([counts, np.zeros(n_e - n_mentioned, np.int64)])
    np.add.at(counts, linked.rows[~np.isin(linked.keys(n), contains.keys(n))], 1)  # a title its passage names
    seconds["structure"] = time.perf_counter() - start
    dim = int(embedder.dim) if embedder is not None else 0
    fact_emb = np.zeros((len(facts) if embed_facts else 0, dim), dtype=np.float32)
    syn = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
    by_ann = False
    ent_emb = np.zeros((0 if embedder is not None and n_e else n_e, dim), dtype=np.float32)  # replaced below
    if embedder is not None and n_e:
        start = time.perf_counter()
        eligible = np.array([alnum_count(e) >= MIN_SYNONYM_CHARS for e in entities], dtype=bool)
        ent_emb, rows = (name_vectors or names_in_memory)(name_embedder or embedder, entities, eligible)
        seconds["embed_entities"] = time.perf_counter() - start
        start = time.perf_counter()
        # the kNN over the eligible rows (as synonym_edges(ent_emb, eligible=...) would, without its copy of them)
        by_ann = 0 <= synonym_ann_min_names <= int(eligible.sum())
        pairs = synonym_edges(rows, threshold=synonym_threshold, max_neighbors=synonym_max_neighbors,
                              block_size=block_size, ann=(ann or DenseConfig()) if by_ann else None)
        del rows
        where = np.flatnonzero(eligible)
        syn = (where[pairs[0]], where[pairs[1]], pairs[2])
        seconds["synonyms"] = time.perf_counter() - start
    if embedder is not None and embed_facts and facts:
        start = time.perf_counter()
        fact_emb = np.asarray(embedder.encode_documents([f.text for f in facts]), dtype=np.float32)
        seconds["embed_facts"] = time.perf_counter() - start
    start = time.perf_counter()
    parts = (cooc, contains, linked)
    upper = sp.coo_matrix((np.concatenate([p.weights for p in parts] + [syn[2]]),
                           (np.concatenate([p.rows for p in parts] + [syn[0]]),
                            np.concatenate([p.cols for p in parts] + [syn[1]]))), shape=(n, n))
    adjacency = (upper + upper.T).tocsr()  # duplicate pairs are summed
    adjacency.sum_duplicates()
    adjacency.sort_indices()
    seconds["adjacency"] = time.perf_counter() - start
    stats = {"entity_nodes": n_e, "title_only_nodes": n_e - n_mentioned, "passage_nodes": len(passages),
             "linked_titles": linked_titles(titled, contains, n_e),
             "cooccurrence_edges": len(cooc), "contains_edges": len(contains), "title_edges": len(linked),
             "synonym_edges": int(syn[0].size), **({"synonym_search": "hnsw"} if by_ann else {}),
             "undirected_edges": int(adjacency.nnz // 2), "facts": len(facts),
             "fact_embeddings": int(fact_emb.shape[0]),
             "seconds": {k: round(v, 3) for k, v in seconds.items()}}
    logger.info("entity graph: %d entities (%d from titles only), %d passages, %d co-occurrence / %d contains / "
                "%d title / %d synonym edges", n_e, n_e - n_mentioned, len(passages), len(cooc), len(contains),
                len(linked), syn[0].size)
    return EntityGraph(entities=tuple(entities), passages=tuple(passages), adjacency=adjacency,
                       entity_passages=counts, facts=tuple(facts), entity_embeddings=ent_emb,
                       fact_embeddings=fact_emb, stats=stats)
