"""The approximate nearest-neighbour index of a pool's vectors (HNSW, with usearch; extra ``ann``).

A build whose pool has at least ``dense.ann_min_vectors`` vectors stores it in the index directory's
``ann/`` folder as one usearch file (``pool.usearch``: usearch's own format, no pickle), recorded as the
``ann`` component and listed in the manifest with its size, sha256 and a sample checksum like the
arrays. Keys are pool rows (0 .. n-1), so ``add``/``remove``, which rewrite the pool, build it again.

A search opens the file memory-mapped (usearch's ``view``): nothing is read until the graph is walked,
and the pages walked stay in the OS's cache. Cosine similarity of L2-normalised vectors is their inner
product; the index finds candidates, which the caller re-scores with the pool's float32 rows.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sirerag.core.config.dense import DenseConfig
from sirerag.core.errors import IndexFormatError, require
from sirerag.core.io import atomic_dir
from sirerag.core.io.files import damaged

logger = logging.getLogger(__name__)

#: Folder of the approximate index inside an index directory, and its one file.
ANN_DIR = "ann"
ANN_FILE = "pool.usearch"
ANN_TYPE = "usearch-hnsw"
_PURPOSE = "the approximate dense index (dense.ann_min_vectors)"


def usearch(purpose: str = _PURPOSE) -> Any:  # Any: a module of an optional extra
    """The ``usearch.index`` module; MissingExtraError naming the extra ``ann`` (and ``purpose``) when it is not
    installed."""
    require("usearch", "ann", purpose=purpose)
    return require("usearch.index", "ann", purpose=purpose)


def build_ann(vectors: np.ndarray, settings: DenseConfig, *,
              purpose: str = _PURPOSE) -> Any:  # Any: a usearch Index (an optional extra)
    """An in-memory usearch HNSW index over ``vectors`` (``(n, dim)`` float32, L2-normalised), keys 0 .. n-1."""
    Index = usearch(purpose).Index
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = Index(ndim=int(vectors.shape[1]), metric="ip", dtype=settings.ann_dtype,
                  connectivity=settings.ann_connectivity, expansion_add=settings.ann_expansion_add,
                  expansion_search=settings.ann_expansion_search)
    if len(vectors):
        index.add(np.arange(len(vectors), dtype=np.uint64), vectors, threads=settings.ann_threads)
    return index


def save_ann(out: str | Path, vectors: np.ndarray, settings: DenseConfig) -> dict[str, Any]:
    """Build the index of ``vectors`` and store it in ``out/ann`` (replaced atomically).

    Returns:
        The manifest component record (type, path, file, parameters, counts).
    """
    index = build_ann(vectors, settings)
    with atomic_dir(Path(out) / ANN_DIR) as tmp:
        index.save(str(tmp / ANN_FILE))
    import usearch as package

    return {"type": ANN_TYPE, "path": ANN_DIR, "file": ANN_FILE, "vectors": int(vectors.shape[0]),
            "dim": int(vectors.shape[1]), "metric": "ip", "dtype": settings.ann_dtype,
            "connectivity": settings.ann_connectivity, "expansion_add": settings.ann_expansion_add,
            "expansion_search": settings.ann_expansion_search, "usearch": package.__version__}


@dataclass(frozen=True, eq=False)
class AnnIndex:
    """A stored approximate index, opened memory-mapped."""

    index: Any
    rows: int
    expansion_search: int

    def candidates(self, queries: np.ndarray, count: int) -> list[np.ndarray]:
        """Pool rows of about the ``count`` nearest vectors of each query (fewer when the pool is smaller)."""
        count = min(count, self.rows)
        if count <= 0 or not len(queries):
            return [np.zeros(0, dtype=np.int64) for _ in range(len(queries))]
        self.index.expansion_search = max(self.expansion_search, count)
        found = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), count)
        if not hasattr(found, "counts"):  # one query: usearch answers with one list of matches
            return [np.asarray(found.keys, dtype=np.int64)]
        keys, counts = np.atleast_2d(found.keys), np.atleast_1d(found.counts)
        return [keys[i, :counts[i]].astype(np.int64) for i in range(len(queries))]


def load_ann(directory: str | Path, component: dict[str, Any], rows: int, dim: int, *,
             expansion_search: int | None = None) -> AnnIndex:
    """Open ``directory``'s stored index memory-mapped and check it against the pool (``rows`` x ``dim``).

    Raises:
        MissingExtraError: usearch is not installed (extra ``ann``).
        IndexFormatError: the file is missing or does not match the pool; the message names the file.
    """
    Index = usearch().Index
    directory = Path(directory)
    path = directory / str(component.get("path") or ANN_DIR) / str(component.get("file") or ANN_FILE)
    if not path.is_file():
        raise IndexFormatError(damaged(path, "index file is missing", directory))
    try:
        index = Index.restore(str(path), view=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise IndexFormatError(damaged(path, f"not a usearch index ({exc})", directory)) from exc
    if index is None or len(index) != rows or index.ndim != dim:
        got = "nothing" if index is None else f"{len(index)} vectors of dim {index.ndim}"
        raise IndexFormatError(damaged(path, f"holds {got}, the pool has {rows} of dim {dim}", directory))
    search = int(expansion_search or component.get("expansion_search") or index.expansion_search)
    return AnnIndex(index=index, rows=rows, expansion_search=search)
