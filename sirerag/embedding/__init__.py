"""Embedders: the protocol and its backends (sentence-transformers, OpenAI), with a disk cache.

Choose one with :func:`load_embedder`::

    embedder = load_embedder("minilm", cache_dir="cache/embeddings")
    vectors = embedder.encode_documents(["some text", "more text"])  # (2, 384) float32, unit rows
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from sirerag.embedding.backends import SPEC_FORMS, make_embedder, parse_embedder_spec
from sirerag.embedding.base import Embedder, TokenWindow, l2_normalize, token_window, usable_cores
from sirerag.embedding.cache import CachedEmbedder, CacheStats, EmbeddingCache

if TYPE_CHECKING:
    from sirerag.engine import Engine, WorkerFactory

__all__ = ["SPEC_FORMS", "CacheStats", "CachedEmbedder", "Embedder", "EmbeddingCache", "TokenWindow",
           "l2_normalize", "load_embedder", "load_query_embedder", "load_short_text_embedder", "make_embedder",
           "parse_embedder_spec", "token_window", "usable_cores", "with_disk_cache"]


def load_embedder(spec: str = "minilm", *, batch_size: int = 64, cache_dir: str | Path | None = None,
                  show_progress: bool = True, engine: Engine | None = None, precision: str = "float32") -> Embedder:
    """Create the embedder named by ``spec``.

    Args:
        spec: ``minilm`` (all-MiniLM-L6-v2 shipped with the ``local`` extra, offline, on torch),
            ``minilm-onnx`` (the same weights on ONNX Runtime; extra ``onnx``),
            ``st:PATH_OR_NAME`` (any sentence-transformers model folder or hub name),
            ``openai:MODEL`` or ``openai:MODEL@URL`` (key from ``OPENAI_API_KEY``;
            MODEL defaults to ``text-embedding-3-small``).
        batch_size: texts per forward pass or per API request.
        cache_dir: if given, vectors are cached on disk there and only texts never seen
            before are encoded; the returned :class:`CachedEmbedder` counts hits and misses.
        show_progress: show progress bars while encoding.
        engine: with ``cache_dir``, the :class:`~sirerag.engine.Engine` that encodes the
            texts missing from the cache (default: this process); a Ray engine loads
            ``spec`` once per actor and the vectors come back here to be cached.
        precision: ``float32``, ``bfloat16`` or ``auto`` (bfloat16 where the CPU has bfloat16 instructions),
            for the torch backends (:mod:`~sirerag.embedding.precision`); a bfloat16 embedder's spec ends
            in ``#bf16``, so its vectors are cached apart.

    Returns:
        An :class:`Embedder` returning L2-normalised float32 arrays of shape ``(n, dim)``.

    Raises:
        ConfigError: ``spec``, ``batch_size`` or ``precision`` is invalid, or an API key is missing.
        MissingExtraError: the backend's optional packages are not installed.
        SireragError: the MiniLM weights fail their sha256 check.
    """
    embedder = make_embedder(spec, batch_size=batch_size, precision=precision,
                             show_progress=show_progress and cache_dir is None)  # the cache shows its own bar
    if cache_dir is None:
        return embedder
    from sirerag.embedding.cache import EmbedWorker
    from sirerag.engine import runs_here

    def worker(side: str) -> EmbedWorker:
        return EmbedWorker(spec, batch_size, side, getattr(embedder, "precision", "float32"))

    remote = None if runs_here(engine) else worker
    return with_disk_cache(embedder, cache_dir, batch_size=batch_size, show_progress=show_progress, engine=engine,
                           remote=remote)


def load_query_embedder(spec: str, *, batch_size: int = 64, show_progress: bool = False,
                        precision: str = "float32") -> Embedder:
    """The embedder a search encodes with, for an index built with the embedder ``spec`` in ``precision``
    (:func:`~sirerag.embedding.precision.precision_of` the spec its manifest records).

    For ``minilm`` this is the ONNX export of the same weights on ONNX Runtime
    (:mod:`~sirerag.embedding.query_encoder`: no torch, transformers or sentence-transformers
    import) when the export for the installed weights exists; otherwise, and for every
    other spec, :func:`load_embedder` (``minilm`` then logs how to get the fast path). An ``int8`` index's
    queries are encoded by the same int8 export its texts were (made first when this machine has none).

    Raises:
        the errors of :func:`load_embedder`.
    """
    if precision == "int8":
        return make_embedder(spec, batch_size=batch_size, precision="int8")
    if parse_embedder_spec(spec)[0] == "minilm":
        from sirerag.embedding.query_encoder import load_minilm_query_embedder

        fast = load_minilm_query_embedder(batch_size=batch_size, threads=usable_cores())
        if fast is not None:
            return fast
    return load_embedder(spec, batch_size=batch_size, show_progress=show_progress)


def load_short_text_embedder(spec: str, *, batch_size: int = 64, cache_dir: str | Path | None = None,
                             show_progress: bool = False) -> Embedder | None:
    """The fast embedder of a build's short texts (propositions, entity names) for an index embedded with
    ``spec``, or None when there is none (then the index embedder encodes them).

    For ``minilm`` it is the ONNX export of the same weights on ONNX Runtime
    (:mod:`~sirerag.embedding.query_encoder`; the export is checked against torch when it is
    written, and its vectors are the same to cosine 0.9999999 on entity names and propositions,
    docs/performance.md), with one intra-op thread per core the process may use, as torch does for
    the leaves (its vectors are bitwise the same with one thread or two, docs/performance.md). Its spec ends in ``#ort``, so with ``cache_dir`` its vectors are cached
    apart from torch's.
    """
    if parse_embedder_spec(spec)[0] != "minilm":
        return None
    from sirerag.embedding.query_encoder import load_minilm_query_embedder

    fast = load_minilm_query_embedder(batch_size=batch_size, threads=usable_cores())
    if fast is None or cache_dir is None:
        return fast
    return with_disk_cache(fast, cache_dir, batch_size=batch_size, show_progress=show_progress)


def with_disk_cache(embedder: Embedder, cache_dir: str | Path, *, batch_size: int = 64, show_progress: bool = False,
                    engine: Engine | None = None,
                    remote: Callable[[str], WorkerFactory] | None = None) -> CachedEmbedder:
    """``embedder`` with its vectors cached on disk in ``cache_dir`` under its spec, encoding the missing texts in
    blocks of 16 batches (at least 256 texts); ``engine`` and ``remote`` as for :class:`CachedEmbedder`."""
    return CachedEmbedder(embedder, EmbeddingCache(cache_dir), block_size=max(16 * batch_size, 256),
                          show_progress=show_progress, engine=engine, remote=remote)
