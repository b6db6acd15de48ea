"""The keyword-graph retriever (``--retriever keyword-graph``): the similarity + keyword chunk graph of the
BABILong graph-RAG post (:mod:`sirerag.graph.keyword_graph`) over the passages of an index of one long document:
a folder holding one book, or a ``.jsonl`` of one story's sentences.

The graph is made when the retriever loads, from the index's passages (its leaves; summaries and aggregates are
not ranked) and their stored embeddings: nothing is added to the index. A search ranks passages best first; read
them in the story's order with ``sirerag ask --order document``.
"""
from __future__ import annotations

import logging
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from sirerag.core.config.keyword_graph import KeywordGraphConfig
from sirerag.core.errors import ConfigError
from sirerag.graph.keyword_graph import KeywordGraph, passage_keywords
from sirerag.retrievers.base import Closing, Hit, SearchOne, check_query
from sirerag.retrievers.dense import index_embedder, top_k

if TYPE_CHECKING:
    from sirerag.core.types import Node
    from sirerag.embedding.base import Embedder
    from sirerag.pool.loaded import LoadedIndex

logger = logging.getLogger(__name__)


class KeywordGraphRetriever(SearchOne, Closing):
    """Ranks passages through a :class:`~sirerag.graph.keyword_graph.KeywordGraph`.

    Args:
        embedder: the embedder the passages were embedded with (queries go through ``encode_queries``).
        ids: the passages' entry ids, row ``i`` of ``embeddings`` belonging to ``ids[i]``.
        embeddings: ``(n, dim)`` float32, L2-normalised.
        keywords: each passage's keywords.
        config: the retriever's settings.
    """

    name = "keyword-graph"

    def __init__(self, embedder: Embedder, ids: Sequence[str], embeddings: np.ndarray, keywords: Sequence[set[str]],
                 config: KeywordGraphConfig | None = None) -> None:
        config = (config or KeywordGraphConfig()).validate()
        check_size(len(ids), config)
        if embedder.dim != embeddings.shape[1]:
            raise ConfigError(f"the query embedder {embedder.spec} has dim {embedder.dim} but the passages have "
                              f"dim {embeddings.shape[1]}: search with the embedder the index was built with")
        self.embedder, self.ids = embedder, list(ids)
        self.graph = KeywordGraph(embeddings, keywords, config)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        check_query(queries, batch=True)
        if not len(queries):
            return []
        scores = self.graph.scores(self.embedder.encode_queries(list(queries)))
        return [[Hit(self.ids[i], float(row[i])) for i in top_k(row, k)] for row in scores]


def bodies(index: LoadedIndex, passages: Sequence[Node]) -> list[str]:
    """The passages' texts without their document's heading line (a document's first chunk starts with its title:
    in a ``.jsonl`` of one story's sentences every sentence would share the story's title as a keyword)."""
    from sirerag.pool.store import DOCUMENTS

    headings = {d.id: d.heading for d in index.documents()} if DOCUMENTS in index.manifest.files else {}
    texts = []
    for entry in passages:
        heading = headings.get(entry.passages[0], "") if entry.passages else ""
        texts.append(entry.text[len(heading) + 1:] if heading and entry.text.startswith(heading + "\n") else entry.text)
    return texts


def check_size(passages: int, config: KeywordGraphConfig) -> None:
    """ConfigError for more passages than ``config.max_passages``."""
    if passages > config.max_passages:
        raise ConfigError(f"the keyword graph is made over one long document: this index has {passages:,} "
                          f"passages, over keyword_graph.max_passages ({config.max_passages:,}); "
                          "pass max_passages=N to allow more (memory grows with N squared)")


def load(index: LoadedIndex, *, embedder: Embedder | None = None, mode: str | None = None, seeds: int | None = None,
         damping: float | None = None, keywords: str | None = None,
         max_passages: int | None = None) -> KeywordGraphRetriever:
    """Keyword-graph retriever over the passages of a loaded index (see
    :func:`sirerag.retrievers.load_retriever`). Options: ``mode``, ``seeds``, ``damping``, ``keywords``,
    ``max_passages`` (defaults: :class:`~sirerag.core.config.KeywordGraphConfig`); ``embedder`` (default: the
    index's).

    Raises:
        ConfigError: a bad option, or more passages than ``max_passages``.
    """
    given: dict[str, Any] = {"mode": mode, "seeds": seeds, "damping": damping, "keywords": keywords,
                             "max_passages": max_passages}
    config = KeywordGraphConfig(**{f.name: given[f.name] for f in fields(KeywordGraphConfig)
                                   if given[f.name] is not None}).validate()
    rows = [i for i, kind in enumerate(index.pool.kinds) if kind == "leaf"]
    check_size(len(rows), config)  # before the embedder loads
    passages = [index.pool.entries[i] for i in rows]
    embeddings = index.pool.embeddings[rows]
    documents = {p for e in passages for p in e.passages}
    if len(documents) > 1:
        logger.info("%s: the keyword graph joins the passages of %d documents as one", index.path, len(documents))
    words = passage_keywords(bodies(index, passages), config.keywords) if config.mode != "dense" else \
        [set() for _ in passages]
    return KeywordGraphRetriever(index_embedder(index, embedder), [e.id for e in passages], embeddings, words, config)
