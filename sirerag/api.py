"""``sirerag.Index``: build, search, update, export and ask an index from Python.

:class:`Index` is a thin front door: building and updating run the pipeline
(:func:`sirerag.pipeline.build.build_index`, :func:`sirerag.pipeline.update.update_index`),
searching the retrievers (:func:`sirerag.retrievers.load_retriever`), exporting
:func:`sirerag.pool.export.export_pool`, and asking the QA reader
(:func:`sirerag.answers.answer_question`). Retrievers are loaded once per name and options and
kept until :meth:`Index.close` (or the end of a ``with`` block); an add or remove reloads the index.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from sirerag import api_checks
from sirerag.api_checks import build_config, progress
from sirerag.answers import DEFAULT_ANSWER_TOKENS, DEFAULT_TOKEN_BUDGET, Answer
from sirerag.results import SearchResult, make_result
from sirerag.core.config import BuildConfig, LLMConfig, QueryConfig
from sirerag.core.errors import check

if TYPE_CHECKING:
    from sirerag.api_checks import CorpusArgument
    from sirerag.core.io.manifest import Manifest
    from sirerag.core.types import Document, Pool
    from sirerag.llm.base import LLM
    from sirerag.pipeline.update import UpdateReport
    from sirerag.pool.export import ExportReport
    from sirerag.pool.loaded import LoadedIndex
    from sirerag.retrievers.base import Hit, Retriever

logger = logging.getLogger(__name__)

class Index:
    """A sirerag index directory, ready to search. Use :meth:`build` or :meth:`load`, not the constructor.

    Attributes:
        path: the index directory.
        query: what a query may be (:class:`~sirerag.core.config.QueryConfig`; set another to change it).
    """

    query: QueryConfig = QueryConfig()

    def __init__(self, loaded: LoadedIndex) -> None:
        self._loaded = loaded
        self._retrievers: dict[tuple[str | None, str], Retriever] = {}
        self._documents: Mapping[str, Document] | None = None
        self._loading = threading.Lock()  # threads searching one Index load each retriever once
        self._positions: dict[str, tuple[int, int]] | None = None  # ask(order="document")

    # -- making one ---------------------------------------------------------------------------------
    @classmethod
    def build(cls, corpus: CorpusArgument, out: str | Path, *, config: BuildConfig | None = None,
              cache_dir: str | Path | None = None, show_progress: bool | None = None,
              **settings: Any) -> "Index":  # Any: a section's settings as a mapping or its dataclass
        """Build an index from ``corpus`` into ``out`` and load it.

        Args:
            corpus: a ``.jsonl``/``.json`` file, a folder of ``.txt``/``.md`` files, or documents.
            out: the index directory (missing, empty, or an earlier sirerag index).
            config: base settings (default :class:`~sirerag.core.config.BuildConfig`).
            cache_dir: model-call caches (default ``out/cache``).
            show_progress: progress bars on stderr; None (the default) shows them when stderr is a
                terminal, as tqdm does.
            **settings: overrides of ``config`` (:func:`build_config`), all checked before any work.

        Raises:
            TypeError: ``corpus`` or ``out`` of the wrong type (all arguments are checked before any work).
            ConfigError, InputError, IndexLockedError: as :func:`~sirerag.pipeline.build.build_index`.
        """
        from sirerag.pipeline.build import build_index

        resolved = build_config(config, **settings)
        api_checks.check_path(out, "out")
        corpus = api_checks.corpus_argument(corpus, warn_passage_bytes=resolved.chunking.warn_passage_bytes)
        build_index(corpus, out, resolved, cache_dir=cache_dir, show_progress=progress(show_progress))
        return cls.load(out)

    @classmethod
    def load(cls, path: str | Path) -> "Index":
        """Load an index directory (checked against its manifest).

        Raises:
            IndexFormatError: the directory is not a sirerag index or is damaged.
        """
        from sirerag.pool.loaded import load_index

        return cls(load_index(path))

    # -- what it holds ----------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._loaded.path

    @property
    def manifest(self) -> Manifest:
        """The typed :class:`~sirerag.core.io.manifest.Manifest` (``.to_dict()``: the JSON of ``manifest.json``)."""
        return self._loaded.manifest

    @property
    def pool(self) -> Pool:
        """The :class:`~sirerag.core.types.Pool` (entries and embeddings)."""
        return self._loaded.pool

    @property
    def loaded(self) -> LoadedIndex:
        """The underlying :class:`sirerag.pool.loaded.LoadedIndex` (for
        :func:`~sirerag.retrievers.load_retriever` & co)."""
        return self._loaded

    def __len__(self) -> int:
        return len(self._loaded.pool)

    def __repr__(self) -> str:
        return f"sirerag.Index({str(self.path)!r}, entries={len(self)})"

    def documents(self) -> list[Document]:
        """The documents the index holds (:class:`~sirerag.core.types.Document`)."""
        return self._loaded.documents()

    # -- searching: ``**options`` as each retriever takes its own (options_of), names checked before it loads --
    def retriever(self, retriever: str | None = None,
                  **options: Any) -> Retriever:  # Any: each retriever's own options (see above)
        """The retriever ``retriever`` with ``options`` (None: the default for this index), loaded once
        and kept until :meth:`close`. Options as :func:`~sirerag.retrievers.load_retriever`."""
        from sirerag.retrievers import load_retriever

        key = (retriever, repr(sorted(options.items())))
        with self._loading:
            if key not in self._retrievers:
                self._retrievers[key] = load_retriever(retriever, self._loaded, **options)
            return self._retrievers[key]

    def search(self, query: str, k: int = 10, retriever: str | None = None,
               **options: Any) -> list[SearchResult]:  # Any: each retriever's own options (see above)
        """The ``k`` best pool entries for ``query``, best first.

        Args:
            query: a question or keywords.
            k: how many entries.
            retriever: ``dense``, ``bm25``, ``colbert``, ``ppr`` or a fusion such as ``dense+bm25`` (None: ppr
                when the index has a graph, else dense).
            **options: retriever and pool-rule options (``pool_rule="native"``, ``leaf_share=0.7``, ``linking``...).

        Raises:
            TypeError: a query that is not a str, a retriever that is not a name.
            InputError: an empty query, or one over ``query.max_chars``. ConfigError: a bad ``k``, retriever
            or option (an option the retriever does not take is named).
        """
        (query,) = api_checks.queries_argument(query, self.query, batch=False)
        return self.search_many([query], k=k, retriever=retriever, **options)[0]

    def search_many(self, queries: Sequence[str], k: int = 10, retriever: str | None = None,
                    **options: Any) -> list[list[SearchResult]]:  # Any: as search
        """:meth:`search` for many queries in one batch (one list of results per query, in order)."""
        check(isinstance(k, int) and not isinstance(k, bool) and k >= 1, "k", k, "a positive integer")
        queries = api_checks.queries_argument(queries, self.query, batch=True)
        api_checks.retriever_argument(retriever)
        if not queries:
            return []
        hits = self.retriever(retriever, **options).search_many(queries, k=k)
        return [[self._result(hit) for hit in row] for row in hits]

    def _result(self, hit: Hit) -> SearchResult:
        if self._documents is None:  # titles of the leaves' documents, each read when first shown
            self._documents = self._loaded.document_lookup()
        return make_result(hit, self._loaded.pool.get(hit.entry_id), self._documents, self._loaded.pool)

    # -- asking (**options: the retriever's, as search) ---------------------------------------------
    def ask(self, question: str, llm: str | LLM, *, k: int = 10, retriever: str | None = None,
            token_budget: int = DEFAULT_TOKEN_BUDGET, max_tokens: int = DEFAULT_ANSWER_TOKENS,
            cache_dir: str | Path | None = None, llm_config: LLMConfig | None = None, order: str = "rank",
            **options: Any) -> Answer:  # Any: the retriever's options, as search
        """Answer ``question`` from the ``k`` best entries, read in order up to ``token_budget`` tokens
        with the QA reader's prompt (``sirerag eval --reader``).

        Args:
            question: the question.
            llm: an LLM spec (``openai:MODEL@URL``, ``hf:smollm2``...) or a loaded LLM.
            k, retriever, **options: as :meth:`search`.
            token_budget: context tokens at most. max_tokens: the answer's completion budget.
            cache_dir: cache the reader's calls here (default: no cache).
            llm_config: the reader's :class:`~sirerag.core.config.LLMConfig` for a spec (timeouts, retries,
                ``deadline``); an ``openai:`` endpoint is checked first, and the whole wait for the model
                ends within ``llm_config.deadline`` seconds (:func:`~sirerag.answers.open_reader`).
            order: ``rank`` reads the entries best first; ``document`` reads the same entries grouped by document
                (in corpus order) and in their place within it, for a narrative whose order of events matters.

        Raises:
            TypeError: a question that is not a str, an ``llm`` that is no spec nor LLM.
            InputError: an empty question. ConfigError: a bad spec or setting, an endpoint that does not
            answer. LLMCallError: the reader failed.
        """
        from sirerag.answers import ORDERS, answer_question, open_reader, reading_positions

        (question,) = api_checks.queries_argument(question, self.query, batch=False)
        api_checks.llm_argument(llm)
        api_checks.retriever_argument(retriever)
        check(order in ORDERS, "order", order, " or ".join(repr(o) for o in ORDERS))
        if cache_dir is not None:  # never a cache inside an index: the output guard's rule, before any work
            from sirerag.core.io.guard import check_cache_dir

            cache_dir = check_cache_dir(cache_dir, option="--reader-cache")
        self.retriever(retriever, **options)  # its options checked (and it loaded) before the reader opens
        reader_config = LLMConfig() if llm_config is None else llm_config
        reader = open_reader(llm, reader_config, cache_dir=cache_dir) if isinstance(llm, str) else llm
        results = self.search(question, k=k, retriever=retriever, **options)
        try:
            if order == "document" and self._positions is None:
                self._positions = reading_positions(self._loaded.documents(), self._loaded.chunks())
            return answer_question(question, results, reader, self.pool, token_budget=token_budget,
                                   max_tokens=max_tokens, order=order, positions=self._positions)
        finally:
            if reader is not llm:
                close = getattr(getattr(reader, "cache", None), "close", None)
                if close is not None:
                    close()

    # -- changing and exporting -------------------------------------------------------------------
    def add(self, corpus: CorpusArgument, *, sync: bool = False, follow_outside_links: bool = False,
            cache_dir: str | Path | None = None, refresh_threshold: float | None = None,
            drift_warn: float | None = None, show_progress: bool | None = None) -> UpdateReport:
        """Add or update documents in place (``sirerag add``) and reload. A folder's documents are keyed by
        relative path; ``sync=True`` also removes the documents it gave whose files are gone;
        ``follow_outside_links=True`` reads the files its symbolic links lead to outside it.

        ``cache_dir``: the model-call caches (default ``<index>/cache``); ``refresh_threshold``, ``drift_warn``:
        as ``sirerag add`` (None: the defaults of :class:`~sirerag.pipeline.changes.UpdateConfig`);
        ``show_progress``: progress bars (None: when stderr is a terminal)."""
        warn = self._loaded.manifest.build_config().chunking.warn_passage_bytes
        change = {"add": api_checks.corpus_argument(corpus, warn_passage_bytes=warn), "sync": sync,
                  "follow_outside_links": follow_outside_links}
        return self._update(change, cache_dir, refresh_threshold, drift_warn, show_progress)

    def remove(self, ids: str | Iterable[str], *, cache_dir: str | Path | None = None,
               refresh_threshold: float | None = None, drift_warn: float | None = None,
               show_progress: bool | None = None) -> UpdateReport:
        """Remove documents by id (``sirerag remove``) and reload; unknown ids change nothing and raise
        :class:`~sirerag.core.errors.InputError`. The keywords as :meth:`add`."""
        return self._update({"remove": api_checks.ids_argument(ids)}, cache_dir, refresh_threshold, drift_warn,
                            show_progress)

    def _update(self, change: dict[str, Any], cache_dir: str | Path | None, refresh_threshold: float | None,
                drift_warn: float | None, show_progress: bool | None) -> UpdateReport:
        from sirerag.pipeline.update import update_index

        given = {"refresh_threshold": refresh_threshold, "drift_warn": drift_warn}  # None: update_index's default
        tuning: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
        report = update_index(self.path, **change, cache_dir=cache_dir, show_progress=progress(show_progress),
                              **tuning)
        self._reload()
        return report

    def export(self, out: str | Path, format: str = "jsonl", *, overwrite: bool = False) -> ExportReport:
        """Write the pool for other tools (``beir``, ``colbert``, ``jsonl``, ``parquet``); returns the
        :class:`~sirerag.pool.export.ExportReport`."""
        from sirerag.pool.export import export_pool

        return export_pool(self._loaded, out, format, overwrite=overwrite)

    def _reload(self) -> None:
        from sirerag.pool.loaded import load_index

        self.close()
        self._loaded = load_index(self.path)
        self._documents = self._positions = None

    # -- releasing --------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the retrievers this index opened (a ColBERT worker process, ...)."""
        retrievers, self._retrievers = list(self._retrievers.values()), {}
        for retriever in retrievers:
            close = getattr(retriever, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async ------------------------------------------------------------------------------------
    async def asearch(self, query: str, k: int = 10, retriever: str | None = None,
                      **options: Any) -> list[SearchResult]:  # Any: as search
        """:meth:`search` in a worker thread (``asyncio.to_thread``): the event loop runs on, and calls overlap."""
        import asyncio

        return await asyncio.to_thread(self.search, query, k, retriever, **options)

    async def aask(self, question: str, llm: str | LLM, **options: Any) -> Answer:  # Any: the keywords of ask
        """:meth:`ask` in a worker thread (``asyncio.to_thread``); arguments as :meth:`ask`."""
        import asyncio

        return await asyncio.to_thread(self.ask, question, llm, **options)
