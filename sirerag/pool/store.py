"""The retrieval pool: every node of every tree in one list, saved in an index directory.

An index directory holds ``manifest.json`` (format version, parameters, component
types), ``entries.jsonl`` (one pool entry per line, with provenance) and
``embeddings.npy`` (float32, one row per entry), plus the records of the build
(``documents.jsonl``, ``chunks.jsonl``, ``propositions.jsonl``) and optional
component subfolders (``graph/``, ``colbert/``) listed in the manifest.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import damaged, load_npy, read_manifest, save_npy, write_jsonl
from sirerag.core.io.files import loads_index_json
from sirerag.core.io.mapped import map_npy, npy_writer
from sirerag.core.io.manifest import Component, Manifest, check_sample, refresh_files, rewrite_manifest, sha256_matches
from sirerag.pool.entries import LazyEntries, map_file
from sirerag.pool.entry_table import IDS as TABLE_IDS, LINES as TABLE_LINES, EntryTable, read_entry_table, save_entry_table
from sirerag.trees.base import TreeResult
from sirerag.core.types import Node, Pool

logger = logging.getLogger(__name__)

ENTRIES = "entries.jsonl"
EMBEDDINGS = "embeddings.npy"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
PROPOSITIONS = "propositions.jsonl"


def flatten(trees: Sequence[TreeResult]) -> Pool:
    """Flatten trees into one pool, in order; a node id seen twice is kept once."""
    kept = _kept_rows(trees)
    entries = [tree.nodes[i] for tree, rows in zip(trees, kept) for i in rows]
    matrix = np.vstack([np.asarray(tree.embeddings)[rows] for tree, rows in zip(trees, kept) if rows]
                       ).astype(np.float32) if entries else np.zeros((0, _dim(trees)), dtype=np.float32)
    return Pool(entries=tuple(entries), embeddings=matrix)


def write_flat_pool(directory: str | Path, trees: Sequence[TreeResult]) -> Pool:
    """Flatten trees (as :func:`flatten`) straight into ``entries.jsonl`` and ``embeddings.npy`` (the same bytes
    as :func:`save_pool` of the flattened pool): each tree's rows are copied into the memory-mapped file in
    blocks, never stacked in memory. Returns the pool read back from the files written: its entries read lazily
    (:class:`~sirerag.pool.entries.LazyEntries`; :meth:`Pool.scan` parses each without keeping it), its vectors
    mapped read-only, so the trees' nodes need not outlive this stage."""
    directory = Path(directory)
    kept = _kept_rows(trees)
    entries = tuple(tree.nodes[i] for tree, rows in zip(trees, kept) for i in rows)
    table = write_entries(directory, entries)
    with npy_writer(directory / EMBEDDINGS, (len(entries), _dim(trees)), np.float32) as matrix:
        start = 0
        for tree, rows in zip(trees, kept):
            for block in range(0, len(rows), _BLOCK_ROWS):
                taken = rows[block:block + _BLOCK_ROWS]
                matrix[start:start + len(taken)] = np.asarray(tree.embeddings)[taken]
                start += len(taken)
        del matrix
    del entries
    return Pool(entries=LazyEntries(directory / ENTRIES, map_file(directory / ENTRIES), directory, table),
                embeddings=map_npy(directory / EMBEDDINGS, index=directory))


#: Rows copied at a time by :func:`write_flat_pool` (6 MiB of 384-d float32).
_BLOCK_ROWS = 4096


def _kept_rows(trees: Sequence[TreeResult]) -> list[list[int]]:
    """Per tree, the rows the pool keeps: every node whose id no earlier node had."""
    seen: set[str] = set()
    kept: list[list[int]] = []
    for tree in trees:
        rows = []
        for i, node in enumerate(tree.nodes):
            if node.id not in seen:
                seen.add(node.id)
                rows.append(i)
        kept.append(rows)
    return kept


def _dim(trees: Sequence[TreeResult]) -> int:
    return int(trees[0].embeddings.shape[1]) if trees and trees[0].embeddings.ndim == 2 else 0


def write_entries(directory: Path, entries: Sequence[Node]) -> EntryTable:
    """``entries.jsonl`` and its entry table (:mod:`~sirerag.pool.entry_table`); returns the table."""
    write_jsonl(directory / ENTRIES, (e.to_dict() for e in entries))
    return save_entry_table(directory, entries, map_file(directory / ENTRIES))


def save_pool(directory: str | Path, pool: Pool) -> None:
    directory = Path(directory)
    write_entries(directory, pool.entries)
    save_npy(directory / EMBEDDINGS, np.asarray(pool.embeddings, dtype=np.float32))  # no copy of float32 rows


def load_pool(directory: str | Path, manifest: Manifest | None = None) -> Pool:
    """Read ``entries.jsonl`` and ``embeddings.npy``; with the manifest, also check them against it.

    Both files are memory-mapped: the entries are parsed when first used (:class:`~sirerag.pool.entries.
    LazyEntries`; their ids and kinds are read at once) and the embeddings are a read-only array.

    Raises:
        IndexFormatError: a damaged line (now, or when the entry is first used), a damaged or mis-shaped array,
            or files that do not match each other or the manifest; the message names the file.
    """
    directory = Path(directory)
    table = _table(directory, manifest)  # None: an index written before the table (or no manifest): read it all
    data = _mapped(directory, ENTRIES, manifest) if table is None else _sampled(directory, ENTRIES, manifest)
    entries = LazyEntries(directory / ENTRIES, data, directory, table)
    embeddings = load_npy(directory / EMBEDDINGS, mmap=True, index=directory)
    if manifest is not None:
        check_sample(directory, manifest, EMBEDDINGS)  # a same-size damaged file, at the cost of a few reads
    if embeddings.dtype != np.float32 or embeddings.ndim != 2 or embeddings.shape[0] != len(entries):
        raise IndexFormatError(damaged(
            directory / EMBEDDINGS, f"expected float32 of shape ({len(entries)}, dim) for the {len(entries)} "
            f"lines of {ENTRIES}, got {embeddings.dtype} {embeddings.shape}", directory))
    try:
        return Pool(entries=entries, embeddings=embeddings)
    except ValueError as exc:
        raise IndexFormatError(damaged(directory / ENTRIES, str(exc), directory)) from exc


def _table(directory: Path, manifest: Manifest | None) -> EntryTable | None:
    """The entry table the manifest lists with a sample checksum of ``entries.jsonl``, its files checked by
    their sha256; None when the manifest predates it (or there is no manifest)."""
    record = manifest.files.get(ENTRIES) if manifest is not None else None
    if manifest is None or record is None or record.sample_sha256 is None or TABLE_IDS not in manifest.files:
        return None
    ids, lines = _mapped(directory, TABLE_IDS, manifest), _mapped(directory, TABLE_LINES, manifest)
    return read_entry_table(directory, bytes(ids), bytes(lines), record.size)


def map_checked(directory: Path, name: str, manifest: Manifest) -> bytes:
    """The bytes of an index file, memory-mapped: checked by size and sample checksum when the manifest records
    one for it, else by its sha256 (read whole)."""
    record = manifest.files.get(name)
    if record is not None and record.sample_sha256 is not None:
        return _sampled(directory, name, manifest)
    return _mapped(directory, name, manifest)


def _sampled(directory: Path, name: str, manifest: Manifest | None) -> bytes:
    """The bytes of an index file, memory-mapped and checked by its size and sample checksum (not read whole)."""
    path = directory / name
    try:
        data = map_file(path)
    except (FileNotFoundError, IsADirectoryError):
        raise IndexFormatError(damaged(path, "index file is missing", directory)) from None
    record = manifest.files.get(name) if manifest is not None else None
    if record is not None and len(data) != record.size:
        raise IndexFormatError(damaged(path, f"{len(data)} bytes where the manifest records {record.size} "
                                             "(damaged, or the index was rebuilt since it was loaded: load it again)",
                                       directory))
    if manifest is not None:
        check_sample(directory, manifest, name)
    return data


def _mapped(directory: Path, name: str, manifest: Manifest | None = None) -> bytes:
    """The bytes of an index file, memory-mapped; with the manifest, checked against its size and sha256."""
    path = directory / name
    try:
        data = map_file(path)
    except (FileNotFoundError, IsADirectoryError):
        raise IndexFormatError(damaged(path, "index file is missing", directory)) from None
    if manifest is not None:
        sha256_matches(directory, manifest, name, data)
    return data


def read_records(directory: Path, name: str,
                 manifest: Manifest | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, record)`` of a JSONL index file; with the manifest, the bytes read are
    checked against its size and sha256 first (reading dominates; hashing is cheap)."""
    path = directory / name
    if not path.is_file():
        raise IndexFormatError(damaged(path, "index file is missing", directory))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise IndexFormatError(damaged(path, "index file is missing", directory)) from None
    if manifest is not None:
        sha256_matches(directory, manifest, name, data)
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = loads_index_json(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise IndexFormatError(damaged(f"{path}:{lineno}", f"damaged line ({exc})", directory)) from exc
        if not isinstance(record, dict):
            raise IndexFormatError(damaged(f"{path}:{lineno}", "damaged line (not a JSON object)", directory))
        yield lineno, record


class Writable(Protocol):
    """A record written as one JSON object (:class:`~sirerag.core.types.Document`, ``Chunk``, ``Proposition``...)."""

    def to_dict(self) -> dict[str, Any]: ...


def save_records(directory: str | Path, name: str, records: Iterable[Writable]) -> int:
    """Write records that have ``to_dict`` (Document, Chunk, Proposition, ...) as JSONL."""
    return write_jsonl(Path(directory) / name, (r.to_dict() for r in records))


def register_component(directory: str | Path, name: str, **info: Any) -> Manifest:  # Any: JSON values
    """Record an optional component (its ``path`` relative to the index, type, parameters)
    in the manifest with the size and sha256 of its files, rewriting it atomically.
    The caller holds the index's write lock (:func:`sirerag.core.io.index_lock`)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    component = manifest.components[name] = Component.from_dict(info, f"components.{name}")
    if component.path is not None and (directory / component.path).is_dir():
        return refresh_files(directory, manifest, component.path)
    return rewrite_manifest(directory, manifest)
