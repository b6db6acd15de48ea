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
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from sirerag.core.config import GraphConfig
from sirerag.core.config.retrieval import BridgeSettings
from sirerag.graph.build import GraphFact
from sirerag.graph.chain import Chain, Rest
from sirerag.graph.facts import FactTable, fact_arrays
from sirerag.graph.titles import TitleFacts, TitleMap
from sirerag.graph.linking import Bridge, Seeds

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
        title_nodes: the same edges as two arrays, ``(entity nodes, passage nodes)``
            (:meth:`EntityGraph.title_edges`), instead of ``titles``; needs ``passage_index`` or a saved
            graph's facts, which give the passages' nodes.
        passage_index: passage id -> node (:attr:`EntityGraph.passage_index`): with it, a bridged entity's
            titled passages get reset weight of their own (``title_passages``; none without it).
        adjacency, entity_vectors, synonym_threshold: the graph's adjacency and entity embeddings and its
            synonym threshold: a bridged entity that titles nothing gives the passage of its closest neighbour
            title at or above the threshold a share of its weight (``synonym_titles``; none without them).
    """

    def __init__(self, facts: Sequence[GraphFact], vectors: np.ndarray, entity_passages: np.ndarray,
                 rows: np.ndarray | None = None, titles: Sequence[tuple[int, str]] = (),
                 title_nodes: tuple[np.ndarray, np.ndarray] | None = None,
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
        # a passage's key: its node when the nodes are known (a saved graph's facts, or ``passage_index``)
        ad_hoc: dict[str, int] = {}
        if isinstance(facts, FactTable):  # a saved graph's facts: their arrays, no fact parsed
            self._named_indptr, self._named = facts.indptr, facts.nodes
            fact_passage = facts.passage_nodes
        else:
            self._named_indptr, self._named, _ = fact_arrays(facts, {})
            fact_passage = np.fromiter((ad_hoc.setdefault(f.passage, len(ad_hoc)) if passage_index is None
                                        else passage_index.get(f.passage, -1) for f in facts), np.int64,
                                       count=len(facts))
        by_node = isinstance(facts, FactTable) or passage_index is not None
        named = sp.csr_matrix((np.ones(len(self._named), np.float32), self._named, self._named_indptr),
                              shape=(len(facts), n_entities))  # fact x entity, as stored
        self.entity_facts = named.T.tocsr()
        if title_nodes is not None:
            if not by_node:
                raise ValueError("title edges given by passage node need passage_index or a saved graph's facts")
            title_entity, title_passage = (np.asarray(a, dtype=np.int64) for a in title_nodes)
        else:
            passage_key: Mapping[str, int] = ad_hoc
            if passage_index is not None:
                passage_key = passage_index
            elif isinstance(facts, FactTable):
                passage_key = facts.passage_nodes_by_id
            title_entity = np.fromiter((int(e) for e, _ in titles), np.int64, count=len(titles))
            title_passage = np.fromiter((passage_key.get(p, -1) for _, p in titles), np.int64, count=len(titles))
        # None when no title node reaches a fact
        self.title_facts = TitleFacts(fact_passage, title_entity, title_passage, self._named_indptr, self._named) \
            if title_entity.size and len(facts) else None
        self._passage_index: Mapping[str, int] = passage_index or {}
        # entity node -> the passage nodes it titles (none without ``passage_index``)
        known = (title_passage >= 0) & (passage_index is not None)
        titled = TitleMap(title_entity[known], title_passage[known])
        self.titled: Mapping[int, list[int]] = titled
        self._titles = titled.mask(n_entities)  # the entity nodes that title a passage
        usable = adjacency is not None and entity_vectors is not None and len(entity_vectors) == n_entities
        self._adjacency, self._entity_vectors = (adjacency, entity_vectors) if usable else (None, None)
        self.synonym_threshold = float(synonym_threshold)

    def bridges(self, query_vector: np.ndarray, seeds: Sequence[int], settings: BridgeSettings,
                avoid: Sequence[int] = (), chain: Chain | None = None) -> list[Bridge]:
        """The entities reached from ``seeds`` (entity nodes), strongest activation per entity; the nodes in
        ``avoid`` are neither reached nor passed through. With ``chain`` (:mod:`sirerag.graph.chain`) each hop
        after the first is scored by what is left of the question along the branch that reached the frontier
        entity, and a branch with nothing left stops."""
        query = np.asarray(query_vector, dtype=np.float32)
        frontier = {int(n): 1.0 for n in seeds}
        rests = {n: chain.rest for n in frontier} if chain is not None else {}
        visited = set(frontier) | {int(n) for n in avoid}
        found: list[Bridge] = []
        for hop in range(1, settings.hops + 1):
            if not frontier:
                break
            groups: list[tuple[set[int], np.ndarray, Rest | None]] = [(set(frontier), query, None)]
            if chain is not None and hop > 1:
                groups = _rest_groups(frontier, rests, chain)
                if not groups:
                    break  # nothing is left of the question on any branch
            candidates, scores, group = self._ranked(groups, visited, settings)
            reached: dict[int, Bridge] = {}
            reached_rests: dict[int, Rest] = {}
            taken = 0
            for c, score, g in zip(candidates.tolist(), scores.tolist(), group.tolist()):
                if taken >= settings.top or score < settings.threshold:
                    break
                nodes, _, rest = groups[g]
                fact = self.facts[c]
                if rest is not None and chain is not None and chain.words and not rest.matches(fact.text):
                    continue  # shares no word with what is left of the question
                taken += 1
                naming = [e for e in fact.entities + self.title_nodes(c) if e in nodes]
                via = max(naming, key=lambda e: (frontier[e], -e))
                activation = frontier[via] * score
                for node in fact.entities:
                    if node in visited:
                        continue
                    if node not in reached or activation > reached[node].score * frontier[reached[node].via]:
                        reached[node] = Bridge(node=node, hop=hop, via=via, text=fact.text, score=score,
                                               passage=self._passage_index.get(fact.passage, -1))
                        if chain is not None:
                            reached_rests[node] = rests[via].after(fact.text)
            frontier = {n: frontier[b.via] * b.score for n, b in reached.items()}
            rests = reached_rests
            visited |= set(reached)
            found += reached.values()
        return found

    def _ranked(self, groups: Sequence[tuple[set[int], np.ndarray, Rest | None]], visited: set[int],
                settings: BridgeSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fact, score, group)`` of the propositions the frontier ``groups`` name that lead somewhere new,
        each scored by its group's vector (its best group when several name it), best first (equal scores:
        the lower fact first)."""
        parts = []
        for g, (nodes, vector, _) in enumerate(groups):
            rows = np.fromiter(nodes, dtype=np.int64, count=len(nodes))
            candidates = self.entity_facts[rows].indices
            if self.title_facts is not None and settings.titles:
                candidates = np.concatenate([candidates, self.title_facts.facts_of(rows)])
            candidates = np.unique(candidates)
            # only propositions that lead somewhere new compete for the ``top`` places
            candidates = candidates[[any(int(e) not in visited for e in self._named[self._named_indptr[c]:
                                                                                   self._named_indptr[c + 1]])
                                     for c in candidates]].astype(np.int64)
            scores = np.asarray(self.vectors[candidates if self.rows is None else self.rows[candidates]],
                                dtype=np.float32) @ vector
            parts.append((candidates, scores, np.full(candidates.size, g, dtype=np.int64)))
        candidates, scores, group = (np.concatenate(x) for x in zip(*parts))
        order = np.lexsort((group, candidates, -scores))
        _, first = np.unique(candidates[order], return_index=True)  # each fact once, at its best score
        order = order[np.sort(first)]
        return candidates[order], scores[order], group[order]

    def title_nodes(self, fact: int) -> tuple[int, ...]:
        """The title nodes through which ``fact`` is reached that it does not name itself (its passage's titles)."""
        return () if self.title_facts is None else self.title_facts.titles_of(fact)

    def add_to(self, seeds: Seeds, query_vector: np.ndarray, settings: BridgeSettings,
               chain: Chain | None = None) -> None:
        """Bridge from ``seeds``' entities and add the bridged entities to them (in place); ``chain``: hop by
        hop, each hop after the first scored by what is left of the question (a question that bridges fully)."""
        if settings.hops <= 0 or not seeds.entities:
            return
        weight = settings.weight
        if settings.max_seeds and len(seeds.entities) > settings.max_seeds:
            # a question naming several entities asks mostly about them (a comparison), and sometimes about
            # what each leads to ("the director of A or of B"): each seed bridges on its own, lightly
            if settings.seed_weight <= 0:
                return
            found = self.each_seed(query_vector, list(seeds.entities), settings, chain)
            weight *= settings.seed_weight
        else:
            found = self.bridges(query_vector, list(seeds.entities), settings, chain=chain)
        # hop order: a bridge's parent has its weight before the bridge; a bridge never outweighs its parent
        root: dict[int, int] = {}  # bridged entity -> the seed its chain starts from
        for bridge in found:
            root[bridge.node] = root.get(bridge.via, bridge.via)
            capped_by = bridge.via if settings.chain_decay or chain is None else root[bridge.node]
            parent = seeds.entities.get(capped_by, 0.0)
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

    def each_seed(self, query_vector: np.ndarray, seeds: Sequence[int], settings: BridgeSettings,
                  chain: Chain | None = None) -> list[Bridge]:
        """Bridges from each seed on its own (one hop, the best proposition, never to another seed; with ``chain``
        the best proposition per hop while something is left of the question), strongest activation per
        entity."""
        one = replace(settings, top=1, hops=settings.hops if chain is not None else 1)
        best: dict[int, Bridge] = {}
        for seed in seeds:
            for bridge in self.bridges(query_vector, [seed], one, avoid=[n for n in seeds if n != seed], chain=chain):
                if bridge.node not in best or bridge.score > best[bridge.node].score:
                    best[bridge.node] = bridge
        return list(best.values())


def _rest_groups(frontier: Mapping[int, float], rests: Mapping[int, Rest],
                 chain: Chain) -> list[tuple[set[int], np.ndarray, Rest | None]]:
    """The frontier entities grouped by what is left of the question along their branch, each group with the
    vector of its rest; an entity with nothing left is in none (its branch stops)."""
    vectors = chain.vectors([rests[n] for n in frontier])
    groups: dict[str, tuple[set[int], np.ndarray, Rest | None]] = {}
    for node in frontier:
        text = rests[node].text
        if text:
            groups.setdefault(text, (set(), vectors[text], rests[node]))[0].add(node)
    return list(groups.values())
