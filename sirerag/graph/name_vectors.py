"""The entity names' vectors written to ``graph/entity_embeddings.npy`` in slices, never held whole.

A graph has about 7.6 entity nodes per passage of the bench corpora, each a 384-d float32 row: 11.5 KiB per
passage, 1.1 GiB at 100,000 passages. :func:`name_vector_writer` embeds the names a slice at a time into the
memory-mapped file (:func:`~sirerag.core.io.mapped.npy_writer`: the bytes ``np.save`` writes), handing each
slice's written pages back to the kernel, and keeps in memory only the rows the synonym kNN reads (the names
eligible for synonyms; the kNN compares every row with every other). The graph then holds the file's rows mapped
read-only, and :func:`~sirerag.graph.store.save_graph` leaves the file as it is.

The slices follow the names sorted by length (stably), and are a whole number of the embedding cache's blocks of
texts to encode, which it too fills in length order: a build with every name in the cache, or none, sends the
model the same batches as one call over all names.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from sirerag.core.io.mapped import drop_pages, map_npy, npy_writer
from sirerag.embedding.base import Embedder

logger = logging.getLogger(__name__)

ENTITY_EMBEDDINGS = "entity_embeddings.npy"

#: Names embedded per slice: 32 blocks of the embedding cache's 1,024 texts (48 MiB of 384-d float32 rows).
SLICE_NAMES = 32 * 1024


class NameVectorWriter:
    """A :data:`~sirerag.graph.build.NameVectors` that writes ``directory/entity_embeddings.npy`` in slices of
    ``slice_names`` names and returns its rows mapped read-only, with the eligible rows in memory; ``written``
    says whether it has written the file."""

    def __init__(self, directory: str | Path, *, slice_names: int = SLICE_NAMES) -> None:
        self.path, self.slice_names, self.written = Path(directory) / ENTITY_EMBEDDINGS, slice_names, False

    def __call__(self, embedder: Embedder, names: Sequence[str], eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        order = np.argsort(np.fromiter((len(name) for name in names), dtype=np.int64, count=len(names)),
                           kind="stable")
        where = np.cumsum(eligible) - 1  # each eligible name's row among the eligible rows
        kept = np.empty((int(np.count_nonzero(eligible)), int(embedder.dim)), dtype=np.float32)
        with npy_writer(self.path, (len(names), int(embedder.dim)), np.float32) as matrix:
            for start in range(0, len(names), self.slice_names):
                rows = order[start:start + self.slice_names]
                vectors = np.asarray(embedder.encode_documents([names[i] for i in rows.tolist()]), dtype=np.float32)
                matrix[rows] = vectors
                chosen = eligible[rows]
                kept[where[rows[chosen]]] = vectors[chosen]
                if isinstance(matrix, np.memmap):  # the pages written so far: to the file, then out of memory
                    matrix.flush()
                    drop_pages(matrix)
            del matrix
        self.written = True
        logger.debug("%d entity-name vectors written to %s", len(names), self.path)
        return map_npy(self.path), kept
