"""The pool's entry table: each entry's id, kind and line of ``entries.jsonl``, as two small arrays.

Loading a pool needs every entry's id and kind, and where its line is. Reading them from ``entries.jsonl`` means
touching every byte of it (118 MB at 30,000 passages, a few hundred MB at 100,000), and so does its sha256. A
build therefore writes the table beside it:

* ``entry_ids.npy``: ``uint8 (n, width)``, each id's UTF-8 bytes padded with zeros;
* ``entry_lines.npy``: ``int64 (n, 3)``, each line's start and end offsets in ``entries.jsonl`` and the entry's
  kind (its position in :data:`~sirerag.core.types.KINDS`).

With the table, a load reads these arrays (checked by their sha256) and checks ``entries.jsonl`` by its size and
sample checksum, as the memory-mapped arrays are; a line is parsed when first used, and its id and kind must be
the table's. ``sirerag verify`` still reads every byte and parses every line. An index written before the table
is read as before, by a scan of the file.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import damaged, save_npy
from sirerag.core.types import KINDS, Node

IDS = "entry_ids.npy"
LINES = "entry_lines.npy"


class EntryTable:
    """Ids, kinds and line offsets of the entries of one ``entries.jsonl``."""

    def __init__(self, ids: list[str], kinds: list[str], starts: np.ndarray, ends: np.ndarray) -> None:
        self.ids, self.kinds, self.starts, self.ends = ids, kinds, starts, ends


def line_offsets(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start and end offsets and 1-based numbers of the non-blank lines of ``data``."""
    array = np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, np.uint8)
    ends = np.flatnonzero(array == ord("\n"))
    if len(data) and data[-1:] != b"\n":
        ends = np.append(ends, len(data))
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64) if ends.size else np.zeros(0, np.int64)
    keep = np.ones(ends.size, dtype=bool)
    for i in np.flatnonzero((starts == ends) | (array[np.minimum(starts, max(len(array) - 1, 0))] != ord("{"))):
        keep[i] = bool(data[int(starts[i]):int(ends[i])].strip())  # blank lines are skipped, as in other files
    return starts[keep], ends[keep], np.arange(1, ends.size + 1)[keep]


def save_entry_table(directory: Path, entries: Sequence[Node], data: bytes) -> EntryTable:
    """Write the table of ``entries``, whose ``entries.jsonl`` holds ``data``, into ``directory``; returns it."""
    starts, ends, _ = line_offsets(data)
    if len(starts) != len(entries):
        raise ValueError(f"{len(entries)} entries but {len(starts)} lines in entries.jsonl")
    encoded = [entry.id.encode("utf-8") for entry in entries]
    width = max((len(b) for b in encoded), default=1) or 1
    ids = np.zeros((len(encoded), width), dtype=np.uint8)
    for row, raw in enumerate(encoded):
        ids[row, :len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    kinds = np.fromiter((KINDS.index(entry.kind) for entry in entries), dtype=np.int64, count=len(entries))
    save_npy(directory / IDS, ids)
    save_npy(directory / LINES, np.stack([starts, ends, kinds], axis=1) if len(entries) else
             np.zeros((0, 3), np.int64))
    return EntryTable([entry.id for entry in entries], [entry.kind for entry in entries], starts, ends)


def _array(path: Path, raw: bytes, index: Path) -> np.ndarray:
    try:
        array = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise IndexFormatError(damaged(path, f"damaged array file ({exc})", index)) from exc
    if not isinstance(array, np.ndarray):
        raise IndexFormatError(damaged(path, "expected one .npy array", index))
    return array


def read_entry_table(directory: Path, ids_raw: bytes, lines_raw: bytes, size: int) -> EntryTable:
    """The table from the bytes of its two files, checked against an ``entries.jsonl`` of ``size`` bytes.

    Raises:
        IndexFormatError: an array of the wrong type or shape, offsets outside the file or out of order, or an
            unknown kind; the message names the file.
    """
    ids, lines = _array(directory / IDS, ids_raw, directory), _array(directory / LINES, lines_raw, directory)
    if ids.dtype != np.uint8 or ids.ndim != 2:
        raise IndexFormatError(damaged(directory / IDS, f"expected uint8 (n, width), got {ids.dtype} {ids.shape}",
                                       directory))
    if lines.dtype != np.int64 or lines.shape != (len(ids), 3):
        raise IndexFormatError(damaged(directory / LINES, f"expected int64 ({len(ids)}, 3), got {lines.dtype} "
                                                          f"{lines.shape}", directory))
    starts, ends, kinds = lines[:, 0], lines[:, 1], lines[:, 2]
    ordered = bool((starts[1:] == ends[:-1] + 1).all()) and (not len(ids) or (starts[0] == 0 and ends[-1] == size - 1))
    if not ordered or (ends < starts).any() or (len(ids) == 0 and size != 0):
        raise IndexFormatError(damaged(directory / LINES, "line offsets do not cover entries.jsonl line by line",
                                       directory))
    if len(kinds) and (kinds.min() < 0 or kinds.max() >= len(KINDS)):
        raise IndexFormatError(damaged(directory / LINES, "unknown entry kind", directory))
    try:  # numpy's fixed-width bytes drop the zero padding; decoding them one by one is 4x np.char.decode's speed
        names = [raw.decode("utf-8") for raw in np.ascontiguousarray(ids).view(f"S{ids.shape[1]}").ravel().tolist()]
    except UnicodeDecodeError as exc:
        raise IndexFormatError(damaged(directory / IDS, f"an id is not UTF-8 ({exc})", directory)) from exc
    return EntryTable(names, [KINDS[k] for k in kinds.tolist()], starts.copy(), ends.copy())
