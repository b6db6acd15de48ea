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
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sirerag import __version__
from sirerag.errors import ConfigError, InputError, check, require
from sirerag.io import atomic_dir, atomic_path, index_lock, read_json, save_npy, write_json, write_jsonl
from sirerag.io.staging import refuse_special
from sirerag.pool import DOCUMENTS, Index, load_index
from sirerag.types import Node

logger = logging.getLogger(__name__)

FORMATS = ("beir", "colbert", "jsonl", "parquet")
EXPORT_MANIFEST = "export.json"
_TSV_BREAKS = re.compile(r"[\t\r\n]+")


def collection_text(text: str) -> str:
    """``text`` for one line of a ``pid<TAB>text`` file: tabs and line breaks become spaces."""
    return _TSV_BREAKS.sub(" ", text).strip()


def write_collection(path: str | Path, texts: Sequence[str]) -> None:
    """Write ColBERT's ``pid<TAB>text`` lines (pid = 0, 1, ...) atomically, UTF-8."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for pid, text in enumerate(texts):
            fh.write(f"{pid}\t{collection_text(text)}\n")


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


def _write_beir(index: Index, folder: Path) -> list[str]:
    write_jsonl(folder / "corpus.jsonl", (beir_record(e) for e in index.pool.entries))
    return ["corpus.jsonl"]


def _write_colbert(index: Index, folder: Path) -> list[str]:
    write_collection(folder / "collection.tsv", [e.text for e in index.pool.entries])
    write_json(folder / "pid_to_entry.json", [e.id for e in index.pool.entries])
    return ["collection.tsv", "pid_to_entry.json"]


def _write_jsonl(index: Index, folder: Path) -> list[str]:
    write_jsonl(folder / "entries.jsonl", (e.to_dict() for e in index.pool.entries))
    save_npy(folder / "embeddings.npy", np.asarray(index.pool.embeddings, dtype=np.float32))
    return ["entries.jsonl", "embeddings.npy"]


def _write_parquet(index: Index, folder: Path) -> list[str]:
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


WRITERS: dict[str, Callable[[Index, Path], list[str]]] = {
    "beir": _write_beir, "colbert": _write_colbert, "jsonl": _write_jsonl, "parquet": _write_parquet,
}


def _check_out(out: Path, source: Path, overwrite: bool) -> None:
    """``out`` must be missing, empty, or (with ``overwrite``) an earlier export holding only
    the files its ``export.json`` lists; never the source index, inside it, or around it."""
    refuse_special(out)
    src, dst = source.resolve(), out.resolve()
    if dst == src or src in dst.parents or dst in src.parents:
        raise ConfigError(f"--out {out} is the source index, inside it or around it ({source}); "
                          "choose a folder outside the index")
    if not out.exists() or not any(out.iterdir()):
        return
    try:
        info = read_json(out / EXPORT_MANIFEST)
    except InputError:
        info = None
    listed = info.get("files") if isinstance(info, dict) else None
    if not (isinstance(info, dict) and info.get("format") in FORMATS and "sirerag_version" in info
            and isinstance(listed, list) and all(isinstance(f, str) for f in listed)):
        raise ConfigError(f"--out {out} exists and is not a sirerag export (no valid {EXPORT_MANIFEST}); "
                          "choose a new folder")
    present = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir())
    foreign = [f for f in present if f not in listed] + [p.name for p in out.iterdir() if p.is_dir()]
    if foreign:
        raise ConfigError(f"--out {out} holds files its {EXPORT_MANIFEST} does not list ({', '.join(foreign[:5])}); "
                          "sirerag replaces only what it wrote: move them or choose a new folder")
    if not overwrite:
        raise ConfigError(f"--out {out} already holds an export; pass overwrite=True (--overwrite) to replace it")


def export_pool(index: Index | str | Path, out: str | Path, format: str, *, overwrite: bool = False) -> ExportReport:
    """Write the pool of an index in ``format`` into the folder ``out``.

    The files are written into a temporary folder beside ``out`` that is renamed to
    ``out`` when complete, so a failed export leaves nothing behind.

    Args:
        index: an index directory or a loaded :class:`~sirerag.pool.Index`.
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
    out = Path(out).expanduser()
    source = index.path if isinstance(index, Index) else Path(index)
    _check_out(out, source, overwrite)
    index = index if isinstance(index, Index) else load_index(index)
    with index_lock(out, "export"), atomic_dir(out) as tmp:
        _check_out(out, source, overwrite)  # again, under the lock
        files = WRITERS[format](index, tmp)
        if (index.path / DOCUMENTS).is_file():
            shutil.copyfile(index.path / DOCUMENTS, tmp / DOCUMENTS)
            files.append(DOCUMENTS)
        files.append(EXPORT_MANIFEST)
        write_json(tmp / EXPORT_MANIFEST, {
            "format": format, "sirerag_version": __version__, "index": str(index.path.resolve()),
            "entries": len(index.pool), "files": files, "embedder": index.manifest.get("embedder"),
            "embedding_dim": int(index.pool.embeddings.shape[1]),
        })
    logger.info("exported %d entries as %s to %s", len(index.pool), format, out)
    return ExportReport(out=out, format=format, rows=len(index.pool), files=tuple(files))

