"""Retrievers for the RAG frameworks: llama-index (:mod:`sirerag.integrations.llama_index`, extra
``llamaindex``) and LangChain (:mod:`sirerag.integrations.langchain`, extra ``langchain``).

They sit beside the core: nothing in sirerag imports them, and importing one without its framework
raises :class:`~sirerag.core.errors.MissingExtraError` (an ``ImportError``) naming the extra to install.
Both search through :meth:`sirerag.Index.search` (their async calls through :meth:`sirerag.Index.asearch`, in a
worker thread, so concurrent calls overlap and the event loop runs on) and carry every result's provenance in the
framework's metadata (:func:`metadata`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sirerag.results import SearchResult

if TYPE_CHECKING:
    from sirerag.api import Index


def open_index(index_or_path: Any) -> Index:
    """A :class:`sirerag.Index` as given, or loaded from a path."""
    from sirerag.api import Index

    if isinstance(index_or_path, Index):
        return index_or_path
    if isinstance(index_or_path, (str, Path)):
        return Index.load(index_or_path)
    raise TypeError(f"expected a sirerag.Index or an index directory, got {type(index_or_path).__name__}")


def check_settings(k: Any, retriever: Any, *, k_name: str = "k") -> None:
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
