"""A LangChain retriever over a sirerag index (extra ``langchain``: ``pip install 'sirerag[langchain]'``).

    from sirerag.integrations.langchain import SireragRetriever

    retriever = SireragRetriever(index="my_index", k=5)
    docs = retriever.invoke("Who designed the Harwick Bridge?")   # or use it in any runnable chain

Each result is a ``Document`` with the pool entry's text as ``page_content``, its id as ``id`` and the
provenance in ``metadata`` (:func:`sirerag.integrations.metadata`: title, section, tree, kind, level,
source passage ids) plus the retriever's ``score``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sirerag.answers import SearchResult
from sirerag.api import Index
from sirerag.core.errors import require
from sirerag.integrations import ClosesIndex, check_settings, metadata, open_index

require("langchain_core", "langchain", purpose="the LangChain retriever")

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, field_validator, model_validator  # noqa: E402


class SireragRetriever(ClosesIndex, BaseRetriever):
    """LangChain ``BaseRetriever`` answering with the entries of a sirerag index.

    Args:
        index: a :class:`sirerag.Index` or an index directory.
        k: entries per query.
        retriever: sirerag retriever (``dense``, ``bm25``, ``ppr``, ``dense+bm25``...; None: the index's default).
        options: retriever and pool-rule options (as :meth:`sirerag.Index.search`).

    Given a path, it opens the index and ``close()`` (or a ``with`` block) closes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Index  # given as an Index or an index directory (_open)
    k: int = 10
    retriever: str | None = None
    options: dict[str, Any] = {}  # Any: each retriever takes its own options (as sirerag.Index.search)

    @field_validator("index", mode="before")
    @classmethod
    def _open(cls, value: Index | str | Path) -> Index:
        return open_index(value)

    @model_validator(mode="after")
    def _check(self) -> "SireragRetriever":
        check_settings(self.k, self.retriever)
        return self

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self._documents(self.index.search(query, k=self.k, retriever=self.retriever, **self.options))

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        """The search in a worker thread (:meth:`sirerag.Index.asearch`): concurrent ``ainvoke`` calls overlap."""
        return self._documents(await self.index.asearch(query, k=self.k, retriever=self.retriever, **self.options))

    def _documents(self, results: list[SearchResult]) -> list[Document]:
        return [Document(page_content=r.text, id=r.entry_id, metadata={**metadata(r, self.index), "score": r.score})
                for r in results]
