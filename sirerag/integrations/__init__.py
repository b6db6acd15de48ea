"""Retrievers for the RAG frameworks: llama-index (:mod:`sirerag.integrations.llama_index`, extra
``llamaindex``) and LangChain (:mod:`sirerag.integrations.langchain`, extra ``langchain``).

They sit beside the core: nothing in sirerag imports them, and importing one without its framework
raises :class:`~sirerag.core.errors.MissingExtraError` (an ``ImportError``) naming the extra to install.
Both search through :meth:`sirerag.Index.search` (their async calls through :meth:`sirerag.Index.asearch`, in a
worker thread, so concurrent calls overlap and the event loop runs on) and carry every result's provenance in the
framework's metadata (:func:`metadata`). An adapter given a path opens the index itself and closes it in
``close()`` (or at the end of a ``with`` block); an adapter given a :class:`sirerag.Index` leaves it open.
"""
from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sirerag.results import SearchResult

if TYPE_CHECKING:
    from sirerag.api import Index


#: the indexes the adapters loaded from a path (theirs to close)
_OPENED: weakref.WeakSet[Index] = weakref.WeakSet()


def open_index(index_or_path: Any) -> Index:  # Any: checked here, a TypeError naming what was given
    """A :class:`sirerag.Index` as given, or loaded from a path (then :class:`ClosesIndex` closes it)."""
    from sirerag.api import Index

    if isinstance(index_or_path, Index):
        return index_or_path
    if isinstance(index_or_path, (str, Path)):
        index = Index.load(index_or_path)
        _OPENED.add(index)
        return index
    raise TypeError(f"expected a sirerag.Index or an index directory, got {type(index_or_path).__name__}")


class ClosesIndex:
    """``close()`` and the context-manager protocol of an adapter: closes the index it opened from a path (an
    index it was given is its caller's to close); closing twice is harmless."""

    index: Index

    def close(self) -> None:
        if self.index in _OPENED:
            _OPENED.discard(self.index)
            self.index.close()

    def __enter__(self) -> Any:  # the adapter itself (typing.Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_settings(k: object, retriever: object, *, k_name: str = "k") -> None:
    """Raise unless ``k`` is a positive integer and ``retriever`` None or a retriever name (at construction,
    not at the first query)."""
    from sirerag.api_checks import retriever_argument
    from sirerag.core.errors import check

    check(isinstance(k, int) and not isinstance(k, bool) and k >= 1, k_name, k, "a positive integer")
    retriever_argument(retriever)


def metadata(result: SearchResult, index: Index) -> dict[str, Any]:
    """The provenance of a result as flat metadata: ``entry_id``, ``title``, ``section``, ``tree``, ``kind``,
    ``level``, ``passages`` (source document ids, a list) and the index folder."""
    return {"entry_id": result.entry_id, "title": result.title, "section": result.section, "tree": result.tree,
            "kind": result.kind, "level": result.level, "passages": list(result.passages),
            "index": str(index.path)}
