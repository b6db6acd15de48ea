"""The retrievers by name, and the options each takes: the keyword arguments of its module's ``load``, or for a
``load`` that takes ``**options``, those and its module's ``OPTIONS`` (derived from a settings class, as
:data:`sirerag.retrievers.ppr.OPTIONS` is from :class:`~sirerag.core.config.retrieval.PPRSettings`; no second list
to drift from it; no fusion, no pool rule)."""
from __future__ import annotations

import functools
import importlib
import inspect
from typing import TYPE_CHECKING, Any, Callable

from sirerag.core.errors import ConfigError
from sirerag.retrievers.base import Retriever

if TYPE_CHECKING:
    from sirerag.pool.loaded import LoadedIndex

#: retriever name -> module that provides ``load(index, *, option=default, ...) -> Retriever``
RETRIEVERS: dict[str, str] = {
    "dense": "sirerag.retrievers.dense",
    "bm25": "sirerag.retrievers.bm25",
    "colbert": "sirerag.retrievers.colbert",
    "ppr": "sirerag.retrievers.ppr",
    "keyword-graph": "sirerag.retrievers.keyword_graph",
}


def loader(name: str) -> Callable[..., Retriever]:
    """The ``load`` function of retriever ``name``; ConfigError for an unknown name."""
    if name not in RETRIEVERS:
        raise ConfigError(f"retriever must be one of {sorted(RETRIEVERS)} or a fusion like 'dense+bm25', got {name!r}")
    return importlib.import_module(RETRIEVERS[name]).load


@functools.lru_cache(maxsize=None)
def options_of(name: str) -> frozenset[str]:
    """The options retriever ``name`` takes: the keyword-only parameters of its ``load``, plus its module's
    ``OPTIONS`` when ``load`` takes ``**options``. A ``load`` that takes ``**kwargs`` without declaring them would
    accept anything and is refused (TypeError), so no option is silently ignored."""
    load = loader(name)
    parameters = inspect.signature(load).parameters.values()
    loose = [p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    declared = getattr(importlib.import_module(RETRIEVERS[name]), "OPTIONS", None) if loose else None
    if loose and declared is None:
        raise TypeError(f"{RETRIEVERS[name]}.load takes **{loose[0]}: its options must be named keywords, or "
                        "listed in the module's OPTIONS")
    named = frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return named | frozenset(declared or ())


def load_base(name: str, index: LoadedIndex,
              **options: Any) -> Retriever:  # Any: the retriever's options, of several types, checked here
    """One retriever (no fusion, no pool rule) over a loaded index; ConfigError for an option it does not
    take, naming the retriever, the option and the valid ones."""
    load = loader(name)
    unknown = sorted(set(options) - options_of(name))
    if unknown:
        raise ConfigError(f"retriever {name!r} does not take option(s) {unknown}; valid: {sorted(options_of(name))}")
    return load(index, **options)
