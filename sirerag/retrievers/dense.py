"""Dense retrieval: exact cosine similarity over the pool's embeddings (numpy)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.retrievers.base import Closing, Hit, check_query

if TYPE_CHECKING:
    from sirerag.pool.store import LoadedIndex

logger = logging.getLogger(__name__)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first; ties broken by lower index."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    return part[np.lexsort((part, -scores[part]))]


class DenseRetriever(Closing):
    """Exact inner product of L2-normalised embeddings (cosine similarity).

    Args:
        embedder: the embedder the pool was built with (queries go through
            ``encode_queries``).
        ids: pool entry ids, row ``i`` of ``embeddings`` belonging to ``ids[i]``.
        embeddings: ``(n, dim)`` float32, L2-normalised.
    """

    name = "dense"

    def __init__(self, embedder: Any, ids: Sequence[str], embeddings: np.ndarray) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(ids):
            raise IndexFormatError(f"embeddings of shape {embeddings.shape} for {len(ids)} entries")
        if embedder.dim != embeddings.shape[1]:
            raise ConfigError(
                f"the query embedder {embedder.spec} has dim {embedder.dim} but the pool embeddings have "
                f"dim {embeddings.shape[1]}: search with the embedder the index was built with"
            )
        self.embedder = embedder
        self.ids = list(ids)
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine scores ``(n_queries, n_entries)``."""
        return self.embedder.encode_queries(list(queries)) @ self.embeddings.T

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        check_query(queries, batch=True)
        results: list[list[Hit]] = []
        if not len(queries):
            return results
        all_scores = self.scores(queries)
        for row in all_scores:
            order = top_k(row, k)
            results.append([Hit(self.ids[i], float(row[i])) for i in order])
        return results


def index_embedder(index: LoadedIndex, embedder: Any | None = None) -> Any:
    """The query embedder for the embedder recorded in an index's manifest (or ``embedder`` when
    given): for ``minilm``, its ONNX export when present (:func:`~sirerag.embedding.load_query_embedder`)."""
    if embedder is not None:
        return embedder
    from sirerag.embedding import load_query_embedder

    spec = index.manifest.embedder.loads_as if index.manifest.embedder is not None else None
    if not spec:
        raise IndexFormatError(f"{index.path}: manifest names no embedder; pass one explicitly")
    return load_query_embedder(spec, show_progress=False)


def load(index: LoadedIndex, *, embedder: Any | None = None) -> DenseRetriever:
    """Dense retriever over a loaded index (see :func:`sirerag.retrievers.load_retriever`)."""
    embedder = index_embedder(index, embedder)
    return DenseRetriever(embedder, [e.id for e in index.pool.entries], index.pool.embeddings)
