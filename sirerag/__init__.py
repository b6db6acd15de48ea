"""sirerag: SiReRAG-style hierarchical retrieval indexes.

Build a similarity tree (RAPTOR) and a relatedness tree (entity-linked
proposition aggregates) over a corpus and flatten both into one retrieval
pool, saved as a directory of ``manifest.json`` + ``.jsonl`` + ``.npy`` files.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
