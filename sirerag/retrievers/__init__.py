"""Retrievers over a pool: dense, BM25, ColBERTv2, Personalized PageRank and their fusion.

:func:`load_retriever` builds one by name from a loaded index. ``a+b`` fuses the
rankings of several retrievers with reciprocal-rank fusion.
"""
from __future__ import annotations

import importlib
from typing import Any

from sirerag.errors import ConfigError
from sirerag.retrievers.base import Hit, Retriever

__all__ = ["Hit", "Retriever", "RETRIEVERS", "load_retriever"]

#: retriever name -> module that provides ``load(index, **options) -> Retriever``
RETRIEVERS: dict[str, str] = {
    "dense": "sirerag.retrievers.dense",
    "bm25": "sirerag.retrievers.bm25",
    "colbert": "sirerag.retrievers.colbert",
    "ppr": "sirerag.retrievers.ppr",
}


def load_retriever(name: str, index: Any, **options: Any) -> Retriever:
    """Build the retriever ``name`` (or a fusion ``a+b``) over a loaded index.

    Options are passed to the retriever (e.g. ``embedder=`` for dense, ``checkpoint=``
    for colbert, ``linking=`` for ppr); a retriever ignores options it does not take.
    """
    if "+" in name:
        from sirerag.retrievers.hybrid import load as load_hybrid

        return load_hybrid(name, index, **options)
    if name not in RETRIEVERS:
        raise ConfigError(f"retriever must be one of {sorted(RETRIEVERS)} or a fusion like 'dense+bm25', got {name!r}")
    module = importlib.import_module(RETRIEVERS[name])
    return module.load(index, **options)
