"""The similarity + keyword chunk graph of the BABILong graph-RAG blog post.

For one document (a bAbI story) split into chunks (sentences), the adjacency is the
mean of two ``(n, n)`` matrices: the cosine similarity of the chunk embeddings and
a binary matrix that is 1 when two chunks share at least one keyword. Retrieval
starts from the top dense hits and either runs Personalized PageRank from them
(``ppr``) or adds their strongest neighbours (``hop``, one hop); the retrieved
chunks are returned in document order, because the order of events decides the
answer ("where is the milk?" is answered by the last move of whoever holds it).

This is a per-document retriever, not a pool retriever: it serves only the bAbI benchmark
(``benchmarks/eval_babi.py``), so it lives beside it rather than in ``sirerag/retrievers``, and works
on any list of chunks with embeddings.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from sirerag.core.errors import check
from sirerag.graph.ppr import PersonalizedPageRank
from sirerag.retrievers.dense import top_k

MODES = ("dense", "hop", "ppr")


def keyword_matrix(keywords: Sequence[Iterable[str]]) -> np.ndarray:
    """``(n, n)`` float: 1 where chunks ``i != j`` share a keyword, else 0."""
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, words in enumerate(keywords):
        for w in set(words):
            rows.append(i)
            cols.append(vocab.setdefault(w, len(vocab)))
    n = len(keywords)
    incidence = np.zeros((n, max(len(vocab), 1)), dtype=np.float32)
    incidence[rows, cols] = 1.0
    shared = (incidence @ incidence.T > 0).astype(np.float64)
    np.fill_diagonal(shared, 0.0)
    return shared


def chunk_adjacency(embeddings: np.ndarray, keywords: Sequence[Iterable[str]]) -> np.ndarray:
    """Mean of the cosine matrix (negatives clipped to 0) and the shared-keyword matrix,
    without self-loops."""
    x = np.asarray(embeddings, dtype=np.float64)
    check(x.ndim == 2 and x.shape[0] == len(keywords), "embeddings", x.shape,
          f"one row per chunk ({len(keywords)} chunks)")
    cosine = np.clip(x @ x.T, 0.0, None)
    np.fill_diagonal(cosine, 0.0)
    return 0.5 * (cosine + keyword_matrix(keywords))


class KeywordGraphRetriever:
    """Retrieves chunks of one document through the similarity + keyword graph.

    Args:
        embeddings: ``(n, dim)`` L2-normalised chunk embeddings, in document order.
        keywords: the keywords of each chunk (e.g. its named entities and nouns).
        mode: ``ppr`` (PageRank from the seeds), ``hop`` (seeds and their neighbours)
            or ``dense`` (top-k by cosine only: the baseline).
        seeds: number of top dense hits the graph search starts from.
        damping: PageRank damping for ``ppr``.
    """

    def __init__(self, embeddings: np.ndarray, keywords: Sequence[Iterable[str]], *, mode: str = "ppr",
                 seeds: int = 3, damping: float = 0.5) -> None:
        check(mode in MODES, "mode", mode, f"one of {MODES}")
        check(isinstance(seeds, int) and seeds >= 1, "seeds", seeds, "an integer >= 1")
        self.embeddings = np.asarray(embeddings, dtype=np.float32)
        self.mode, self.seeds = mode, seeds
        self.adjacency = chunk_adjacency(self.embeddings, list(keywords)) if mode != "dense" else None
        self.pagerank = PersonalizedPageRank(self.adjacency, damping=damping) if mode == "ppr" else None

    def scores(self, query_embedding: np.ndarray) -> np.ndarray:
        """Retrieval score of every chunk (higher is better)."""
        dense = self.embeddings @ np.asarray(query_embedding, dtype=np.float32)
        if self.mode == "dense" or dense.size == 0:
            return dense.astype(np.float64)
        start = top_k(dense, self.seeds)
        if self.mode == "ppr":
            reset = np.zeros(dense.size)
            reset[start] = np.clip(dense[start], 1e-6, None)
            return self.pagerank.run(reset)
        # hop: seeds first (by dense score), then neighbours by their strongest link to a seed
        link = self.adjacency[start].max(axis=0)
        scores = link.copy()
        scores[start] = 2.0 + dense[start]  # above any edge weight (<= 1)
        return scores

    def retrieve(self, query_embedding: np.ndarray, k: int) -> list[int]:
        """Positions of the ``k`` best chunks, in document order."""
        scores = self.scores(query_embedding)
        return sorted(int(i) for i in top_k(scores, k))
