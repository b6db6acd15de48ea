"""HippoRAG-style retrieval: Personalized PageRank over the index's entity graph.

A query is linked to the graph (``linking="ner"``: longest surface-form matches, then
HippoRAG v1's entities-to-nodes for the rest; ``"fact"``: HippoRAG 2's query-to-fact),
PageRank spreads the reset mass over entities and passages, and pool entries are
ranked by the mass of the passages they cover (``entry_score="mean"``: the mean over
their passages, without the entity node of an aggregate). A pool of leaves is thereby ranked exactly like the passages; summaries and
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

from sirerag.core.errors import ConfigError, IndexFormatError, check
from sirerag.graph.build import EntityGraph
from sirerag.graph.entries import ENTRY_SCORES, entry_node_matrix, entry_scores
from sirerag.graph.linking import Seeds, fact_seeds, min_max, reset_vector, surface_seeds, top_facts
from sirerag.graph.ppr import PersonalizedPageRank
from sirerag.graph.query_aids import seed_rows
from sirerag.graph.surface import uncovered
from sirerag.retrievers.base import Closing, Hit, check_query
from sirerag.retrievers.dense import index_embedder, top_k
from sirerag.core.types import Pool

if TYPE_CHECKING:
    from sirerag.pool.store import LoadedIndex

logger = logging.getLogger(__name__)

LINKING = ("fact", "ner")
#: how passage seeds are scored: the dense score, or dense and BM25 min-max normalised and mixed
PASSAGE_SEEDS = ("dense", "dense+bm25")
#: passage seed weight by linking mode when none is given (HippoRAG 2 / HippoRAG v1)
DEFAULT_PASSAGE_WEIGHT = {"fact": 0.05, "ner": 0.05}


class PPRRetriever(Closing):
    """Personalized PageRank retriever over a pool and its entity graph.

    Args:
        graph: the entity graph (with entity and fact embeddings).
        pool: the retrieval pool whose entries are ranked.
        embedder: the embedder the index was built with.
        linking: ``ner`` (surface matches, then HippoRAG v1's NER to node; the default) or ``fact`` (HippoRAG 2).
        tagger: for ``ner``, a function from a query to its normalised entities
            (the build's offline entity tagger).
        llm: optional LLM for the recognition filter of ``fact`` linking.
        damping, tol, max_iter: PageRank settings.
        passage_weight: factor of the dense passage scores in the reset vector
            (default 0.05 for ``fact``, 0 for ``ner``).
        top_facts: facts retrieved per query (``fact``).
        top_entities: entity seeds kept (``fact``).
        surface: for ``ner``, link longest surface-form matches first (graph v2).
        passage_seeds: ``dense+bm25`` (default) or ``dense`` passage seed scores.
        bm25_share: BM25's share of the passage seed score.
        entry_score: ``mean`` (the mean mass of its passages; the default), ``max`` (its
            best passage) or ``entity`` (the mean over its passages and its entity node).
        bridge, bridge_settings: query-conditioned bridging through propositions
            (:class:`~sirerag.graph.bridging.PropositionBridge`), for ``ner`` linking; off when None.
        pool_nodes: the pool's entry-node pairs and seed rows as the build stored them
            (:func:`~sirerag.graph.query_aids.load_pool_nodes`); None: computed here.
        name_embedder: the embedder of the graph's entity names when it is not ``embedder``
            (``graph.name_vectors = "static"``); a query's unmatched entities are embedded with it.
    """

    name = "ppr"

    def __init__(self, graph: EntityGraph, pool: Pool, embedder: Any, *, linking: str = "ner",
                 tagger: Callable[[str], Sequence[str]] | None = None, llm: Any | None = None,
                 damping: float = 0.5, tol: float = 1e-6, max_iter: int = 100,
                 passage_weight: float | None = None, top_facts: int = 5, top_entities: int = 5,
                 surface: bool = True, passage_seeds: str = "dense+bm25", bm25_share: float = 0.5,
                 entry_score: str = "mean", surface_forms: Sequence[tuple[str, int]] | Mapping[str, int] | None = None,
                 seeds_lexical: Any | None = None, bridge: Any | None = None,
                 bridge_settings: Any | None = None,
                 pool_nodes: tuple[np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None,
                 name_embedder: Any | None = None) -> None:
        check(linking in LINKING, "linking", linking, f"one of {LINKING}")
        check(linking != "ner" or tagger is not None, "tagger", tagger, "an entity tagger for linking='ner'")
        weight = DEFAULT_PASSAGE_WEIGHT[linking] if passage_weight is None else float(passage_weight)
        check(weight >= 0, "passage_weight", passage_weight, "a number >= 0")
        check(isinstance(top_facts, int) and top_facts >= 1, "top_facts", top_facts, "an integer >= 1")
        check(isinstance(top_entities, int) and top_entities >= 1, "top_entities", top_entities, "an integer >= 1")
        check(passage_seeds in PASSAGE_SEEDS, "passage_seeds", passage_seeds, f"one of {PASSAGE_SEEDS}")
        check(0.0 <= float(bm25_share) <= 1.0, "bm25_share", bm25_share, "a number in [0, 1]")
        check(entry_score in ENTRY_SCORES, "entry_score", entry_score, f"one of {ENTRY_SCORES}")
        if graph.entity_embeddings.shape[1] not in (0, embedder.dim) or pool.embeddings.shape[1] != embedder.dim:
            raise ConfigError(f"the embedder {embedder.spec} (dim {embedder.dim}) is not the one the index was "
                              "built with: search with the index embedder")
        if linking == "fact" and graph.facts and graph.fact_embeddings.shape[0] != len(graph.facts):
            logger.warning("embedding %d facts for fact linking (build with graph.embed_facts = true to store them)",
                           len(graph.facts))
            graph = replace(graph, fact_embeddings=np.asarray(
                embedder.encode_documents([f.text for f in graph.facts]), dtype=np.float32))
        self.graph, self.pool, self.embedder = graph, pool, embedder
        self.name_embedder = name_embedder or embedder  # the embedder of the graph's entity names
        self.linking, self.tagger, self.passage_weight = linking, tagger, weight
        self.top_facts, self.top_entities = top_facts, top_entities
        self.pagerank = PersonalizedPageRank(graph.adjacency, damping=damping, tol=tol, max_iter=max_iter)
        self.recognition = None
        if llm is not None:
            from sirerag.graph.recognition import RecognitionFilter

            self.recognition = RecognitionFilter(llm)
        self.entry_score = entry_score
        pairs, seeds = pool_nodes if pool_nodes is not None else (None, None)
        self.entry_nodes = entry_node_matrix(pool, graph, with_entity=entry_score == "entity",
                                             pairs=None if entry_score == "entity" else pairs)
        self.ids = [e.id for e in pool.entries]
        rows, nodes = seeds if seeds is not None else seed_rows(pool, graph.passage_index)
        self._leaf_rows, self._leaf_passages = rows, nodes - graph.n_entities
        self.surface = None
        if linking == "ner" and surface:
            from sirerag.graph.surface import SurfaceIndex

            self.surface = SurfaceIndex(graph.entities, forms=surface_forms)
        self.bm25, self.bm25_share = None, float(bm25_share)
        if passage_seeds == "dense+bm25" and weight > 0 and bm25_share > 0:
            from sirerag.retrievers.bm25 import BM25Retriever

            self.bm25 = BM25Retriever([self.ids[i] for i in rows],
                                      None if seeds_lexical is not None else [pool.entries[i].text for i in rows],
                                      lexical=seeds_lexical)
        self.fallbacks = 0
        self.bridge, self.bridge_settings = bridge, bridge_settings

    # -- linking ---------------------------------------------------------------------------------
    def passage_scores(self, entry_scores: np.ndarray) -> np.ndarray:
        """Dense score of every passage node: the best score of its leaf entries."""
        scores = np.full(len(self.graph.passages), -np.inf)
        np.maximum.at(scores, self._leaf_passages, entry_scores[self._leaf_rows])
        missing = ~np.isfinite(scores)
        if missing.all():
            return np.zeros_like(scores)
        scores[missing] = scores[~missing].min()
        return scores

    def seed_scores(self, query: str, entry_scores: np.ndarray) -> np.ndarray:
        """Passage seed scores: min-max dense, mixed with min-max BM25 (``bm25_share``)."""
        dense = min_max(self.passage_scores(entry_scores))
        if self.bm25 is None:
            return dense
        lexical = np.zeros(len(self.graph.passages))
        np.maximum.at(lexical, self._leaf_passages, self.bm25.scores(query))
        return (1.0 - self.bm25_share) * dense + self.bm25_share * min_max(lexical)

    def link(self, queries: Sequence[str], query_embeddings: np.ndarray) -> list[Seeds]:
        """Seeds of each query (entity weights and the facts used)."""
        if self.linking == "ner":
            found = [list(dict.fromkeys(e for e in self.tagger(q) if e)) for q in queries]
            matched = [self.surface.match(q) if self.surface is not None else [] for q in queries]
            found = [uncovered(q, ents, m) for q, ents, m in zip(queries, found, matched)]
            flat = [e for ents in found for e in ents]
            names = self.name_embedder
            emb = names.encode_documents(flat) if flat else np.zeros((0, names.dim), np.float32)
            out, start = [], 0
            for ents, m, vector in zip(found, matched, query_embeddings):
                seeds = surface_seeds(self.graph, [(x.text, x.node) for x in m], ents, emb[start:start + len(ents)])
                if self.bridge is not None:
                    self.bridge.add_to(seeds, vector, self.bridge_settings)
                out.append(seeds)
                start += len(ents)
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

    # -- search ----------------------------------------------------------------------------------
    def node_scores(self, queries: Sequence[str]) -> tuple[np.ndarray | None, list[Seeds], np.ndarray]:
        """PageRank over all nodes ``(n_nodes, n_queries)`` (None when no query has seeds),
        the seeds, and the dense entry scores ``(n_queries, n_entries)``."""
        q = self.embedder.encode_queries(list(queries))
        dense = q @ self.pool.embeddings.T
        seeds = self.link(queries, q)
        resets = []
        for query, row, s in zip(queries, dense, seeds):
            if s.entities:
                resets.append(reset_vector(self.graph, s, self.seed_scores(query, row), self.passage_weight))
        mass = self.pagerank.run(np.stack(resets, axis=1)) if resets else None
        return mass, seeds, dense

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        check_query(queries, batch=True)
        if not len(queries):
            return []
        mass, seeds, dense = self.node_scores(queries)
        entry_mass = entry_scores(mass, self.entry_nodes, self.entry_score) if mass is not None else None
        results, column = [], 0
        for i, s in enumerate(seeds):
            if s.entities:
                scores = entry_mass[:, column]
                column += 1
            else:
                self.fallbacks += 1
                scores = dense[i]
            order = top_k(scores, k)
            results.append([Hit(self.ids[j], float(scores[j])) for j in order])
        return results


def load(index: LoadedIndex, *, embedder: Any | None = None, linking: str = "ner", fact_filter: Any | None = None,
         tagger: Callable[[str], Sequence[str]] | None = None, damping: float | None = None, tol: float | None = None,
         max_iter: int | None = None, passage_weight: float | None = None, top_facts: int | None = None,
         top_entities: int | None = None, surface: bool | None = None, passage_seeds: str | None = None,
         bm25_share: float | None = None, entry_score: str | None = None, bridge_hops: int | None = None,
         bridge_top: int | None = None, bridge_threshold: float | None = None, bridge_weight: float | None = None,
         bridge_max_seeds: int | None = None, bridge_seed_weight: float | None = None,
         bridge_titles: bool | None = None, bridge_specificity: float | None = None,
         bridge_title_passages: float | None = None, bridge_synonym_titles: float | None = None) -> PPRRetriever:
    """PPR retriever over a loaded index built with ``--graph``.

    Options: ``linking`` (``fact``/``ner``), ``fact_filter`` (an LLM, or an LLM spec such
    as ``hf:smollm2``, for the recognition filter of ``fact`` linking; calls are cached in
    ``<index>/cache/llm``), ``damping``, ``tol``, ``max_iter`` (default: the values
    recorded with the graph), ``passage_weight``, ``top_facts``, ``top_entities``,
    ``surface``, ``passage_seeds``, ``bm25_share``, ``entry_score`` (see :class:`PPRRetriever`);
    ``bridge_hops`` (0 = off; default 2 when the index stores its proposition vectors), ``bridge_top``,
    ``bridge_threshold``, ``bridge_weight``, ``bridge_max_seeds``, ``bridge_seed_weight``, ``bridge_titles``,
    ``bridge_specificity``, ``bridge_title_passages``, ``bridge_synonym_titles`` (defaults:
    :class:`~sirerag.graph.bridging.BridgeSettings`):
    query-conditioned bridging through propositions (:mod:`sirerag.graph.bridging`, ``ner`` linking).

    Raises:
        IndexFormatError: the index has no entity graph.
    """
    from sirerag.graph.bridging import BridgeSettings, load_bridge
    from sirerag.graph.store import GRAPH_DIR, load_graph
    from sirerag.retrievers.ppr_aids import load_aids

    folder = index.component("graph")
    if folder is None:
        raise IndexFormatError(f"{index.path} has no entity graph: rebuild it with `sirerag build --graph`")
    with index.reading():  # graph/ of the commit the pool came from, or IndexChangedError
        index.check_arrays(f"{GRAPH_DIR}/")  # a same-size damaged array, by its sample checksum
        settings_b = BridgeSettings.from_options(bridge_hops, bridge_top, bridge_threshold, bridge_weight,
                                                 bridge_max_seeds, bridge_seed_weight, bridge_titles,
                                                 bridge_specificity, bridge_title_passages, bridge_synonym_titles)
        if bridge_hops is None and settings_b.hops and index.manifest.component("proposition_vectors") is None:
            logger.info("%s: no stored proposition vectors (an older build): PPR runs without bridging", index.path)
            settings_b = BridgeSettings(hops=0)
        graph, meta = load_graph(folder, facts=linking == "fact" or settings_b.hops > 0)  # facts: linking, bridging
    aids = meta.get("query_aids") or {}
    settings = dict(meta.get("settings", {}))
    given = {"damping": damping, "tol": tol, "max_iter": max_iter}  # None: the value recorded with the graph
    kwargs = {name: value if value is not None else settings[name] for name, value in given.items()
              if value is not None or name in settings}
    tuning = {"passage_weight": passage_weight, "top_facts": top_facts, "top_entities": top_entities,
              "surface": surface, "passage_seeds": passage_seeds, "bm25_share": bm25_share, "entry_score": entry_score}
    kwargs.update({name: value for name, value in tuning.items() if value is not None})
    embedder = index_embedder(index, embedder)
    with index.reading():  # the stored query aids of the same commit
        kwargs.update(load_aids(index, folder, aids, graph, linking=linking, tagger=tagger,
                                surface=kwargs.get("surface", True),
                                passage_seeds=kwargs.get("passage_seeds", "dense+bm25")))
    tagger = kwargs.pop("tagger", tagger)
    missing = [name for name, key in (("seed BM25 index", "seeds_lexical"), ("surface forms", "surface_forms"))
               if key in kwargs and kwargs[key] is None]
    if missing:
        logger.info("%s: the graph has no stored %s matching this pool (an older build); computing them now",
                    index.path, " or ".join(missing))
    if isinstance(fact_filter, str):
        from sirerag.llm.factory import load_llm

        fact_filter = load_llm(fact_filter, cache_dir=index.path / "cache" / "llm")
    if settings_b.hops > 0 and linking == "ner":
        # the title edges (bridging through a title's passage, ``bridge_titles``, is checked per search; the
        # passages bridged entities or their synonyms title) and the synonym threshold, as the graph was built
        kwargs["bridge"] = load_bridge(index, graph, embedder, aids,
                                       title_weight=float(settings.get("title_weight", 0.0)),
                                       synonym_threshold=float(settings.get("synonym_threshold", 0.8)))
        kwargs["bridge_settings"] = settings_b
    from sirerag.graph.store import load_name_embedder

    return PPRRetriever(graph, index.pool, embedder, linking=linking, tagger=tagger, llm=fact_filter,
                        name_embedder=load_name_embedder(meta) if linking == "ner" else None, **kwargs)

