"""``sirerag verify``: check every byte of an index against its manifest, and its files
against each other (entries against documents and embeddings, chunks against documents)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import damaged
from sirerag.pool.store import CHUNKS, DOCUMENTS, EMBEDDINGS, ENTRIES
from sirerag.pool.loaded import load_index

logger = logging.getLogger(__name__)


def verify_index(directory: str | Path) -> dict[str, Any]:
    """Check an index directory completely.

    Checks the sha256 and size of every file the manifest lists, parses every record,
    and checks that every entry's passages are documents of the index, every chunk's
    document is one, and the embeddings are finite with the embedder's dimension.

    Returns:
        What was checked: ``files``, ``bytes``, ``entries``, ``documents``, ``chunks``,
        ``propositions`` and ``unlisted`` (files in the folder the manifest does not list).

    Raises:
        IndexFormatError: the first problem found, naming the file.
    """
    directory = Path(directory)
    index = load_index(directory, verify=True)
    files = index.manifest.files
    documents = index.documents()
    doc_ids = {d.id for d in documents}
    for position, entry in enumerate(index.pool.entries, start=1):
        missing = [p for p in entry.passages if p not in doc_ids]
        if missing:
            raise IndexFormatError(damaged(f"{directory / ENTRIES}:{position}", f"entry {entry.id} names passage "
                                           f"{missing[0]!r}, which is not in {DOCUMENTS}", directory))
    chunks = index.chunks() if CHUNKS in files else []
    for position, chunk in enumerate(chunks, start=1):
        if chunk.doc_id not in doc_ids:
            raise IndexFormatError(damaged(f"{directory / CHUNKS}:{position}", f"chunk of unknown document "
                                           f"{chunk.doc_id!r}", directory))
    embeddings = index.pool.embeddings
    dim = index.manifest.embedder.dim if index.manifest.embedder is not None else None
    if isinstance(dim, int) and embeddings.shape[1] != dim:
        raise IndexFormatError(damaged(directory / EMBEDDINGS, f"rows have {embeddings.shape[1]} dimensions, the "
                                       f"embedder {dim}", directory))
    if not np.isfinite(embeddings).all():
        raise IndexFormatError(damaged(directory / EMBEDDINGS, "holds NaN or infinite values", directory))
    from sirerag.trees.proposition_vectors import load_proposition_vectors

    rows = load_proposition_vectors(directory, len(index.propositions()))  # rows aligned with the propositions
    if rows is not None and not np.isfinite(rows).all():
        raise IndexFormatError(damaged(directory / "propositions.npy", "holds NaN or infinite values", directory))
    graph = index.component("graph")
    if graph is not None:
        from sirerag.graph.store import load_graph

        load_graph(graph)
    listed = set(files) | {"manifest.json"}
    unlisted = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                      if p.is_file() and p.relative_to(directory).parts[0] != "cache"
                      and p.relative_to(directory).as_posix() not in listed)
    for rel in unlisted:
        logger.warning("%s: not listed in the manifest (not written by the build that wrote it)", directory / rel)
    return {"index": str(directory), "files": len(files), "bytes": sum(r.size for r in files.values()),
            "entries": len(index.pool), "documents": len(documents), "chunks": len(chunks),
            "propositions": len(index.propositions()), "unlisted": unlisted}
