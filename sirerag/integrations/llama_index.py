"""A llama-index retriever over a sirerag index (extra ``llamaindex``: ``pip install 'sirerag[llamaindex]'``).

    from llama_index.core.query_engine import RetrieverQueryEngine
    from sirerag.integrations.llama_index import SireragRetriever

    retriever = SireragRetriever("my_index", similarity_top_k=5)
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llm)
    print(engine.query("Who designed the Harwick Bridge?"))

Each result is a ``NodeWithScore`` whose ``TextNode`` has the pool entry's id and text; its metadata
holds the provenance (:func:`sirerag.integrations.metadata`: title, section, tree, kind, level, source
passage ids). Only ``title`` and ``section`` are shown to the LLM and the embedder.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sirerag.core.errors import require
from sirerag.integrations import ClosesIndex, check_settings, metadata, open_index

require("llama_index.core", "llamaindex", purpose="the llama-index retriever")

from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

if TYPE_CHECKING:
    from sirerag.answers import SearchResult
    from sirerag.api import Index

#: metadata keys left out of what the LLM and embedders see: all (the text already starts with the heading)
HIDDEN = ["entry_id", "title", "section", "tree", "kind", "level", "passages", "index"]


class SireragRetriever(ClosesIndex, BaseRetriever):
    """llama-index ``BaseRetriever`` answering with the entries of a sirerag index.

    Args:
        index_or_path: a :class:`sirerag.Index` or an index directory.
        similarity_top_k: entries per query.
        retriever: sirerag retriever (``dense``, ``bm25``, ``ppr``, ``dense+bm25``...; None: the index's default).
        **options: retriever and pool-rule options (as :meth:`sirerag.Index.search`).

    Given a path, it opens the index and ``close()`` (or a ``with`` block) closes it.
    """

    def __init__(self, index_or_path: Index | str | Path, similarity_top_k: int = 10, retriever: str | None = None,
                 callback_manager: Any = None,  # Any: llama-index's CallbackManager (an optional extra's class)
                 verbose: bool = False, **options: Any) -> None:  # Any: each retriever's options, as Index.search
        check_settings(similarity_top_k, retriever, k_name="similarity_top_k")
        self.index = open_index(index_or_path)
        self.similarity_top_k = similarity_top_k
        self.retriever_name = retriever
        self.options = dict(options)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = self.index.search(query_bundle.query_str, k=self.similarity_top_k, retriever=self.retriever_name,
                                    **self.options)
        return self._nodes(results)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The search in a worker thread (:meth:`sirerag.Index.asearch`): concurrent ``aretrieve`` calls overlap."""
        results = await self.index.asearch(query_bundle.query_str, k=self.similarity_top_k,
                                           retriever=self.retriever_name, **self.options)
        return self._nodes(results)

    def _nodes(self, results: list[SearchResult]) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=r.entry_id, text=r.text, metadata=metadata(r, self.index),
                                            excluded_llm_metadata_keys=list(HIDDEN),
                                            excluded_embed_metadata_keys=list(HIDDEN)),
                              score=r.score) for r in results]
