"""The retrieval pool: every node of every tree in one list, saved in an index directory.

An index directory holds ``manifest.json`` (format version, parameters, component
types), ``entries.jsonl`` (one pool entry per line, with provenance) and
``embeddings.npy`` (float32, one row per entry), plus the records of the build
(``documents.jsonl``, ``chunks.jsonl``, ``propositions.jsonl``) and optional
component subfolders (``graph/``, ``colbert/``) listed in the manifest.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from sirerag.errors import IndexFormatError, InputError
from sirerag.io import load_npy, read_jsonl, read_manifest, save_npy, write_json, write_jsonl
from sirerag.trees.base import TreeResult
from sirerag.types import Chunk, Document, Node, Pool, Proposition

logger = logging.getLogger(__name__)

ENTRIES = "entries.jsonl"
EMBEDDINGS = "embeddings.npy"
DOCUMENTS = "documents.jsonl"
CHUNKS = "chunks.jsonl"
PROPOSITIONS = "propositions.jsonl"


def flatten(trees: Sequence[TreeResult]) -> Pool:
    """Flatten trees into one pool, in order; a node id seen twice is kept once."""
    entries: list[Node] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    for tree in trees:
        for node, row in zip(tree.nodes, tree.embeddings):
            if node.id in seen:
                continue
            seen.add(node.id)
            entries.append(node)
            rows.append(row)
    dim = trees[0].embeddings.shape[1] if trees and trees[0].embeddings.ndim == 2 else 0
    matrix = np.vstack(rows).astype(np.float32) if rows else np.zeros((0, dim), dtype=np.float32)
    return Pool(entries=tuple(entries), embeddings=matrix)


def save_pool(directory: str | Path, pool: Pool) -> None:
    directory = Path(directory)
    write_jsonl(directory / ENTRIES, (e.to_dict() for e in pool.entries))
    save_npy(directory / EMBEDDINGS, pool.embeddings.astype(np.float32))


def load_pool(directory: str | Path) -> Pool:
    directory = Path(directory)
    entries = tuple(Node.from_dict(r) for r in _records(directory / ENTRIES))
    embeddings = load_npy(directory / EMBEDDINGS)
    if embeddings.dtype != np.float32 or embeddings.ndim != 2 or embeddings.shape[0] != len(entries):
        raise IndexFormatError(
            f"{directory / EMBEDDINGS}: expected float32 of shape ({len(entries)}, dim), "
            f"got {embeddings.dtype} {embeddings.shape}"
        )
    return Pool(entries=entries, embeddings=embeddings)


def _records(path: Path) -> Iterable[dict[str, Any]]:
    if not path.is_file():
        raise IndexFormatError(f"index file missing: {path}")
    try:
        yield from read_jsonl(path)
    except InputError as exc:
        raise IndexFormatError(str(exc)) from exc


def save_records(directory: str | Path, name: str, records: Iterable[Any]) -> int:
    """Write records that have ``to_dict`` (Document, Chunk, Proposition, ...) as JSONL."""
    return write_jsonl(Path(directory) / name, (r.to_dict() for r in records))


@dataclass(frozen=True, eq=False)
class Index:
    """A loaded index directory."""

    path: Path
    manifest: dict[str, Any]
    pool: Pool

    def documents(self) -> list[Document]:
        return [Document.from_dict(r) for r in _records(self.path / DOCUMENTS)]

    def chunks(self) -> list[Chunk]:
        return [Chunk.from_dict(r) for r in _records(self.path / CHUNKS)]

    def propositions(self) -> list[Proposition]:
        """Propositions of the relatedness build; empty when the index has none."""
        path = self.path / PROPOSITIONS
        return [Proposition.from_dict(r) for r in _records(path)] if path.is_file() else []

    def component(self, name: str) -> Path | None:
        """Folder of an optional component (``graph``, ``colbert``) if the manifest lists it."""
        rel = self.manifest.get("components", {}).get(name)
        return self.path / rel["path"] if isinstance(rel, dict) and "path" in rel else None


def load_index(directory: str | Path) -> Index:
    """Load an index directory written by ``sirerag build``; checks the format version."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    return Index(path=directory, manifest=manifest, pool=load_pool(directory))


def register_component(directory: str | Path, name: str, **info: Any) -> dict[str, Any]:
    """Record an optional component (its ``path`` relative to the index, type, parameters)
    in the manifest, rewriting it atomically."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    manifest.setdefault("components", {})[name] = info
    write_json(directory / "manifest.json", manifest)
    return manifest
