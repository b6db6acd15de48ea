"""The models of a build or update, opened in one place and closed together.

:class:`Models` opens the embedder, the summariser and the extraction LLM the first time a
stage asks for one, and closes their on-disk caches when its ``with`` block ends (before the
staged index is swapped in: the default cache folder moves with it). The model-call caches
live in one folder (:func:`cache_folder`), which the staging keeps (:func:`kept_folders`).
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

from sirerag.core.io.guard import check_cache_dir, resolve
from sirerag.core.config import BuildConfig
from sirerag.core.errors import ConfigError

if TYPE_CHECKING:
    from sirerag.embedding.base import Embedder
    from sirerag.engine import Engine
    from sirerag.llm.base import LLM
    from sirerag.trees.base import Summarizer

_Model = TypeVar("_Model")

logger = logging.getLogger(__name__)


def cache_folder(out: Path, cache_dir: str | Path | None) -> Path:
    """The folder of the embedding and LLM call caches: ``cache_dir`` (refused inside an index, before any
    work: :func:`~sirerag.core.io.guard.check_cache_dir`), by default ``<out>/cache``."""
    return check_cache_dir(cache_dir, index=out) if cache_dir is not None else resolve(out) / "cache"


def kept_folders(out: Path, cache: Path) -> tuple[str, ...]:
    """The top folders of ``out`` a staged write keeps: ``cache`` and, when the cache folder is inside
    ``out``, its top folder there. ConfigError when ``cache`` is ``out`` itself."""
    try:
        rel = resolve(cache).relative_to(resolve(out))
    except ValueError:
        return ("cache",)
    if not rel.parts:
        raise ConfigError(f"--cache {cache} is the index folder itself; use a folder inside it or elsewhere")
    return tuple(dict.fromkeys(("cache", rel.parts[0])))


def make_summarizer(config: BuildConfig, llm: LLM | None, *, show_progress: bool = False) -> Summarizer:
    """The LLM summariser when an LLM is configured, else the offline extractive one."""
    if llm is not None:
        from sirerag.trees.llm_summarizer import LLMSummarizer

        return LLMSummarizer(llm, max_tokens=config.tree.summary_max_tokens, show_progress=show_progress)
    from sirerag.trees.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer(max_tokens=config.tree.summary_max_tokens)


class Models(contextlib.AbstractContextManager):
    """The embedder, summariser and extraction LLM of one run, each opened on first use.

    Args:
        config: the build settings (specs, batch sizes, LLM settings).
        cache: the cache folder (:func:`cache_folder`); None: no on-disk cache.
        engine: where model calls run (:func:`sirerag.engine.make_engine`); None: this process.
        show_progress: progress bars.
        embedder_spec: the embedder to load in place of ``config.embedder.spec`` (an update loads the
            spec the index recorded; a dry run the offline MiniLM in place of a paid API).
        summarizer: a summariser to use in place of the one the settings name (tests, benchmarks).
    """

    def __init__(self, config: BuildConfig, cache: Path | None, *, engine: Engine | None = None,
                 show_progress: bool = False, embedder_spec: str | None = None,
                 summarizer: Summarizer | None = None) -> None:
        self.config, self.cache, self.engine, self.show_progress = config, cache, engine, show_progress
        self.embedder_spec = embedder_spec or config.embedder.spec
        self._opened: dict[str, Any] = {} if summarizer is None else {"summarizer": summarizer}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "Models":
        from sirerag.clustering.cache import clustering_cache
        from sirerag.clustering.processes import clustering_processes
        from sirerag.clustering.sample import clustering_engine

        # the trees' clustering may use worker processes while the run lasts, and a distributed engine for
        # sample-and-assign's assignment blocks (the same clusters as without either)
        self._stack.enter_context(clustering_processes(self.config.clustering.processes))
        self._stack.enter_context(clustering_engine(self.engine))
        # clusters computed once stay in the cache folder: a resumed build does not cluster again
        self._stack.enter_context(clustering_cache(self._sub("clusters") if self.cache is not None else None))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the caches of every model opened (idempotent)."""
        self._stack.close()

    def opened(self, name: str) -> Embedder | Summarizer | LLM | None:
        """The model ``name`` if a stage opened it, else None (nothing is opened)."""
        return self._opened.get(name)

    def _open(self, name: str, factory: Callable[[], _Model]) -> _Model:
        if name not in self._opened:
            model = self._opened[name] = factory()
            close = getattr(getattr(model, "cache", None), "close", None)
            if close is not None:
                self._stack.callback(close)
        return cast(_Model, self._opened[name])

    def embedder(self) -> Embedder:
        def load() -> Embedder:
            from sirerag.embedding import load_embedder

            return load_embedder(self.embedder_spec, batch_size=self.config.embedder.batch_size,
                                 cache_dir=self._sub("embeddings"), show_progress=self.show_progress,
                                 engine=self.engine, precision=self.config.embedder.precision)
        return self._open("embedder", load)

    def short_text_embedder(self) -> Embedder:
        """The embedder of short texts (propositions, entity names): with ``embedder.short_texts =
        "auto"``, a ``minilm`` index computing in float32 and this process as the engine, MiniLM's ONNX
        export on ONNX Runtime when it exists (:func:`~sirerag.embedding.load_short_text_embedder`); else
        the index embedder (in bfloat16 torch is the faster of the two: docs/performance.md)."""
        def load() -> Embedder:
            from sirerag.embedding import load_short_text_embedder
            from sirerag.embedding.precision import precision_of
            from sirerag.engine import runs_here

            fast = None
            if (self.config.embedder.short_texts == "auto" and runs_here(self.engine)
                    and precision_of(self.embedder().spec) == "float32"):
                fast = load_short_text_embedder(self.embedder_spec, batch_size=self.config.embedder.batch_size,
                                                cache_dir=self._sub("embeddings"), show_progress=self.show_progress)
            if fast is None:
                return self.embedder()
            logger.info("short texts (propositions, entity names) are embedded with %s", fast.spec)
            return fast
        return self._open("short_text_embedder", load)

    def cached(self, name: str, embedder: Embedder) -> Embedder:
        """``embedder`` (one a stage made, such as the graph's name embedder) with its vectors kept in the build's
        embedding cache under its own spec, opened once as ``name``; itself without a cache folder."""
        def load() -> Embedder:
            from sirerag.embedding import with_disk_cache

            folder = self._sub("embeddings")
            if folder is None:
                return embedder
            return with_disk_cache(embedder, folder, batch_size=self.config.embedder.batch_size,
                                   show_progress=self.show_progress)
        return self._open(name, load)

    def llm(self) -> LLM | None:
        """The summary LLM (``llm.spec``), None without one."""
        return self._open("llm", lambda: self._load_llm(self.config.llm.spec))

    def summarizer(self) -> Summarizer:
        return self._open("summarizer", lambda: make_summarizer(self.config, self.llm(),
                                                                show_progress=self.show_progress))

    def extraction_llm(self) -> LLM | None:
        """The extraction LLM (``extraction.llm``, else ``llm.spec``) with ``extraction.extractor = "llm"``."""
        spec = self.config.extraction.llm or self.config.llm.spec
        return self._open("extraction_llm", lambda: self._load_llm(spec)
                          if self.config.extraction.extractor == "llm" else None)

    def _sub(self, name: str) -> Path | None:
        return self.cache / name if self.cache is not None else None

    def _load_llm(self, spec: str | None) -> LLM | None:
        if not spec:
            return None
        from sirerag.llm.factory import load_llm

        return load_llm(spec, config=self.config.llm, cache_dir=self._sub("llm"), engine=self.engine,
                        engine_batch_size=self.config.engine.llm_batch_size)
