"""The surface forms of the entity names as arrays a search maps instead of parsing.

:class:`~sirerag.graph.surface.SurfaceIndex` looks up every span of a query in a table of surface forms. The build
stored that table as ``surface.json``, and a one-shot search parsed all of it into a dict before the first
query: 0.1 s at 30,000 passages, growing with the number of names. The build now also writes it as four arrays
under ``graph/surface/`` (open ``.npy`` files, nothing pickled)::

    hashes.npy    (n,) uint64, ascending: the first 8 bytes of each form's BLAKE2b digest (UTF-8), little-endian
    nodes.npy     (n,) int64: the entity node of each form
    offsets.npy   (n + 1,) int64: form i's UTF-8 bytes are text[offsets[i]:offsets[i + 1]]
    text.npy      the forms' UTF-8 bytes, uint8

and a search memory-maps them: a span's form is hashed, found by binary search among the hashes, and its bytes
compared with the stored form's, so a hash shared by two forms still finds the right one. Why not a library:
numpy's sorted arrays are all a lookup needs, and the index stays made of ``.npy`` files; a key-value store
(SQLite, LMDB) would answer the same few hundred lookups per question but adds a file format to the index.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from sirerag.core.errors import IndexFormatError
from sirerag.core.io import load_npy, save_npy

#: the files of a stored table, inside its folder
FILES = ("hashes.npy", "nodes.npy", "offsets.npy", "text.npy")


def form_hashes(forms: Iterable[str]) -> np.ndarray:
    """uint64 hash of each form: the first 8 bytes of its BLAKE2b digest of the UTF-8 bytes, little-endian."""
    return np.array([int.from_bytes(hashlib.blake2b(form.encode("utf-8"), digest_size=8).digest(), "little")
                     for form in forms], dtype=np.uint64)


def save_form_table(directory: Path, forms: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Write ``(form, node)`` pairs (each form once) as a table into ``directory``; returns ``{"forms", "longest"}``
    for the graph's record."""
    directory.mkdir(parents=True, exist_ok=True)
    hashes = form_hashes(form for form, _ in forms)
    order = np.argsort(hashes, kind="stable")
    encoded = [forms[i][0].encode("utf-8") for i in order.tolist()]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    save_npy(directory / FILES[0], hashes[order])
    save_npy(directory / FILES[1], np.array([int(forms[i][1]) for i in order.tolist()], dtype=np.int64))
    save_npy(directory / FILES[2], offsets)
    save_npy(directory / FILES[3], np.frombuffer(b"".join(encoded), dtype=np.uint8).copy())
    return {"forms": len(encoded), "longest": max((len(form) for form, _ in forms), default=0)}


class FormTable:
    """Surface form -> entity node, over the arrays of :func:`save_form_table` (memory-mapped, read-only).

    Args:
        hashes, nodes, offsets, text: the table's arrays.
        longest: the number of characters of its longest form.
    """

    def __init__(self, hashes: np.ndarray, nodes: np.ndarray, offsets: np.ndarray, text: np.ndarray,
                 longest: int) -> None:
        self.hashes, self.nodes, self.offsets, self.text, self.longest = hashes, nodes, offsets, text, int(longest)

    @classmethod
    def open(cls, directory: Path, *, forms: int, longest: int, n_nodes: int) -> "FormTable":
        """The table in ``directory``, checked: ``forms`` ascending hashes, offsets that cover ``text`` in order,
        nodes below ``n_nodes``.

        Raises:
            IndexFormatError: a file is missing or does not describe such a table (the message names the folder).
        """
        hashes, nodes, offsets, text = (load_npy(directory / name, mmap=True) for name in FILES)
        ok = (hashes.dtype == np.uint64 and hashes.shape == (forms,) and nodes.dtype == np.int64
              and nodes.shape == (forms,) and offsets.dtype == np.int64 and offsets.shape == (forms + 1,)
              and text.dtype == np.uint8 and text.ndim == 1)
        if ok and forms:
            ok = (bool(np.all(hashes[1:] >= hashes[:-1])) and int(offsets[0]) == 0
                  and int(offsets[-1]) == text.size and bool(np.all(offsets[1:] >= offsets[:-1]))
                  and int(nodes.min()) >= 0 and int(nodes.max()) < n_nodes)
        if not ok:
            raise IndexFormatError(f"{directory}: the surface form arrays ({', '.join(FILES)}) do not describe "
                                   f"{forms} forms of a {n_nodes}-node graph")
        return cls(hashes, nodes, offsets, text, longest)

    def __len__(self) -> int:
        return int(self.hashes.shape[0])

    def get_many(self, forms: Sequence[str]) -> list[int | None]:
        """The node of each of ``forms``, or None where it is not a stored form."""
        if not forms or not len(self):
            return [None] * len(forms)
        wanted = form_hashes(forms)
        starts = np.searchsorted(self.hashes, wanted, side="left")
        out: list[int | None] = []
        for form, h, at in zip(forms, wanted.tolist(), starts.tolist()):
            node = None
            raw = form.encode("utf-8")
            while at < len(self) and int(self.hashes[at]) == h:  # equal hashes: compare the bytes
                if self.text[int(self.offsets[at]):int(self.offsets[at + 1])].tobytes() == raw:
                    node = int(self.nodes[at])
                    break
                at += 1
            out.append(node)
        return out

    def get(self, form: str, default: int | None = None) -> int | None:
        node = self.get_many([form])[0]
        return default if node is None else node
