"""Dense retrieval: cosine similarity over the pool's embeddings, exact (numpy) or, when the index has the
``ann`` component (a pool of ``dense.ann_min_vectors`` vectors or more), over the candidates of its HNSW
index (:mod:`sirerag.pool.ann`), re-scored with the pool's float32 rows."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np

from sirerag.core.errors import ConfigError, IndexFormatError
from sirerag.retrievers.base import Closing, Hit, SearchOne, check_query

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.pool.ann import AnnIndex
    from sirerag.pool.loaded import LoadedIndex

logger = logging.getLogger(__name__)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest scores, best first; ties broken by lower index."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    return part[np.lexsort((part, -scores[part]))]


class DenseRetriever(SearchOne, Closing):
    """Inner product of L2-normalised embeddings (cosine similarity).

    Args:
        embedder: the embedder the pool was built with (queries go through
            ``encode_queries``).
        ids: pool entry ids, row ``i`` of ``embeddings`` belonging to ``ids[i]``.
        embeddings: ``(n, dim)`` float32, L2-normalised.
        ann: the pool's approximate index (:class:`~sirerag.pool.ann.AnnIndex`): a search takes its
            candidates and scores them exactly; None searches every row.
    """

    name = "dense"

    def __init__(self, embedder: Embedder, ids: Sequence[str], embeddings: np.ndarray,
                 ann: AnnIndex | None = None) -> None:
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
        self.ann = ann

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """Cosine scores ``(n_queries, n_entries)`` (exact, every row)."""
        return self.embedder.encode_queries(list(queries)) @ self.embeddings.T

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        check_query(queries, batch=True)
        results: list[list[Hit]] = []
        if not len(queries):
            return results
        if self.ann is not None:
            vectors = self.embedder.encode_queries(list(queries))
            for vector, rows in zip(vectors, self.ann.candidates(vectors, k)):
                row = self.embeddings[rows] @ vector
                results.append([Hit(self.ids[rows[i]], float(row[i])) for i in top_k(row, k)])
            return results
        all_scores = self.scores(queries)
        for row in all_scores:
            order = top_k(row, k)
            results.append([Hit(self.ids[i], float(row[i])) for i in order])
        return results


def index_embedder(index: LoadedIndex, embedder: Embedder | None = None) -> Embedder:
    """The query embedder for the embedder recorded in an index's manifest (or ``embedder`` when
    given): for ``minilm``, its ONNX export when present (:func:`~sirerag.embedding.load_query_embedder`), and
    for an index embedded in int8 the int8 export."""
    if embedder is not None:
        return embedder
    from sirerag.embedding import load_query_embedder
    from sirerag.embedding.precision import precision_of

    record = index.manifest.embedder
    if record is None or not record.loads_as:
        raise IndexFormatError(f"{index.path}: manifest names no embedder; pass one explicitly")
    return load_query_embedder(record.loads_as, show_progress=False, precision=precision_of(record.spec or ""))


def load(index: LoadedIndex, *, embedder: Embedder | None = None, exact: bool = False,
         ann_expansion_search: int | None = None) -> DenseRetriever:
    """Dense retriever over a loaded index (see :func:`sirerag.retrievers.load_retriever`): through the
    index's ``ann`` component when it has one (unless ``exact``; ``ann_expansion_search`` overrides the
    candidate list it was built with), else exact.

    Raises:
        MissingExtraError: the index has the ``ann`` component and usearch is not installed (extra ``ann``).
    """
    embedder = index_embedder(index, embedder)
    return DenseRetriever(embedder, list(index.pool.ids), index.pool.embeddings,
                          ann=None if exact else load_index_ann(index, ann_expansion_search))


def load_index_ann(index: LoadedIndex, expansion_search: int | None = None) -> AnnIndex | None:
    """The index's approximate dense index, memory-mapped and checked against its manifest (size, sample
    checksum) and its pool; None when it has none."""
    component = index.manifest.component("ann")
    if component is None:
        return None
    from sirerag.core.io.manifest import check_sample
    from sirerag.pool.ann import ANN_DIR, ANN_FILE, load_ann

    record = component.to_dict()
    rel = f"{record.get('path') or ANN_DIR}/{record.get('file') or ANN_FILE}"
    embeddings = index.pool.embeddings
    with index.reading():
        check_sample(index.path, index.manifest, rel)
        return load_ann(index.path, record, int(embeddings.shape[0]), int(embeddings.shape[1]),
                        expansion_search=expansion_search)
