"""The retrieval pool: every node of every tree in one list, saved in an index directory.

An index directory holds ``manifest.json`` (format version, parameters, component
types), ``entries.jsonl`` (one pool entry per line, with provenance) and
``embeddings.npy`` (float32, one row per entry), plus the records of the build
(``documents.jsonl``, ``chunks.jsonl``, ``propositions.jsonl``) and optional
component subfolders (``graph/``, ``colbert/``) listed in the manifest.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from sirerag.core.errors import IndexChangedError, IndexFormatError, InputError
from sirerag.core.io import check_files, damaged, load_npy, read_manifest, save_npy, write_jsonl
from sirerag.core.io.files import loads_index_json
from sirerag.core.io.mapped import map_npy, npy_writer
from sirerag.core.io.manifest import (Component, Manifest, check_sample, commit_id, parse_manifest, refresh_files,
                                      rewrite_manifest, sha256_matches)
from sirerag.trees.base import TreeResult
from sirerag.core.types import Chunk, Document, Node, Pool, Proposition

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
    blocks, never stacked in memory. Returns the pool with its vectors mapped read-only from the file written."""
    directory = Path(directory)
    kept = _kept_rows(trees)
    entries = tuple(tree.nodes[i] for tree, rows in zip(trees, kept) for i in rows)
    write_jsonl(directory / ENTRIES, (e.to_dict() for e in entries))
    with npy_writer(directory / EMBEDDINGS, (len(entries), _dim(trees)), np.float32) as matrix:
        start = 0
        for tree, rows in zip(trees, kept):
            for block in range(0, len(rows), _BLOCK_ROWS):
                taken = rows[block:block + _BLOCK_ROWS]
                matrix[start:start + len(taken)] = np.asarray(tree.embeddings)[taken]
                start += len(taken)
        del matrix
    return Pool(entries=entries, embeddings=map_npy(directory / EMBEDDINGS, index=directory))


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


def save_pool(directory: str | Path, pool: Pool) -> None:
    directory = Path(directory)
    write_jsonl(directory / ENTRIES, (e.to_dict() for e in pool.entries))
    save_npy(directory / EMBEDDINGS, np.asarray(pool.embeddings, dtype=np.float32))  # no copy of float32 rows


def load_pool(directory: str | Path, manifest: Manifest | None = None) -> Pool:
    """Read ``entries.jsonl`` and ``embeddings.npy``; with the manifest, also check them against it.

    Raises:
        IndexFormatError: a damaged line, a damaged or mis-shaped array, or files that do not
            match each other or the manifest; the message names the file.
    """
    directory = Path(directory)
    entries = tuple(_node(directory, lineno, r) for lineno, r in _records(directory, ENTRIES, manifest))
    embeddings = load_npy(directory / EMBEDDINGS, index=directory)
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


def _node(directory: Path, lineno: int, record: dict[str, Any]) -> Node:
    try:
        return Node.from_dict(record)
    except (TypeError, ValueError, KeyError) as exc:
        raise IndexFormatError(damaged(f"{directory / ENTRIES}:{lineno}", f"not a pool entry ({exc})",
                                       directory)) from exc


def _records(directory: Path, name: str, manifest: Manifest | None = None) -> Iterator[tuple[int, Any]]:
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


def save_records(directory: str | Path, name: str, records: Iterable[Any]) -> int:
    """Write records that have ``to_dict`` (Document, Chunk, Proposition, ...) as JSONL."""
    return write_jsonl(Path(directory) / name, (r.to_dict() for r in records))


@dataclass(frozen=True, eq=False)
class LoadedIndex:
    """A loaded index directory, one commit of it (``commit``: :func:`sirerag.core.io.manifest.commit_id`):
    its typed :class:`~sirerag.core.io.manifest.Manifest` and its pool. What retrievers, reports and
    evaluations take (the public :class:`sirerag.Index` wraps one).

    Everything read later (documents, chunks, propositions, ``bm25/``, ``graph/``) is read under
    :meth:`reading`, which checks that the folder still holds that commit before and after the
    read: an index replaced by a build, add or remove in between is an
    :class:`~sirerag.core.errors.IndexChangedError` ("the index changed while it was being read"),
    never a mix of two indexes.
    """

    path: Path
    manifest: Manifest
    pool: Pool
    commit: str = ""

    def check_commit(self) -> None:
        """Raise IndexChangedError unless the folder still holds the commit this index was loaded from."""
        try:
            current = commit_id(parse_manifest(self.path))
        except (IndexFormatError, InputError, OSError):
            current = None
        if current != (self.commit or commit_id(self.manifest)):
            raise IndexChangedError(f"{self.path}: the index changed while it was being read (a build, add or "
                                    "remove replaced it since it was loaded); load it again")

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Read files of this commit in the block: the commit is checked before and after, and an
        error inside it becomes IndexChangedError when the folder no longer holds the commit."""
        self.check_commit()
        try:
            yield
        except IndexChangedError:
            raise
        except (OSError, ValueError, IndexFormatError):
            self.check_commit()  # the folder was replaced under the read: say so, not "damaged"
            raise
        self.check_commit()

    def check_arrays(self, prefix: str) -> None:
        """Check the array files under ``prefix`` (e.g. ``graph/``) against their sample checksums."""
        for rel in self.manifest.files:
            if rel.startswith(prefix) and rel.endswith(".npy"):
                check_sample(self.path, self.manifest, rel)

    def _read(self, name: str, cls: Any) -> list[Any]:
        rows = []
        with self.reading():
            records = list(_records(self.path, name, self.manifest))
        for lineno, record in records:
            try:
                rows.append(cls.from_dict(record))
            except (TypeError, ValueError, KeyError) as exc:
                raise IndexFormatError(damaged(f"{self.path / name}:{lineno}", f"not a {cls.__name__} ({exc})",
                                               self.path)) from exc
        return rows

    def documents(self) -> list[Document]:
        return self._read(DOCUMENTS, Document)

    def chunks(self) -> list[Chunk]:
        return self._read(CHUNKS, Chunk)

    def propositions(self) -> list[Proposition]:
        """Propositions of the relatedness build; empty when the index has none."""
        return self._read(PROPOSITIONS, Proposition) if PROPOSITIONS in self.manifest.files else []

    def component(self, name: str) -> Path | None:
        """Folder of an optional component (``graph``, ``colbert``) if the manifest lists it."""
        component = self.manifest.component(name)
        return self.path / component.path if component is not None and component.path is not None else None

    def took_component(self, manifest: Manifest) -> None:
        """Hold ``manifest``: this commit's manifest with a component recorded in place since it was loaded
        (a ColBERT index, whose files the commit id leaves out)."""
        if commit_id(manifest) != self.commit:
            raise IndexChangedError(f"{self.path}: the index changed while it was being read; load it again")
        object.__setattr__(self, "manifest", manifest)


def load_index(directory: str | Path, *, verify: bool = False) -> LoadedIndex:
    """Load an index directory written by ``sirerag build``.

    Always checks the format version, the size of every file the manifest lists, the
    entries against their recorded sha256 and the embeddings' dtype and shape; with
    ``verify`` also the sha256 of every file (what ``sirerag verify`` does, and more).
    An index swapped in by a rebuild while it is being read is read again.

    Raises:
        IndexFormatError: the index is missing, of another format, or damaged (the message
            names the file and says to rebuild or run ``sirerag verify``).
    """
    directory = Path(directory)
    for attempt in range(3):
        manifest = read_manifest(directory)
        try:
            check_files(directory, manifest, hashes=verify)
            pool = load_pool(directory, manifest)
            return LoadedIndex(path=directory, manifest=manifest, pool=pool, commit=commit_id(manifest))
        except IndexFormatError:
            if attempt == 2 or _current_manifest(directory) == manifest:
                raise  # damaged, not swapped for a new build while we read it
    raise AssertionError("unreachable")  # pragma: no cover


def _current_manifest(directory: Path) -> Manifest | None:
    try:
        return read_manifest(directory)
    except IndexFormatError:
        return None


def register_component(directory: str | Path, name: str, **info: Any) -> Manifest:
    """Record an optional component (its ``path`` relative to the index, type, parameters)
    in the manifest with the size and sha256 of its files, rewriting it atomically.
    The caller holds the index's write lock (:func:`sirerag.core.io.index_lock`)."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    component = manifest.components[name] = Component.from_dict(info, f"components.{name}")
    if component.path is not None and (directory / component.path).is_dir():
        return refresh_files(directory, manifest, component.path)
    return rewrite_manifest(directory, manifest)
