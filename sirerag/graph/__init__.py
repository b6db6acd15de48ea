"""The entity graph of HippoRAG-style retrieval and Personalized PageRank over it.

:mod:`~sirerag.graph.build` constructs the graph (no I/O), :mod:`~sirerag.graph.ppr`
runs PageRank with ``scipy.sparse``, :mod:`~sirerag.graph.store` saves and loads it
in an index directory, :mod:`~sirerag.graph.linking` turns a query into reset
probabilities (HippoRAG's NER-to-node and HippoRAG 2's query-to-fact linking).
"""
from __future__ import annotations

from sirerag.graph.build import EntityGraph, GraphFact, build_graph
from sirerag.graph.synonyms import synonym_edges
from sirerag.graph.ppr import PersonalizedPageRank, personalized_pagerank

__all__ = ["EntityGraph", "GraphFact", "PersonalizedPageRank", "build_graph", "personalized_pagerank",
           "synonym_edges"]
