"""Query-conditioned bridging through propositions: PPR's second hop, without an LLM.

A multi-hop question names its first entity ("the director of *Sleep, My Love*") and the relation that
leads to the second ("director of"). The relation words are in the propositions that name both entities
("Sleep, My Love was directed by Douglas Sirk"). So, from the query's linked seed entities:

1. take the propositions (graph facts) that name an entity of the frontier (the seeds at hop 1);
2. score them by cosine with the query (each proposition is embedded once at build time);
3. keep the ``top`` best at or above ``threshold``; every other entity they name is *bridged*, with
   activation ``parent activation x cosine`` (seeds start at 1);
4. the bridged entities are the next frontier, for ``hops`` hops.

A passage's title names what its propositions are about even where they do not name it: the passage
titled "The Knife (1961 film)" says "The Knife is a 1961 Dutch film directed by Fons Rademakers", whose
entity is "The Knife". So a title node also bridges through the propositions of the passages it titles
(``titles``, on by default).

The retriever adds each bridged entity to PageRank's reset vector with weight
``weight x cosine x min(specificity, weight of the entity it came from)``: the passages of the entity the
question's relation points to get mass, not those of every entity that co-occurs with the seed, and a bridge
never outweighs the seed it came from. A bridged entity's specificity is ``1 / sqrt(its passages other than
the bridging proposition's)`` (``specificity`` is the exponent; 1 for an entity in that passage only): the
passage it was reached from is where the question already is, and an entity the question's relation selected
is penalised for its other passages less than a seed is (``1 / passages``).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.io import load_npy
from sirerag.core.config import GraphConfig
from sirerag.core.config.retrieval import BridgeSettings
from sirerag.graph.build import EntityGraph, GraphFact
from sirerag.graph.facts import FactTable, fact_arrays
from sirerag.graph.linking import Bridge, Seeds

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.pool.loaded import LoadedIndex

logger = logging.getLogger(__name__)


class PropositionBridge:
    """Bridging over the graph's facts.

    Args:
        facts: the graph's facts (propositions with their entity nodes).
        vectors: L2-normalised proposition vectors: ``(len(facts), dim)``, row ``i`` for ``facts[i]``, or
            with ``rows`` any ``(n, dim)`` array (a memory map is read only where a search needs it).
        entity_passages: passages per entity node (:attr:`EntityGraph.entity_passages`), for a bridged
            entity's specificity (the module docstring).
        rows: ``(len(facts),)`` the row of ``vectors`` of each fact (None: row ``i`` is ``facts[i]``'s).
        titles: ``(entity node, passage id)`` title edges (:meth:`EntityGraph.titled`): a title node also
            bridges through the facts of the passages it titles.
        passage_index: passage id -> node (:attr:`EntityGraph.passage_index`): with it, a bridged entity's
            titled passages get reset weight of their own (``title_passages``; none without it).
        adjacency, entity_vectors, synonym_threshold: the graph's adjacency and entity embeddings and its
            synonym threshold: a bridged entity that titles nothing gives the passage of its closest neighbour
            title at or above the threshold a share of its weight (``synonym_titles``; none without them).
    """

    def __init__(self, facts: Sequence[GraphFact], vectors: np.ndarray, entity_passages: np.ndarray,
                 rows: np.ndarray | None = None, titles: Sequence[tuple[int, str]] = (),
                 passage_index: Mapping[str, int] | None = None, adjacency: sp.csr_matrix | None = None,
                 entity_vectors: np.ndarray | None = None,
                 synonym_threshold: float = GraphConfig.synonym_threshold) -> None:
        if rows is not None and (len(rows) != len(facts) or (
                len(rows) and not (0 <= int(np.min(rows)) and int(np.max(rows)) < len(vectors)))):
            raise ValueError(f"{len(rows)} vector rows for {len(facts)} graph facts, or a row outside the "
                             f"{len(vectors)} vectors")
        if rows is None and len(vectors) != len(facts):
            raise ValueError(f"{len(vectors)} proposition vectors for {len(facts)} graph facts")
        # with ``rows`` the vectors stay memory-mapped: a search reads the rows of the facts it scores
        self.facts, self.rows = facts, None if rows is None else np.asarray(rows, dtype=np.int64)
        self.vectors = vectors if rows is not None else np.asarray(vectors, dtype=np.float32)
        self.passages = np.asarray(entity_passages, dtype=np.float64)
        n_entities = len(self.passages)
        if isinstance(facts, FactTable):  # a saved graph's facts: their arrays, no fact parsed
            self._named_indptr, self._named = facts.indptr, facts.nodes
            fact_passage, passage_key = facts.passage_nodes, facts.passage_nodes_by_id
        else:
            passage_key = {}
            self._named_indptr, self._named, _ = fact_arrays(facts, {})
            fact_passage = np.fromiter((passage_key.setdefault(f.passage, len(passage_key)) for f in facts),
                                       np.int64, count=len(facts))
        naming = np.repeat(np.arange(len(facts), dtype=np.int64), np.diff(self._named_indptr))
        self.entity_facts = sp.csr_matrix((np.ones(len(self._named), np.float32), (self._named, naming)),
                                          shape=(n_entities, len(facts)))
        self.title_facts, self._fact_titles = _title_facts(fact_passage, passage_key, titles, self.entity_facts)
        self.titled: dict[int, list[int]] = {}  # entity node -> the passage nodes it titles
        for entity, passage in titles if passage_index is not None else ():
            if passage_index is not None and passage in passage_index:
                self.titled.setdefault(int(entity), []).append(passage_index[passage])
        self._titles = np.zeros(n_entities, dtype=bool)  # the entity nodes that title a passage
        self._titles[list(self.titled)] = True
        usable = adjacency is not None and entity_vectors is not None and len(entity_vectors) == n_entities
        self._adjacency, self._entity_vectors = (adjacency, entity_vectors) if usable else (None, None)
        self.synonym_threshold = float(synonym_threshold)

    def bridges(self, query_vector: np.ndarray, seeds: Sequence[int], settings: BridgeSettings,
                avoid: Sequence[int] = ()) -> list[Bridge]:
        """The entities reached from ``seeds`` (entity nodes), strongest activation per entity; the nodes in
        ``avoid`` are neither reached nor passed through."""
        query = np.asarray(query_vector, dtype=np.float32)
        frontier = {int(n): 1.0 for n in seeds}
        visited = set(frontier) | {int(n) for n in avoid}
        found: list[Bridge] = []
        for hop in range(1, settings.hops + 1):
            if not frontier:
                break
            nodes = np.fromiter(frontier, dtype=np.int64)
            candidates = self.entity_facts[nodes].indices
            if self.title_facts is not None and settings.titles:
                candidates = np.concatenate([candidates, self.title_facts[nodes].indices])
            candidates = np.unique(candidates)
            # only propositions that lead somewhere new compete for the ``top`` places
            candidates = candidates[[any(int(e) not in visited for e in self._named[self._named_indptr[c]:
                                                                                   self._named_indptr[c + 1]])
                                     for c in candidates]]
            if candidates.size == 0:
                break
            scores = np.asarray(self.vectors[candidates if self.rows is None else self.rows[candidates]],
                                dtype=np.float32) @ query
            order = np.argsort(-scores, kind="stable")[:settings.top]
            reached: dict[int, Bridge] = {}
            for j in order:
                score = float(scores[j])
                if score < settings.threshold:
                    break
                fact = self.facts[int(candidates[j])]
                naming = [e for e in fact.entities + self.title_nodes(int(candidates[j])) if e in frontier]
                via = max(naming, key=lambda e: (frontier[e], -e))
                activation = frontier[via] * score
                for node in fact.entities:
                    if node in visited:
                        continue
                    if node not in reached or activation > reached[node].score * frontier[reached[node].via]:
                        reached[node] = Bridge(node=node, hop=hop, via=via, text=fact.text, score=score)
            frontier = {n: frontier[b.via] * b.score for n, b in reached.items()}
            visited |= set(reached)
            found += reached.values()
        return found

    def title_nodes(self, fact: int) -> tuple[int, ...]:
        """The title nodes through which ``fact`` is reached that it does not name itself (its passage's titles)."""
        if self._fact_titles is None:
            return ()
        start, stop = self._fact_titles.indptr[fact], self._fact_titles.indptr[fact + 1]
        return tuple(int(e) for e in self._fact_titles.indices[start:stop])

    def add_to(self, seeds: Seeds, query_vector: np.ndarray, settings: BridgeSettings) -> None:
        """Bridge from ``seeds``' entities and add the bridged entities to them (in place)."""
        if settings.hops <= 0 or not seeds.entities:
            return
        weight = settings.weight
        if settings.max_seeds and len(seeds.entities) > settings.max_seeds:
            # a question naming several entities asks mostly about them (a comparison), and sometimes about
            # what each leads to ("the director of A or of B"): each seed bridges on its own, lightly
            if settings.seed_weight <= 0:
                return
            found, weight = self.each_seed(query_vector, list(seeds.entities), settings), weight * settings.seed_weight
        else:
            found = self.bridges(query_vector, list(seeds.entities), settings)
        # hop order: a bridge's parent has its weight before the bridge; a bridge never outweighs its parent
        for bridge in found:
            parent = seeds.entities.get(bridge.via, 0.0)
            specificity = max(float(self.passages[bridge.node]) - 1.0, 1.0) ** -settings.specificity
            gain = weight * bridge.score * min(specificity, parent)
            seeds.entities[bridge.node] = seeds.entities.get(bridge.node, 0.0) + gain
            for passage, share in self.title_passages(bridge.node, settings) if settings.title_passages > 0 else ():
                seeds.passages[passage] = seeds.passages.get(passage, 0.0) + settings.title_passages * share * gain
        seeds.bridges = found

    def title_passages(self, node: int, settings: BridgeSettings) -> list[tuple[int, float]]:
        """``(passage node, share)``: the passages entity ``node`` titles (share 1), or, when it titles none, those
        of its closest neighbour that titles one, if their names embed at least ``synonym_threshold`` apart
        (share ``synonym_titles x cosine``): "Nixon" for the passage "Richard Nixon"."""
        if node in self.titled:
            return [(p, 1.0) for p in self.titled[node]]
        if self._adjacency is None or self._entity_vectors is None or settings.synonym_titles <= 0:
            return []
        neighbours = self._adjacency.indices[self._adjacency.indptr[node]:self._adjacency.indptr[node + 1]]
        neighbours = neighbours[neighbours < len(self._titles)]  # entity nodes (passage nodes come after)
        titles = neighbours[self._titles[neighbours]]
        if not titles.size:
            return []
        cosines = np.asarray(self._entity_vectors[titles], dtype=np.float32) @ np.asarray(
            self._entity_vectors[node], dtype=np.float32)
        best = int(np.argmax(cosines))  # the first of equals: the lowest node
        if float(cosines[best]) < self.synonym_threshold:
            return []
        return [(p, settings.synonym_titles * float(cosines[best])) for p in self.titled[int(titles[best])]]

    def each_seed(self, query_vector: np.ndarray, seeds: Sequence[int], settings: BridgeSettings) -> list[Bridge]:
        """Bridges from each seed on its own (one hop, the best proposition, never to another seed),
        strongest activation per entity."""
        one = replace(settings, top=1, hops=1)
        best: dict[int, Bridge] = {}
        for seed in seeds:
            for bridge in self.bridges(query_vector, [seed], one, avoid=[n for n in seeds if n != seed]):
                if bridge.node not in best or bridge.score > best[bridge.node].score:
                    best[bridge.node] = bridge
        return list(best.values())


def _title_facts(fact_passage: np.ndarray, passage_key: dict[str, int], titles: Sequence[tuple[int, str]],
                 entity_facts: sp.csr_matrix) -> tuple[sp.csr_matrix | None, sp.csr_matrix | None]:
    """``(title node x fact, fact x title node)`` incidence of the facts of the passages each title node titles,
    without the facts that name their title already; ``(None, None)`` when there are none. ``fact_passage``: a
    key of each fact's passage; ``passage_key``: passage id -> that key."""
    if not len(titles) or not len(fact_passage):
        return None, None
    keys, fact_position = np.unique(fact_passage, return_inverse=True)  # the facts' passages, 0 .. len(keys) - 1
    title_entity = np.fromiter((int(e) for e, _ in titles), np.int64, count=len(titles))
    title_key = np.fromiter((passage_key.get(p, -1) for _, p in titles), np.int64, count=len(titles))
    title_passage = np.minimum(np.searchsorted(keys, title_key), len(keys) - 1)
    keep = (keys[title_passage] == title_key) & (title_key >= 0)  # titles of passages that have facts
    # passage -> its facts (CSR over passage positions), then every (title node, fact of its passage)
    order = np.argsort(fact_position, kind="stable")
    bounds = np.searchsorted(fact_position[order], np.arange(len(keys) + 1))
    starts, stops = bounds[title_passage[keep]], bounds[title_passage[keep] + 1]
    entity = np.repeat(title_entity[keep], stops - starts)
    fact = order[np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)] or [np.zeros(0, np.int64)])]
    pairs = sp.csr_matrix((np.ones(entity.size, np.float32), (entity, fact)), shape=entity_facts.shape)
    pairs.sum_duplicates()
    pairs = pairs - pairs.multiply(entity_facts > 0)  # a fact that names its title already needs no title edge
    pairs.eliminate_zeros()
    if not pairs.nnz:
        return None, None
    pairs.data[:] = 1.0
    return pairs.tocsr(), pairs.T.tocsr()


def load_bridge(index: LoadedIndex, graph: EntityGraph, embedder: Embedder, aids: dict[str, Any] | None = None, *,
                title_weight: float, synonym_threshold: float) -> PropositionBridge:
    """Bridging over the graph's facts of a loaded index (with facts), with its stored proposition vectors
    where it has them; facts without a stored vector are embedded now (with a warning). ``title_weight``: the
    graph's (its ``settings``), from which its title edges are read (:meth:`EntityGraph.titled`).

    ``aids`` is the graph's ``query_aids`` record: with its fact rows (:func:`~sirerag.graph.query_aids.load_fact_rows`)
    the vectors are taken from the memory-mapped ``propositions.npy`` without reading the propositions."""
    from sirerag.graph.query_aids import load_fact_rows
    from sirerag.graph.store import GRAPH_DIR
    from sirerag.pool.store import PROPOSITIONS
    from sirerag.trees.proposition_vectors import PROPOSITION_VECTORS, load_proposition_vectors, vectors_for

    titles = graph.titled(title_weight)
    nodes = {"titles": titles, "passage_index": graph.passage_index, "adjacency": graph.adjacency,
             "entity_vectors": graph.entity_embeddings, "synonym_threshold": synonym_threshold}
    if len(graph.facts) and len(graph.fact_embeddings) == len(graph.facts):  # stored with the graph
        return PropositionBridge(graph.facts, graph.fact_embeddings, graph.entity_passages, **nodes)
    component, record = index.manifest.component("proposition_vectors"), index.manifest.files.get(PROPOSITIONS)
    stored_rows = component.rows if component is not None else None
    if aids and stored_rows is not None and record is not None:
        with index.reading():  # the rows of the loaded commit
            rows = load_fact_rows(index.path / GRAPH_DIR, aids, facts=len(graph.facts),
                                  propositions_sha256=record.sha256, vectors=stored_rows)
            if rows is not None:
                vectors = load_npy(index.path / PROPOSITION_VECTORS, mmap=True)
                if vectors.ndim == 2 and vectors.shape[0] == stored_rows:
                    return PropositionBridge(graph.facts, vectors, graph.entity_passages, rows=rows, **nodes)
    props = list(index.propositions())
    with index.reading():  # the vectors of the loaded commit
        stored = load_proposition_vectors(index.path, len(props))
    known = {p.id: r for p, r in zip(props, stored)} if stored is not None else {}
    if not known:
        logger.warning("%s: no stored proposition vectors; embedding %d facts for bridging (rebuild the index to "
                       "store them)", index.path, len(graph.facts))
    # a fact is a proposition with entities: its id is the proposition's
    return PropositionBridge(graph.facts, vectors_for(graph.facts, known, embedder), graph.entity_passages,
                             **nodes)
