"""A loaded index: :class:`LoadedIndex`, one commit of an index directory, and :func:`load_index`, which
reads and checks it (the pool's files themselves are read by :mod:`sirerag.pool.store`)."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from sirerag.core.errors import IndexChangedError, IndexFormatError, InputError
from sirerag.core.io import check_files, damaged, read_manifest
from sirerag.core.io.manifest import Manifest, check_sample, commit_id, parse_manifest
from sirerag.core.types import Chunk, Document, Proposition, Pool
from sirerag.pool.documents import DocumentLookup
from sirerag.pool.store import CHUNKS, DOCUMENTS, PROPOSITIONS, load_pool, map_checked, read_records


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
            records = list(read_records(self.path, name, self.manifest))
        for lineno, record in records:
            try:
                rows.append(cls.from_dict(record))
            except (TypeError, ValueError, KeyError) as exc:
                raise IndexFormatError(damaged(f"{self.path / name}:{lineno}", f"not a {cls.__name__} ({exc})",
                                               self.path)) from exc
        return rows

    def documents(self) -> list[Document]:
        return self._read(DOCUMENTS, Document)

    def document_lookup(self) -> Mapping[str, Document]:
        """The documents by id, each read when first asked for (:class:`~sirerag.pool.documents.DocumentLookup`:
        a search's titles without parsing ``documents.jsonl``); empty when the index holds none."""
        if DOCUMENTS not in self.manifest.files:
            return {}
        with self.reading():
            data = map_checked(self.path, DOCUMENTS, self.manifest)
        return DocumentLookup(self.path / DOCUMENTS, data, self.documents, self.path)

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
    entry table against its sha256 and ``entries.jsonl`` against its sample checksum (its sha256 for
    an index written before the table), and the embeddings' dtype and shape; with
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
