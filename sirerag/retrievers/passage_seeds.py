"""The passage seeds of a PPR search: each passage node's dense (and BM25) score, from the pool's leaf entries.

A passage scores as its best leaf; the scores are min-max normalised and, with ``dense+bm25`` seeds, mixed with
the leaves' BM25 scores (``bm25_share``). Only the leaf rows are scored: when they are consecutive rows of the
pool's memory-mapped vectors (as a build writes them), a query reads that slice and nothing else.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sirerag.graph.entries import GroupMax
from sirerag.graph.linking import min_max

if TYPE_CHECKING:
    from sirerag.retrievers.bm25 import BM25Retriever


class PassageSeeder:
    """Seed scores of ``n_passages`` passage nodes from the leaf entries at ``rows`` of the pool, whose passages
    are ``passages`` (``0 .. n_passages - 1``, one per row); ``bm25`` (over the same rows, in order) mixes
    lexical scores in at ``bm25_share``; None: dense alone."""

    def __init__(self, rows: np.ndarray, passages: np.ndarray, n_passages: int,
                 bm25: BM25Retriever | None = None, bm25_share: float = 0.0) -> None:
        self.rows, self.passages = rows, passages
        self.best = GroupMax(passages, n_passages)
        self.bm25, self.bm25_share = bm25, float(bm25_share)
        consecutive = bool(rows.size) and int(rows[-1]) - int(rows[0]) + 1 == rows.size
        self._slice = slice(int(rows[0]), int(rows[-1]) + 1) if consecutive else None

    def leaf_dense(self, queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """``(n_queries, n_rows)``: the query vectors' scores against the leaf rows of ``vectors``."""
        return queries @ (vectors[self._slice] if self._slice is not None else vectors[self.rows]).T

    def passage_scores(self, leaf_scores: np.ndarray) -> np.ndarray:
        """Every passage's best leaf score; a passage without a leaf takes the lowest score."""
        scores = self.best(leaf_scores, -np.inf)
        missing = ~np.isfinite(scores)
        if missing.all():
            return np.zeros_like(scores)
        scores[missing] = scores[~missing].min()
        return scores

    def seed_scores(self, query: str, leaf_scores: np.ndarray) -> np.ndarray:
        """Passage seed scores: min-max dense, mixed with min-max BM25 (``bm25_share``)."""
        dense = min_max(self.passage_scores(leaf_scores))
        if self.bm25 is None:
            return dense
        lexical = self.best(self.bm25.scores(query), 0.0)
        return (1.0 - self.bm25_share) * dense + self.bm25_share * min_max(lexical)
