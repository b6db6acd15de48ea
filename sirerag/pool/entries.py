"""The entries of a saved pool, parsed when first used.

A search reads every pool entry's id (to name its hits) and kind (the pool rule), and the passages of the
leaves only when the rule lifts a passage; it reads the rest (the text, the children...) of the few entries it
returns or inspects. :class:`LazyEntries` keeps ``entries.jsonl`` memory-mapped with the offset of each line,
reads those columns from the build's entry table (:mod:`~sirerag.pool.entry_table`), or for an index written
before it with one scan of the bytes, and parses a line into a :class:`~sirerag.core.types.Node` on first access
(kept). So loading a pool costs reading the table, not a parse of every entry.

The columns are read from the layout :func:`~sirerag.pool.store.save_pool` writes (``json.dumps`` of
:meth:`Node.to_dict`: ``{"id": ..., "text": ..., "kind": ..., "tree": ...``). The key sequences matched, such
as ``, "kind": "``, hold an unescaped quote, so they cannot occur inside a JSON string: a match is the record's
own field. A line the scan cannot read (another layout, an escaped id, an unknown kind) is parsed in full at
load, so a damaged line is reported there, naming the file and line, as before.
"""
from __future__ import annotations

import mmap
import re
from pathlib import Path
from typing import Any, Iterator, Sequence, overload

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import damaged
from sirerag.core.io.files import loads_index_json
from sirerag.core.types import KINDS, TREES, Node

from sirerag.pool.entry_table import EntryTable, line_offsets

#: :meth:`LazyEntries.stream` hands back the pages it has read every this many bytes
_RELEASE_BYTES = 1 << 22

_ID = re.compile(rb'\{"id": "([^"\\\n]*)", "text": "')
_KIND = re.compile(rb', "kind": "([a-z]+)", "tree": "([a-z]+)", "level": ')
_PASSAGES = re.compile(rb', "passages": (\[[^\]\n]*\]), "entity": ')


def map_file(path: Path) -> bytes:
    """The bytes of ``path``, memory-mapped read-only (an empty file: ``b""``). The index's files are
    replaced by a rename, never rewritten in place, so the mapping keeps the commit that was loaded."""
    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)  # type: ignore[return-value]


class LazyEntries(Sequence[Node]):
    """The pool entries of one ``entries.jsonl``, in file order; ``ids`` and ``kinds`` are read for all at once,
    each :class:`Node` on first access.

    Args:
        path: the file (named in errors).
        data: its bytes (:func:`map_file`).
        index: the index folder (for the advice in errors).
        table: the build's entry table (:func:`~sirerag.pool.entry_table.read_entry_table`); None: scan the file.

    Raises:
        IndexFormatError: a line is not a pool entry (naming ``file:line``), at load for a line whose id or kind
            cannot be read, else when that entry is first used.
    """

    ids: list[str]
    kinds: list[str]

    def __init__(self, path: Path, data: bytes, index: Path | None = None, table: EntryTable | None = None) -> None:
        self.path, self._data, self._index = path, data, index
        self._nodes: dict[int, Node] = {}
        if table is not None:  # the build's table: nothing to scan
            self._starts, self._ends = table.starts, table.ends
            self._lines = np.arange(1, len(table.starts) + 1)
            self.ids, self.kinds = table.ids, table.kinds
            return
        self._starts, self._ends, self._lines = line_offsets(data)
        n = len(self._starts)
        ids: list[str | None] = [None] * n
        kinds: list[str | None] = [None] * n
        found = [(m.start(), m.group(1)) for m in _ID.finditer(data)]
        twice: set[int] = set()
        for row, (_, raw) in zip(self._rows([p for p, _ in found]), found):
            if ids[row] is not None:
                twice.add(row)
            try:
                ids[row] = raw.decode("utf-8")
            except UnicodeDecodeError:
                continue  # parsed below, and reported there
        matches = [(m.start(), m.group(1).decode(), m.group(2).decode()) for m in _KIND.finditer(data)]
        for row, (_, kind, tree) in zip(self._rows([p for p, _, _ in matches]), matches):
            ok = kinds[row] is None and kind in KINDS and tree in TREES
            kinds[row] = kind if ok else ""  # twice on one line, or unknown: parsed below
        for row in range(n):
            if ids[row] is None or not kinds[row] or row in twice:
                node = self[row]  # a line the scan cannot read: parse it now (and report it now if damaged)
                ids[row], kinds[row] = node.id, node.kind
        self.ids = ids  # type: ignore[assignment]
        self.kinds = kinds  # type: ignore[assignment]

    def _rows(self, offsets: Sequence[int]) -> list[int]:
        """The row of the line holding each byte offset."""
        return (np.searchsorted(self._starts, np.asarray(offsets, dtype=np.int64), side="right") - 1).tolist()

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Node]: ...

    def __getitem__(self, i: int | slice) -> Node | Sequence[Node]:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        row = range(len(self))[i]  # IndexError, negative indices
        node = self._nodes.get(row)
        if node is None:
            node = self._nodes[row] = self._parse(row)
        return node

    def __iter__(self) -> Iterator[Node]:
        return (self[row] for row in range(len(self)))

    def __eq__(self, other: object) -> bool:  # equal to the tuple it stands for, as a tuple would be
        if not isinstance(other, (LazyEntries, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def stream(self) -> Iterator[Node]:
        """Every entry in file order, parsed for this pass and not kept (an entry parsed before is reused); the
        pages of the mapped file behind the pass are handed back to the kernel as it goes (clean copies of the
        file), so a pass over the pool holds a few pages of it, not the whole file."""
        done = 0  # bytes before this offset are handed back
        for row in range(len(self)):
            node = self._nodes.get(row)
            yield node if node is not None else self._parse(row)
            if int(self._ends[row]) - done >= _RELEASE_BYTES:
                done = self._release(done, int(self._ends[row]))
        self._release(done, len(self._data))

    def _release(self, start: int, stop: int) -> int:
        """Hand back the whole pages of the mapped file in ``[start, stop)``; returns where the next call starts."""
        stop = stop - stop % mmap.PAGESIZE
        if isinstance(self._data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED") and stop > start:
            self._data.madvise(mmap.MADV_DONTNEED, start, stop - start)
        return max(start, stop)

    @property
    def raw(self) -> bytes:
        """The file's bytes as read (memory-mapped: :func:`~sirerag.core.io.mapped.drop_pages` hands back the
        pages a scan read)."""
        return self._data

    @property
    def parsed(self) -> int:
        """How many entries have been parsed so far."""
        return len(self._nodes)

    def _parse(self, row: int) -> Node:
        where = f"{self.path}:{int(self._lines[row])}"
        raw = self._data[int(self._starts[row]):int(self._ends[row])]
        try:
            record: Any = loads_index_json(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise IndexFormatError(damaged(where, f"damaged line ({exc})", self._index)) from exc
        if not isinstance(record, dict):
            raise IndexFormatError(damaged(where, "damaged line (not a JSON object)", self._index))
        try:
            node = Node.from_dict(record)
        except (TypeError, ValueError, KeyError) as exc:
            raise IndexFormatError(damaged(where, f"not a pool entry ({exc})", self._index)) from exc
        ids, kinds = getattr(self, "ids", None), getattr(self, "kinds", None)
        if ids is not None and node.id != ids[row]:  # the scan (or table) and the parse disagree: trust neither
            raise IndexFormatError(damaged(where, f"entry id {node.id!r} read as {ids[row]!r}", self._index))
        if kinds is not None and node.kind != kinds[row]:
            raise IndexFormatError(damaged(where, f"entry kind {node.kind!r} read as {kinds[row]!r}", self._index))
        return node

    def leaf_passages(self) -> dict[int, tuple[str, ...]]:
        """The passages of every leaf entry, by row (read with one scan, not by parsing the leaves)."""
        out: dict[int, tuple[str, ...]] = {}
        leaf = np.fromiter((kind == "leaf" for kind in self.kinds), dtype=bool, count=len(self.kinds))
        # the byte spans of the runs of leaf rows (a built pool holds its leaves first, in one run)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], leaf.view(np.int8), [0]))))
        found = [(m.start(), m.group(1)) for first, last in zip(edges[::2], edges[1::2] - 1)
                 for m in _PASSAGES.finditer(self._data, int(self._starts[first]), int(self._ends[last]))]
        for row, (_, raw) in zip(self._rows([p for p, _ in found]), found):
            if self.kinds[row] == "leaf" and row not in out:
                try:
                    value = loads_index_json(raw)
                except ValueError:
                    continue
                if isinstance(value, list) and all(isinstance(p, str) for p in value):
                    out[row] = tuple(value)
        for row in np.flatnonzero(leaf).tolist():
            if row not in out:
                out[row] = self[row].passages
        return out
