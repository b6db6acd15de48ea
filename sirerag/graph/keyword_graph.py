"""The similarity + keyword chunk graph of the BABILong graph-RAG post, over the passages of one long document.

The adjacency is the mean of two ``(n, n)`` matrices: the cosine similarity of the passage embeddings (negatives
clipped to 0) and a binary matrix that is 1 when two passages share at least one keyword. A search starts from the
top dense hits and either runs Personalized PageRank from them (``ppr``) or adds their strongest neighbours
(``hop``, one hop); ``dense`` is cosine alone. In a story, the passage that answers a question often shares no
word with it ("where is the milk?" is answered by the last move of whoever holds it) but shares a name with one
that does, and the graph reaches it. :mod:`sirerag.retrievers.keyword_graph` serves it over an index.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from sirerag.core.config.keyword_graph import KeywordGraphConfig
from sirerag.core.errors import check
from sirerag.graph.ppr import PersonalizedPageRank


def keyword_matrix(keywords: Sequence[Iterable[str]]) -> np.ndarray:
    """``(n, n)`` float: 1 where passages ``i != j`` share a keyword, else 0."""
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
    """Mean of the cosine matrix (negatives clipped to 0) and the shared-keyword matrix, without self-loops."""
    x = np.asarray(embeddings, dtype=np.float64)
    check(x.ndim == 2 and x.shape[0] == len(keywords), "embeddings", x.shape,
          f"one row per passage ({len(keywords)} passages)")
    cosine = np.clip(x @ x.T, 0.0, None)
    np.fill_diagonal(cosine, 0.0)
    return 0.5 * (cosine + keyword_matrix(keywords))


def passage_keywords(texts: Sequence[str], source: str) -> list[set[str]]:
    """The keywords of each passage: the offline rule tagger's entities (fitted on ``texts``, lower-cased), its
    words that are not English stopwords, or both (``source`` as :attr:`KeywordGraphConfig.keywords`)."""
    words: list[set[str]] = [set() for _ in texts]
    if source in ("entities", "both"):
        from sirerag.extraction.tagger import EntityTagger

        tagger = EntityTagger().fit(texts)
        for found, text in zip(words, texts):
            found.update(e.lower() for e in tagger.tag(text))
    if source in ("content", "both"):
        from sirerag.pool.bm25 import english_stopwords, tokenize

        stop = english_stopwords()
        for found, text in zip(words, texts):
            found.update(t for t in tokenize(text, stop) if t.isalpha())
    return words


class KeywordGraph:
    """Scores the passages of one document through the similarity + keyword graph.

    Args:
        embeddings: ``(n, dim)`` L2-normalised passage embeddings.
        keywords: the keywords of each passage (:func:`passage_keywords`).
        config: mode, seeds and damping (:class:`~sirerag.core.config.KeywordGraphConfig`; its ``keywords`` and
            ``max_passages`` are the loader's).
    """

    def __init__(self, embeddings: np.ndarray, keywords: Sequence[Iterable[str]],
                 config: KeywordGraphConfig | None = None) -> None:
        self.config = (config or KeywordGraphConfig()).validate()
        self.embeddings = np.asarray(embeddings, dtype=np.float32)
        self.adjacency = chunk_adjacency(self.embeddings, list(keywords)) if self.config.mode != "dense" else None
        self.pagerank = (PersonalizedPageRank(self.adjacency, damping=self.config.damping)
                         if self.config.mode == "ppr" else None)

    def scores(self, query_embeddings: np.ndarray) -> np.ndarray:
        """Retrieval score of every passage ``(n_queries, n)`` for ``(n_queries, dim)`` query embeddings (higher
        is better); one ``(dim,)`` query gives ``(n,)``."""
        queries = np.asarray(query_embeddings, dtype=np.float32)
        one = queries.ndim == 1
        dense = np.atleast_2d(queries) @ self.embeddings.T
        if self.config.mode == "dense" or dense.shape[1] == 0:
            out = dense.astype(np.float64)
            return out[0] if one else out
        seeds = min(self.config.seeds, dense.shape[1])
        start = np.argsort(-dense, axis=1, kind="stable")[:, :seeds]  # ties: the earlier passage
        rows = np.arange(dense.shape[0])[:, None]
        assert self.adjacency is not None  # made for every mode but dense
        if self.pagerank is not None:  # mode ppr
            reset = np.zeros(dense.shape)
            reset[rows, start] = np.clip(dense[rows, start], 1e-6, None)
            out = self.pagerank.run(reset.T).T
        else:  # hop: the seeds first (by dense score), then passages by their strongest link to a seed
            out = self.adjacency[start].max(axis=1)
            out[rows, start] = 2.0 + dense[rows, start]  # above any edge weight (<= 1)
        return out[0] if one else out

    def retrieve(self, query_embedding: np.ndarray, k: int) -> list[int]:
        """Positions of the ``k`` best passages, in document order."""
        return sorted(int(i) for i in np.argsort(-self.scores(query_embedding), kind="stable")[:k])
