"""HippoRAG-style retrieval: Personalized PageRank over the index's entity graph.

A query is linked to the graph (``linking="ner"``: longest surface-form matches, then
HippoRAG v1's entities-to-nodes for the rest; ``"fact"``: HippoRAG 2's query-to-fact),
PageRank spreads the reset mass over entities and passages, and pool entries are
ranked by the mean mass of the passages they cover (an aggregate's entity node is not
counted). A pool of leaves is thereby ranked exactly like the passages; summaries and
aggregates are ranked from the same PageRank vector (and, over a full pool, arranged
by the pool rule of :mod:`~sirerag.retrievers.pool_rank`).

When linking finds no seed (no entity in the query, or every fact filtered out)
the query is answered by dense retrieval over the pool, as HippoRAG 2 does.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from sirerag.core.config import GraphConfig
from sirerag.core.config.retrieval import BridgeSettings, PoolRule, PPRSettings
from sirerag.core.errors import ConfigError, IndexFormatError, check
from sirerag.graph.build import EntityGraph
from sirerag.graph.chain import Chain, Rest
from sirerag.graph.entries import PassageLeaves, entry_node_matrix, entry_scores
from sirerag.graph.linking import Seeds, fact_seeds, reset_entries, surface_seeds, top_facts
from sirerag.graph.push import make_walk
from sirerag.graph.query_aids import seed_rows
from sirerag.graph.surface import uncovered
from sirerag.retrievers.base import Closing, Hit, SearchOne, check_query
from sirerag.retrievers.dense import index_embedder, top_k
from sirerag.retrievers.passage_seeds import PassageSeeder
from sirerag.core.types import Pool

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.graph.bridging import PropositionBridge
    from sirerag.graph.surface_table import FormTable
    from sirerag.llm.base import LLM
    from sirerag.pool.bm25 import LexicalIndex
    from sirerag.pool.loaded import LoadedIndex

logger = logging.getLogger(__name__)

class PPRRetriever(SearchOne, Closing):
    """Personalized PageRank retriever over a pool and its entity graph.

    Args:
        graph: the entity graph (with entity and fact embeddings).
        pool: the retrieval pool whose entries are ranked.
        embedder: the embedder the index was built with.
        settings: the retriever's settings (:class:`~sirerag.core.config.retrieval.PPRSettings`; its pool rule is
            applied by :func:`~sirerag.retrievers.load_retriever`, not here); None: the defaults.
        tagger: for ``ner`` linking, a function from a query to its normalised entities
            (the build's offline entity tagger).
        llm: optional LLM for the recognition filter of ``fact`` linking.
        surface_forms: the stored surface forms of the entities (``ner`` linking with ``surface``); None: computed.
        seeds_lexical: the stored BM25 index of the passage seeds; None: computed.
        bridge: query-conditioned bridging through propositions
            (:class:`~sirerag.graph.bridging.PropositionBridge`, ``ner`` linking), run with ``settings.bridge``;
            off when None.
        pool_nodes: the pool's entry-node pairs and seed rows as the build stored them
            (:func:`~sirerag.graph.query_aids.load_pool_nodes`); None: computed here.
        **options: search options that replace fields of ``settings`` (``passage_weight=0.1``...).
        name_embedder: the embedder of the graph's entity names when it is not ``embedder``
            (``graph.name_vectors``, :func:`~sirerag.graph.store.load_name_embedder`); a query's unmatched
            entities are embedded with it.
    """

    name = "ppr"

    def __init__(self, graph: EntityGraph, pool: Pool, embedder: Embedder, settings: PPRSettings | None = None, *,
                 tagger: Callable[[str], Sequence[str]] | None = None, llm: LLM | None = None,
                 surface_forms: Sequence[tuple[str, int]] | Mapping[str, int] | FormTable | None = None,
                 seeds_lexical: LexicalIndex | None = None, bridge: PropositionBridge | None = None,
                 pool_nodes: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None,
                 name_embedder: Embedder | None = None,
                 **options: Any) -> None:  # Any: PPRSettings' fields, of several types, validated
        settings = (settings or PPRSettings()).with_options(**options)
        linking = settings.linking
        check(linking != "ner" or tagger is not None, "tagger", tagger, "an entity tagger for linking='ner'")
        if graph.entity_embeddings.shape[1] not in (0, embedder.dim) or pool.embeddings.shape[1] != embedder.dim:
            raise ConfigError(f"the embedder {embedder.spec} (dim {embedder.dim}) is not the one the index was "
                              "built with: search with the index embedder")
        if linking == "fact" and graph.facts and graph.fact_embeddings.shape[0] != len(graph.facts):
            logger.warning("embedding %d facts for fact linking (build with graph.embed_facts = true to store them)",
                           len(graph.facts))
            graph = replace(graph, fact_embeddings=np.asarray(
                embedder.encode_documents([f.text for f in graph.facts]), dtype=np.float32))
        self.settings = settings
        self.graph, self.pool, self.embedder = graph, pool, embedder
        self.name_embedder = name_embedder or embedder  # the embedder of the graph's entity names
        self.linking, self.tagger, self.passage_weight = linking, tagger, settings.passage_weight
        self.top_facts, self.top_entities = settings.top_facts, settings.top_entities
        recorded = GraphConfig()  # PageRank settings not given: the build's defaults
        self.pagerank = make_walk(graph.adjacency, settings.walk,
                                  damping=recorded.damping if settings.damping is None else settings.damping,
                                  tol=recorded.tol if settings.tol is None else settings.tol,
                                  max_iter=recorded.max_iter if settings.max_iter is None else settings.max_iter,
                                  push_tol=settings.push_tol)
        self.recognition = None
        if llm is not None:
            from sirerag.graph.recognition import RecognitionFilter

            self.recognition = RecognitionFilter(llm)
        pairs, seeds = pool_nodes if pool_nodes is not None else (None, None)
        self.entry_nodes = entry_node_matrix(pool, graph, pairs)
        self.passage_leaves = PassageLeaves(pool, graph, self.entry_nodes)  # for the pool rule's lifts
        self.ids = list(pool.ids)
        rows, nodes = seeds if seeds is not None else seed_rows(pool, graph.passage_index)
        leaf_passages = nodes - graph.n_entities
        self.surface = None
        if linking == "ner" and settings.surface:
            from sirerag.graph.surface import SurfaceIndex

            self.surface = SurfaceIndex(graph.entities, forms=surface_forms)
        bm25 = None
        if settings.passage_seeds == "dense+bm25" and settings.passage_weight > 0 and settings.bm25_share > 0:
            from sirerag.retrievers.bm25 import BM25Retriever

            bm25 = BM25Retriever([self.ids[i] for i in rows],
                                 None if seeds_lexical is not None else [pool.entries[i].text for i in rows],
                                 lexical=seeds_lexical)
        self.seeder = PassageSeeder(rows, leaf_passages, len(graph.passages), bm25, settings.bm25_share)
        self.fallbacks = 0
        self.bridge = bridge if settings.bridge.hops > 0 and linking == "ner" else None
        self.residual = None  # the passages of seeds and bridges ranked by what is left of the question
        if self.bridge is not None and settings.bridge.residual > 0:
            from sirerag.graph.residual import residual_passages

            self.residual = residual_passages(graph, pool, rows, leaf_passages, self.bridge, settings.bridge)

    @property
    def bridge_settings(self) -> BridgeSettings:
        """How far and how wide bridging goes (``settings.bridge``)."""
        return self.settings.bridge

    # -- linking ---------------------------------------------------------------------------------
    def passage_scores(self, entry_scores: np.ndarray) -> np.ndarray:
        """Dense score of every passage node: the best score of its leaf entries."""
        return self.seeder.passage_scores(entry_scores[self.seeder.rows])

    def seed_scores(self, query: str, entry_scores: np.ndarray) -> np.ndarray:
        """Passage seed scores: min-max dense, mixed with min-max BM25 (``bm25_share``)."""
        return self.seeder.seed_scores(query, entry_scores[self.seeder.rows])

    def link(self, queries: Sequence[str], query_embeddings: np.ndarray) -> list[Seeds]:
        """Seeds of each query (entity weights and the facts used)."""
        if self.linking == "ner" and self.tagger is not None:  # ner linking always has one (checked at init)
            tagger = self.tagger
            found = [list(dict.fromkeys(e for e in tagger(q) if e)) for q in queries]
            matched = [self.surface.match(q) if self.surface is not None else [] for q in queries]
            found = [uncovered(q, ents, m) for q, ents, m in zip(queries, found, matched)]
            flat = [e for ents in found for e in ents]
            names = self.name_embedder
            emb = names.encode_documents(flat) if flat else np.zeros((0, names.dim), np.float32)
            out, linked, start = [], [], 0
            for q, ents, m, vector in zip(queries, found, matched, query_embeddings):
                seeds = surface_seeds(self.graph, [(x.text, x.node) for x in m], ents, emb[start:start + len(ents)])
                linked.append([x.text for x in m] + ents)
                if self.bridge is not None:
                    self.bridge.add_to(seeds, vector, self.bridge_settings, self.chain(q, linked[-1]))
                out.append(seeds)
                start += len(ents)
            if self.residual is not None:
                self.residual.add_to(out, queries, linked, query_embeddings, self.bridge_settings,
                                     self.embedder.encode_queries)
            return out
        candidates = [top_facts(self.graph, q, self.top_facts) for q in query_embeddings]
        kept = candidates
        if self.recognition is not None:
            texts = [[self.graph.facts[i].text for i, _ in cands] for cands in candidates]
            chosen = self.recognition.filter_many(queries, texts)
            kept = [[cands[j] for j in pick] for cands, pick in zip(candidates, chosen)]
        out = []
        for cands, facts in zip(candidates, kept):
            seeds = fact_seeds(self.graph, facts, self.top_entities)
            seeds.candidates = cands
            out.append(seeds)
        return out

    def chain(self, query: str, names: Sequence[str]) -> Chain | None:
        """Hop-by-hop bridging of ``query`` whose linked names are ``names`` (``bridge_chain``), else None."""
        if not self.bridge_settings.chain:
            return None
        return Chain(Rest.of(query, names), self.embedder.encode_queries, words=self.bridge_settings.chain_words)

    # -- search ----------------------------------------------------------------------------------
    def node_scores(self, queries: Sequence[str]) -> tuple[np.ndarray | None, list[Seeds], np.ndarray]:
        """PageRank over all nodes ``(n_nodes, n_queries)`` (None when no query has seeds),
        the seeds, and the dense entry scores ``(n_queries, n_entries)``."""
        q = self.embedder.encode_queries(list(queries))
        mass, seeds = self._walk(queries, q)
        return mass, seeds, q @ self.pool.embeddings.T

    def _walk(self, queries: Sequence[str], q: np.ndarray) -> tuple[np.ndarray | None, list[Seeds]]:
        seeds = self.link(queries, q)
        walked = [i for i, s in enumerate(seeds) if s.entities]
        if not walked:
            return None, seeds
        leaf = self.seeder.leaf_dense(q[walked], self.pool.embeddings)
        mass = self.pagerank.run_entries([reset_entries(self.graph, seeds[i], self.seeder.seed_scores(queries[i], row),
                                                        self.passage_weight) for i, row in zip(walked, leaf)])
        return mass, seeds

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        check_query(queries, batch=True)
        if not len(queries):
            return []
        q = self.embedder.encode_queries(list(queries))
        mass, seeds = self._walk(queries, q)
        entry_mass = entry_scores(mass, self.entry_nodes) if mass is not None else np.zeros((len(self.ids), 0))
        results, column = [], 0
        for i, s in enumerate(seeds):
            if s.entities:  # then PageRank ran: one column of mass per query with seeds
                scores = entry_mass[:, column]
                column += 1
            else:
                self.fallbacks += 1
                scores = q[i] @ self.pool.embeddings.T
            order = top_k(scores, k)
            results.append([Hit(self.ids[j], float(scores[j])) for j in order])
        return results


#: what :func:`load` takes besides the settings: objects, not values (the embedder, an entity tagger, an LLM)
OBJECTS = ("embedder", "tagger", "fact_filter")
#: the options of :func:`load` (read by :func:`~sirerag.retrievers.registry.options_of`): :data:`OBJECTS` and the
#: fields of :class:`~sirerag.core.config.retrieval.PPRSettings` but its pool rule (which
#: :func:`~sirerag.retrievers.load_retriever` applies to every retriever)
OPTIONS = frozenset(OBJECTS) | frozenset(PPRSettings.option_names()) - frozenset(PoolRule.option_names())


def load(index: LoadedIndex, *, embedder: Embedder | None = None, tagger: Callable[[str], Sequence[str]] | None = None,
         fact_filter: LLM | str | None = None,
         **options: Any) -> PPRRetriever:  # Any: PPRSettings' fields, of several types, validated
    """PPR retriever over a loaded index built with ``--graph``.

    ``options`` are the fields of :class:`~sirerag.core.config.retrieval.PPRSettings` (``linking``,
    ``passage_weight``, ``bridge_hops``...; None or absent: the default, docs/ppr.md "Settings"); the PageRank
    ``damping``, ``tol`` and ``max_iter`` default to the values recorded with the graph. ``fact_filter``: an LLM,
    or an LLM spec such as ``hf:smollm2``, for the recognition filter of ``fact`` linking (calls are cached in
    ``<index>/cache/llm``); ``tagger``: the query entity tagger (default: the build's).

    Raises:
        ConfigError: an unknown option, or a value of the wrong type or range (before anything is read).
        IndexFormatError: the index has no entity graph.
    """
    from sirerag.graph.bridge_load import load_bridge
    from sirerag.graph.store import GRAPH_DIR, load_graph
    from sirerag.pool.current import check_current
    from sirerag.retrievers.ppr_aids import load_aids

    settings = PPRSettings.from_options(**options)
    linking = settings.linking

    folder = index.component("graph")
    if folder is None:
        raise IndexFormatError(f"{index.path} has no entity graph: rebuild it with `sirerag build --graph`")
    check_current(index, "graph")
    bridging = settings.bridge.hops > 0 and linking == "ner"
    with index.reading():  # graph/ of the commit the pool came from, or IndexChangedError
        index.check_arrays(f"{GRAPH_DIR}/")  # a same-size damaged array, by its sample checksum
        graph, meta = load_graph(folder, facts=linking == "fact" or bridging)  # facts: linking, bridging
    aids = meta.query_aids
    check_current(index, "graph", query_aids=aids)
    recorded = meta.settings.recorded()
    # PageRank settings not given: the values recorded with the graph
    settings = settings.with_options(**{name: recorded[name] for name in ("damping", "tol", "max_iter")
                                        if getattr(settings, name) is None})
    kwargs: dict[str, Any] = {}
    embedder = index_embedder(index, embedder)
    with index.reading():  # the stored query aids of the same commit
        kwargs.update(load_aids(index, folder, aids, graph, linking=linking, tagger=tagger,
                                surface=settings.surface, passage_seeds=settings.passage_seeds))
    tagger = kwargs.pop("tagger", tagger)
    missing = [name for name, key in (("seed BM25 index", "seeds_lexical"), ("surface forms", "surface_forms"))
               if key in kwargs and kwargs[key] is None]
    if missing:
        logger.info("%s: the graph has no stored %s for this pool (it was stored for the index's full pool); "
                    "computing them now",
                    index.path, " or ".join(missing))
    if isinstance(fact_filter, str):
        from sirerag.llm.factory import load_llm

        fact_filter = load_llm(fact_filter, cache_dir=index.path / "cache" / "llm")
    if bridging:
        # the title edges (bridging through a title's passage, ``bridge_titles``, is checked per search; the
        # passages bridged entities or their synonyms title) and the synonym threshold, as the graph was built
        kwargs["bridge"] = load_bridge(index, graph, embedder, aids, title_weight=float(recorded["title_weight"]),
                                       synonym_threshold=float(recorded["synonym_threshold"]))
    if linking == "ner":
        from sirerag.graph.store import load_name_embedder

        kwargs["name_embedder"] = load_name_embedder(meta)
    return PPRRetriever(graph, index.pool, embedder, settings, tagger=tagger, llm=fact_filter, **kwargs)

