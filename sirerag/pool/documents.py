"""The documents of an index by id, read one line at a time: what a search needs to title its results.

A search shows the title of each leaf it returns, so it needs a few documents, not ``documents.jsonl`` whole (tens
of MB at 100,000 passages, read and parsed in a one-shot search before). :class:`DocumentLookup` maps the file,
finds a document's line by its id (the writer puts ``{"id": ...`` first on each line: ``json.dumps`` of
:meth:`Document.to_dict`) and parses that line; the result is kept. A line found must hold the id asked for, and a
document not found by its id on a line start is looked for in the whole file, parsed once, so another layout
gives the same answers, only slower.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import damaged
from sirerag.core.io.files import loads_index_json
from sirerag.core.types import Document


class DocumentLookup(Mapping[str, Document]):
    """Documents of ``documents.jsonl`` by id, each parsed when first asked for.

    Args:
        path: the file (named in errors).
        data: its bytes (memory-mapped and checked by the caller).
        read_all: every document of the file, parsed (the fallback).
        index: the index folder (for the advice in errors).
    """

    def __init__(self, path: Path, data: bytes, read_all: Callable[[], list[Document]],
                 index: Path | None = None) -> None:
        self.path, self._data, self._read_all, self._index = path, data, read_all, index
        self._found: dict[str, Document | None] = {}
        self._all: dict[str, Document] | None = None

    def __getitem__(self, key: str) -> Document:
        if key not in self._found:
            self._found[key] = self._find(key)
        document = self._found[key]
        if document is None:
            raise KeyError(key)
        return document

    def _find(self, key: str) -> Document | None:
        if self._all is not None:
            return self._all.get(key)
        needle = b'{"id": ' + json.dumps(key, ensure_ascii=False).encode("utf-8") + b", "
        start = self._data.find(needle)
        while start > 0 and self._data[start - 1:start] != b"\n":  # only at the start of a line
            start = self._data.find(needle, start + 1)
        if start < 0:  # another layout, or absent: the whole file, once
            self._all = {d.id: d for d in self._read_all()}
            return self._all.get(key)
        end = self._data.find(b"\n", start)
        raw = self._data[start:end if end >= 0 else len(self._data)]
        try:
            record: Any = loads_index_json(raw)
            document = Document.from_dict(record)
        except (ValueError, TypeError, KeyError) as exc:
            raise IndexFormatError(damaged(self._where(start), f"not a document ({exc})", self._index)) from exc
        if document.id != key:
            raise IndexFormatError(damaged(self._where(start), f"document id {document.id!r} read as {key!r}",
                                           self._index))
        return document

    def _where(self, offset: int) -> str:
        line = self._data.count(b"\n", 0, offset) + 1
        return f"{self.path}:{line}"

    def __iter__(self) -> Iterator[str]:
        if self._all is None:
            self._all = {d.id: d for d in self._read_all()}
        return iter(self._all)

    def __len__(self) -> int:
        return sum(1 for _ in self)
