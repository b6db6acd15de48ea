"""sirerag: SiReRAG-style hierarchical retrieval indexes.

Build a similarity tree (RAPTOR) and a relatedness tree (entity-linked
proposition aggregates) over a corpus and flatten both into one retrieval
pool, saved as a directory of ``manifest.json`` + ``.jsonl`` + ``.npy`` files.

The Python API is :class:`sirerag.Index` (build, load, search, add, remove, export, ask),
whose searches return :class:`sirerag.SearchResult` and whose answers are
:class:`sirerag.Answer` (docs/python-api.md). They are imported on first use, so
``import sirerag`` stays cheap.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "Index", "SearchResult", "Answer"]

#: public names -> the module that defines them (imported when first asked for)
_LAZY = {"Index": "sirerag.api", "SearchResult": "sirerag.results", "Answer": "sirerag.answers"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sirerag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
