"""Export a retrieval pool for other retrievers and vector stores.

Formats (all written into one output folder, which appears only when complete):

- ``beir``: ``corpus.jsonl`` rows ``{_id, title, text, metadata}`` as read by BEIR's
  ``GenericDataLoader`` (and pyserini's JsonCollection after renaming ``_id``);
  ``metadata`` carries tree, kind, level, children, source passages and entity.
- ``colbert``: ``collection.tsv`` (``pid<TAB>text``, pid = 0, 1, ..., tabs and line
  breaks in texts turned into spaces) and ``pid_to_entry.json`` (list: pid -> entry id).
- ``jsonl``: ``entries.jsonl`` (every pool entry with its provenance, as in the index)
  and ``embeddings.npy`` (float32, row ``i`` = line ``i``).
- ``parquet``: ``entries.parquet``, the entries with an ``embedding`` column (needs pyarrow).

Every format also gets ``documents.jsonl`` (the source passages ``{id, title, text}``,
when the index has them) to map entries back to passages, and ``export.json``
(format, counts, the embedder the vectors came from).
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sirerag import __version__
from sirerag.core.errors import check, require
from sirerag.core.io import atomic_dir, atomic_path, check_files, index_lock, save_npy, write_collection, write_json, write_jsonl
from sirerag.core.io.guard import EXPORT_FORMATS, EXPORT_MANIFEST, check_export_out
from sirerag.pool.store import DOCUMENTS
from sirerag.pool.loaded import LoadedIndex, load_index
from sirerag.core.types import Node

logger = logging.getLogger(__name__)

FORMATS = EXPORT_FORMATS


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote: the folder, the format, the number of entries and the files."""

    out: Path
    format: str
    rows: int
    files: tuple[str, ...]


def beir_record(entry: Node) -> dict[str, Any]:
    """One BEIR corpus row. ``title`` stays empty: leaf texts already start with their
    document title, and ``text`` is exactly what sirerag's own retrievers index."""
    return {
        "_id": entry.id,
        "title": "",
        "text": entry.text,
        "metadata": {
            "tree": entry.tree, "kind": entry.kind, "level": entry.level, "children": list(entry.children),
            "passages": list(entry.passages), "entity": entry.entity,
        },
    }


def _write_beir(index: LoadedIndex, folder: Path) -> list[str]:
    write_jsonl(folder / "corpus.jsonl", (beir_record(e) for e in index.pool.entries))
    return ["corpus.jsonl"]


def _write_colbert(index: LoadedIndex, folder: Path) -> list[str]:
    write_collection(folder / "collection.tsv", [e.text for e in index.pool.entries])
    write_json(folder / "pid_to_entry.json", [e.id for e in index.pool.entries])
    return ["collection.tsv", "pid_to_entry.json"]


def _write_jsonl(index: LoadedIndex, folder: Path) -> list[str]:
    write_jsonl(folder / "entries.jsonl", (e.to_dict() for e in index.pool.entries))
    save_npy(folder / "embeddings.npy", np.asarray(index.pool.embeddings, dtype=np.float32))
    return ["entries.jsonl", "embeddings.npy"]


def _write_parquet(index: LoadedIndex, folder: Path) -> list[str]:
    pa = require("pyarrow", "export", purpose="the parquet export")
    import pyarrow.parquet as pq

    entries = index.pool.entries
    vectors = np.ascontiguousarray(index.pool.embeddings, dtype=np.float32)
    strings = pa.list_(pa.string())
    table = pa.table({
        "id": pa.array([e.id for e in entries], pa.string()),
        "text": pa.array([e.text for e in entries], pa.string()),
        "kind": pa.array([e.kind for e in entries], pa.string()),
        "tree": pa.array([e.tree for e in entries], pa.string()),
        "level": pa.array([e.level for e in entries], pa.int32()),
        "children": pa.array([list(e.children) for e in entries], strings),
        "passages": pa.array([list(e.passages) for e in entries], strings),
        "entity": pa.array([e.entity for e in entries], pa.string()),
        "propositions": pa.array([list(e.propositions) for e in entries], strings),
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()),
                                                       vectors.shape[1]),
    })
    with atomic_path(folder / "entries.parquet") as tmp:
        pq.write_table(table, tmp)
    return ["entries.parquet"]


WRITERS: dict[str, Callable[[LoadedIndex, Path], list[str]]] = {
    "beir": _write_beir, "colbert": _write_colbert, "jsonl": _write_jsonl, "parquet": _write_parquet,
}


def export_pool(index: LoadedIndex | str | Path, out: str | Path, format: str, *, overwrite: bool = False) -> ExportReport:
    """Write the pool of an index in ``format`` into the folder ``out``.

    The files are written into a temporary folder beside ``out`` that is renamed to
    ``out`` when complete, so a failed export leaves nothing behind.

    Args:
        index: an index directory or a loaded :class:`~sirerag.pool.loaded.LoadedIndex`.
        out: the folder to create (or an empty one).
        format: one of :data:`FORMATS`.
        overwrite: replace a previous export in ``out`` (only one holding nothing else).

    Raises:
        ConfigError: unknown format, or ``out`` may not be replaced: it is ``/``, the home or
            current folder, the source index, inside it or around it, not an earlier export,
            or an export holding files its ``export.json`` does not list.
        IndexLockedError: another process is writing ``out``.
        MissingExtraError: ``parquet`` without pyarrow (the ``export`` extra).
    """
    check(format in FORMATS, "format", format, f"one of {FORMATS}")
    if format == "parquet":
        require("pyarrow", "export", purpose="the parquet export")
    source = index.path if isinstance(index, LoadedIndex) else Path(index)
    shown = out
    out = check_export_out(out, source, overwrite=overwrite)  # resolved: a link to an export stays a link
    index = index if isinstance(index, LoadedIndex) else load_index(index)
    with index_lock(out, "export"), atomic_dir(out) as tmp:
        check_export_out(out, source, overwrite=overwrite)  # again, under the lock
        files = WRITERS[format](index, tmp)
        if DOCUMENTS in index.manifest.files:
            with index.reading():  # the documents of the loaded commit, or IndexChangedError
                shutil.copyfile(index.path / DOCUMENTS, tmp / DOCUMENTS)
            check_files(tmp, index.manifest, hashes=True, names=[DOCUMENTS])
            files.append(DOCUMENTS)
        files.append(EXPORT_MANIFEST)
        write_json(tmp / EXPORT_MANIFEST, {
            "format": format, "sirerag_version": __version__, "index": str(index.path.resolve()),
            "entries": len(index.pool), "files": files, "embedder": index.manifest.embedder and index.manifest.embedder.to_dict(),
            "embedding_dim": int(index.pool.embeddings.shape[1]),
        })
    logger.info("exported %d entries as %s to %s", len(index.pool), format, out)
    return ExportReport(out=Path(shown).expanduser(), format=format, rows=len(index.pool), files=tuple(files))

