"""The dense search settings of a build: when the pool gets an approximate (HNSW) index, and its parameters."""
from __future__ import annotations

from dataclasses import dataclass

from sirerag.core.config.typecheck import check_types
from sirerag.core.errors import check

#: What the approximate index stores its vectors as (usearch's scalar kinds); searches re-score the
#: candidates with the pool's float32 vectors, so the scores are exact whatever is stored.
ANN_DTYPES = ("f32", "f16", "i8")


@dataclass(frozen=True)
class DenseConfig:
    """Dense search over the pool. A pool of at least ``ann_min_vectors`` vectors gets an approximate
    nearest-neighbour index (HNSW, usearch, extra ``ann``) stored as the ``ann`` component, and dense
    searches use it; a smaller pool is searched exactly (one matrix product). 0 builds it for any pool
    (tests); ``-1`` never builds it.

    HNSW parameters (usearch's names): ``ann_connectivity`` (edges per node, M), ``ann_expansion_add``
    (candidate list while building, efConstruction), ``ann_expansion_search`` (candidate list while
    searching, ef; recorded with the index, a search may override it). ``ann_dtype``: the stored vectors
    (``f16`` halves the file; the candidates are re-scored with the pool's float32 vectors).
    ``ann_threads``: threads that build it (0: all CPUs; more than one builds a different, equally good
    graph each time, so ``1`` makes the file reproducible)."""

    ann_min_vectors: int = 50_000
    ann_connectivity: int = 16
    ann_expansion_add: int = 128
    ann_expansion_search: int = 256
    ann_dtype: str = "f16"
    ann_threads: int = 1

    def validate(self) -> None:
        check_types(self, "dense")
        check(self.ann_min_vectors >= -1, "dense.ann_min_vectors", self.ann_min_vectors,
              "an integer >= 0 (or -1: never)")
        check(2 <= self.ann_connectivity <= 256, "dense.ann_connectivity", self.ann_connectivity,
              "an integer from 2 to 256")
        check(self.ann_expansion_add >= 1, "dense.ann_expansion_add", self.ann_expansion_add, "an integer >= 1")
        check(self.ann_expansion_search >= 1, "dense.ann_expansion_search", self.ann_expansion_search,
              "an integer >= 1")
        check(self.ann_dtype in ANN_DTYPES, "dense.ann_dtype", self.ann_dtype,
              "one of " + ", ".join(repr(d) for d in ANN_DTYPES))
        check(self.ann_threads >= 0, "dense.ann_threads", self.ann_threads, "an integer >= 0 (0: every CPU)")

    def builds_ann(self, vectors: int) -> bool:
        """Whether a pool of ``vectors`` vectors gets the approximate index."""
        return self.ann_min_vectors >= 0 and vectors >= self.ann_min_vectors and vectors > 0
