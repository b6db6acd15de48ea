"""Settings of the keyword-graph retriever (``--retriever keyword-graph``): the similarity + keyword chunk graph
of the BABILong graph-RAG post, over the passages of one long document. A search setting, not a build setting:
the graph is made when the retriever loads, from the index's passages and their stored embeddings."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check

#: how the graph search spreads from the top dense hits
KEYWORD_GRAPH_MODES = ("ppr", "hop", "dense")
#: what counts as a passage's keywords
KEYWORD_SOURCES = ("entities", "content", "both")


@dataclass(frozen=True)
class KeywordGraphConfig:
    """The keyword-graph retriever's settings; each is also an option of its ``load`` (``seeds=3``...), which
    overrides the default here.

    Attributes:
        mode: ``ppr`` (Personalized PageRank from the seeds), ``hop`` (the seeds, then the passages most strongly
            linked to one) or ``dense`` (cosine alone: the baseline).
        seeds: the top dense hits the graph search starts from.
        damping: PageRank's damping for ``ppr`` (the probability of following an edge rather than resetting).
        keywords: a passage's keywords: ``entities`` (the offline rule tagger's, fitted on the passages),
            ``content`` (its words that are not English stopwords) or ``both`` (their union).
        max_passages: the most passages the graph is made over; it holds an ``(n, n)`` matrix, about
            ``12 n^2`` bytes while it loads (4,000 passages: some 190 MB).
    """

    mode: str = "ppr"
    seeds: int = 2
    damping: float = 0.5
    keywords: str = "both"
    max_passages: int = 4_000

    def validate(self) -> "KeywordGraphConfig":
        check_types(self, "keyword_graph")
        check(self.mode in KEYWORD_GRAPH_MODES, "keyword_graph.mode", self.mode,
              "one of " + ", ".join(repr(m) for m in KEYWORD_GRAPH_MODES))
        check(self.seeds >= 1, "keyword_graph.seeds", self.seeds, "an integer >= 1")
        check(0.0 <= self.damping < 1.0, "keyword_graph.damping", self.damping, "a number in [0, 1)")
        check(self.keywords in KEYWORD_SOURCES, "keyword_graph.keywords", self.keywords,
              "one of " + ", ".join(repr(k) for k in KEYWORD_SOURCES))
        check(self.max_passages >= 1, "keyword_graph.max_passages", self.max_passages, "an integer >= 1")
        return self
