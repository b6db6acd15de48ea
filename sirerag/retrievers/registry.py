"""The retrievers by name: the module that loads each and the options it takes (no fusion, no pool rule)."""
from __future__ import annotations

import importlib
from typing import Any

from sirerag.core.errors import ConfigError
from sirerag.retrievers.base import Retriever

#: retriever name -> module that provides ``load(index, **options) -> Retriever``
RETRIEVERS: dict[str, str] = {
    "dense": "sirerag.retrievers.dense",
    "bm25": "sirerag.retrievers.bm25",
    "colbert": "sirerag.retrievers.colbert",
    "ppr": "sirerag.retrievers.ppr",
}

#: options each retriever takes (anything else is an error, not silently ignored)
OPTIONS: dict[str, frozenset[str]] = {
    "dense": frozenset({"embedder"}),
    "bm25": frozenset({"k1", "b", "method"}),
    "colbert": frozenset({"checkpoint", "nbits", "doc_maxlen", "query_maxlen", "timeout", "build_timeout",
                          "rebuild"}),
    "ppr": frozenset({"embedder", "linking", "fact_filter", "tagger", "damping", "tol", "max_iter",
                      "passage_weight", "top_facts", "top_entities", "surface", "passage_seeds", "bm25_share",
                      "entry_score", "bridge_hops", "bridge_top", "bridge_threshold", "bridge_weight",
                      "bridge_max_seeds"}),
}


def load_base(name: str, index: Any, **options: Any) -> Retriever:
    """One retriever (no fusion, no pool rule) over a loaded index."""
    if name not in RETRIEVERS:
        raise ConfigError(f"retriever must be one of {sorted(RETRIEVERS)} or a fusion like 'dense+bm25', got {name!r}")
    module = importlib.import_module(RETRIEVERS[name])
    return module.load(index, **options)
