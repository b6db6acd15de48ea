"""ColBERTv2 late-interaction retrieval over the pool, through ``colbert-ai`` (PLAID index).

The ColBERT index is built over the pool's entry texts (one ColBERT passage per
entry, pid = position) and stored in the index directory under
``colbert/<checkpoint-slug>/``: ``collection.tsv`` (what was indexed),
``entry_ids.json`` (pid -> pool entry id) and ``plaid/`` (colbert-ai's own files).
The manifest lists every such index under ``components.colbert.indexes``, keyed by
checkpoint. :func:`load` builds the index on first use.

colbert-ai runs in a worker process (:mod:`sirerag.retrievers._colbert_worker`)
under a timeout: it compiles C++ extensions on first use, changes the
multiprocessing start method when imported and can hang its parent when a step
crashes; here a crash or a hang becomes a :class:`~sirerag.errors.SireragError`
with the tail of the worker's stderr.

Checkpoints are local folders or Hugging Face names; a name is looked up in the
local Hugging Face cache and downloaded only when it is not there (which needs the
network). The worker itself always runs offline.
"""
from __future__ import annotations

import hashlib
import logging
import re
import time
from pathlib import Path
from typing import Any, Sequence

from sirerag.errors import IndexFormatError, check
from sirerag.export import collection_text, write_collection
from sirerag.io import atomic_dir, index_lock, read_json, read_manifest, write_json
from sirerag.pool import Index, load_index, register_component
from sirerag.retrievers._colbert_client import WorkerClient
from sirerag.retrievers._colbert_setup import checkpoint_key, compile_extensions, require_colbert, resolve_checkpoint
from sirerag.retrievers.base import Hit

__all__ = [
    "DEFAULT_CHECKPOINT", "ColBERTRetriever", "build_colbert_index", "checkpoint_key", "colbert_indexes",
    "collection_text", "compile_extensions", "load", "resolve_checkpoint", "write_collection",
]

logger = logging.getLogger(__name__)

DEFAULT_CHECKPOINT = "colbert-ir/colbertv2.0"
COMPONENT = "colbert"
NBITS = (1, 2, 4)
#: default ColBERT document length in tokens: pool aggregates reach 512 tokens
DOC_MAXLEN = 512
BUILD_TIMEOUT = 3600.0
SEARCH_TIMEOUT = 600.0
COLLECTION = "collection.tsv"
ENTRY_IDS = "entry_ids.json"
PLAID = "plaid"


def entries_fingerprint(entry_ids: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(entry_ids).encode("utf-8")).hexdigest()


def _slug(key: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(key).name or key).strip("-.") or "checkpoint"
    return f"{base[:40]}-{hashlib.sha1(key.encode('utf-8')).hexdigest()[:8]}"


def _as_index(index: Index | str | Path) -> Index:
    return index if isinstance(index, Index) else load_index(index)


def _core_files(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.get("files", {}).items() if not k.startswith(f"{COMPONENT}/")}


def colbert_indexes(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ColBERT indexes recorded in a manifest, keyed by checkpoint."""
    component = manifest.get("components", {}).get(COMPONENT)
    return dict(component.get("indexes", {})) if isinstance(component, dict) else {}


def build_colbert_index(
    index: Index | str | Path,
    checkpoint: str = DEFAULT_CHECKPOINT,
    *,
    nbits: int = 2,
    doc_maxlen: int = DOC_MAXLEN,
    kmeans_niters: int = 4,
    timeout: float = BUILD_TIMEOUT,
) -> dict[str, Any]:
    """Build (or rebuild) the ColBERT index of a pool for one checkpoint.

    Args:
        index: an index directory or a loaded :class:`~sirerag.pool.Index`.
        checkpoint: a local checkpoint folder or a Hugging Face name.
        nbits: bits per dimension of the compressed residuals (1, 2 or 4; ColBERTv2 uses 2).
        doc_maxlen: ColBERT document length in tokens; longer entries are truncated
            (their count is recorded as ``truncated``).
        kmeans_niters: k-means iterations for the centroids.
        timeout: seconds the build may take before the worker is stopped.

    Returns:
        The record written to the manifest under ``components.colbert.indexes[checkpoint]``.

    Raises:
        MissingExtraError: colbert-ai (or a compatible transformers) is not installed.
        ConfigError: an invalid setting or a checkpoint that cannot be found.
        SireragError: colbert-ai failed, crashed or did not finish within ``timeout``.
    """
    check(nbits in NBITS, "nbits", nbits, f"one of {NBITS}")
    check(isinstance(doc_maxlen, int) and 8 <= doc_maxlen <= 512, "doc_maxlen", doc_maxlen, "an integer in [8, 512]")
    check(isinstance(kmeans_niters, int) and kmeans_niters >= 1, "kmeans_niters", kmeans_niters, "an integer >= 1")
    check(timeout > 0, "timeout", timeout, "a positive number of seconds")
    version = require_colbert()
    index = _as_index(index)
    check(len(index.pool) > 0, "index", str(index.path), "an index with at least one pool entry")
    local = resolve_checkpoint(checkpoint)
    key = checkpoint_key(checkpoint)
    with index_lock(index.path, "colbert index"):  # it writes into the index: one writer at a time
        if _core_files(read_manifest(index.path)) != _core_files(index.manifest):
            raise IndexFormatError(f"{index.path} was rebuilt since it was loaded; load it again")
        root = index.path.resolve() / COMPONENT  # absolute: the worker runs in another directory
        root.mkdir(parents=True, exist_ok=True)
        entry_ids = [e.id for e in index.pool.entries]
        final = root / _slug(key)
        start = time.perf_counter()
        logger.info("building the ColBERT index of %d entries with %s (nbits=%d, doc_maxlen=%d)",
                    len(entry_ids), checkpoint, nbits, doc_maxlen)
        with atomic_dir(final) as build_dir:
            worker = WorkerClient(cwd=build_dir)
            try:
                write_collection(build_dir / COLLECTION, [e.text for e in index.pool.entries])
                write_json(build_dir / ENTRY_IDS, entry_ids)
                stats = worker.call("build", {
                    "checkpoint": str(local), "collection": str(build_dir / COLLECTION), "out": str(build_dir),
                    "name": PLAID, "nbits": nbits, "doc_maxlen": doc_maxlen, "kmeans_niters": kmeans_niters,
                }, timeout=timeout)
                worker.close()
            finally:
                worker.kill()
        seconds = round(time.perf_counter() - start, 2)
        record = {
            "path": f"{COMPONENT}/{final.name}", "checkpoint": key, "nbits": nbits, "doc_maxlen": doc_maxlen,
            "kmeans_niters": kmeans_niters, "entries": len(entry_ids), "entries_sha1": entries_fingerprint(entry_ids),
            "colbert_ai": version, "build_seconds": seconds, **stats,
        }
        indexes = colbert_indexes(read_manifest(index.path))
        indexes[key] = record
        manifest = register_component(index.path, COMPONENT, path=COMPONENT, type="colbert-plaid", indexes=indexes)
        index.manifest.clear()
        index.manifest.update(manifest)
    if stats.get("truncated"):
        logger.warning("%d of %d entries are longer than doc_maxlen=%d tokens and were truncated",
                       stats["truncated"], len(entry_ids), doc_maxlen)
    logger.info("ColBERT index written to %s in %.1f s", final, seconds)
    return record



class ColBERTRetriever:
    """Searches a built ColBERT index; hits carry pool entry ids and ColBERT (MaxSim) scores.

    The colbert-ai worker starts on the first search and stays up until :meth:`close`
    (or the end of a ``with`` block).

    Args:
        folder: the index's ``colbert/<slug>`` folder.
        checkpoint: the local checkpoint folder it was built with.
        query_maxlen: query length in tokens (None: the checkpoint's, 32 for ColBERTv2).
        timeout: seconds each request may take, worker start-up included.
    """

    name = "colbert"

    def __init__(self, folder: str | Path, checkpoint: str | Path, *, query_maxlen: int | None = None,
                 timeout: float = SEARCH_TIMEOUT) -> None:
        check(query_maxlen is None or (isinstance(query_maxlen, int) and 4 <= query_maxlen <= 512),
              "query_maxlen", query_maxlen, "None or an integer in [4, 512]")
        check(timeout > 0, "timeout", timeout, "a positive number of seconds")
        self.folder = Path(folder).resolve()  # the worker runs in another directory
        self.checkpoint = Path(checkpoint).resolve()
        self.query_maxlen = query_maxlen
        self.timeout = float(timeout)
        self.entry_ids: list[str] = list(read_json(self.folder / ENTRY_IDS))
        self._worker: WorkerClient | None = None

    def _open(self) -> WorkerClient:
        if self._worker is None or not self._worker.alive:
            worker = WorkerClient(cwd=self.folder)
            try:
                worker.call("open", {"checkpoint": str(self.checkpoint), "collection": str(self.folder / COLLECTION),
                                     "root": str(self.folder), "name": PLAID, "query_maxlen": self.query_maxlen},
                            timeout=self.timeout)
            except BaseException:
                worker.kill()  # an index it could not open: do not leave it running
                raise
            self._worker = worker
        return self._worker

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = 10, *, batch_size: int = 128) -> list[list[Hit]]:
        """Top ``k`` entries per query, best first (fewer when PLAID finds fewer candidates)."""
        check(isinstance(k, int) and k >= 1, "k", k, "a positive integer")
        queries = list(queries)
        if not queries:
            return []
        worker = self._open()
        results: list[list[Hit]] = []
        for start in range(0, len(queries), batch_size):
            batch = worker.call("search", {"queries": queries[start : start + batch_size], "k": k},
                                timeout=self.timeout)
            results.extend([Hit(self.entry_ids[int(pid)], float(score)) for pid, score in ranked]
                           for ranked in batch)
        return results

    def close(self) -> None:
        """Stop the worker process (searching again starts a new one)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def __enter__(self) -> ColBERTRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def load(
    index: Index | str | Path,
    *,
    checkpoint: str | None = None,
    nbits: int | None = None,
    doc_maxlen: int | None = None,
    query_maxlen: int | None = None,
    timeout: float = SEARCH_TIMEOUT,
    build_timeout: float = BUILD_TIMEOUT,
    rebuild: bool = False,
    **_: Any,
) -> ColBERTRetriever:
    """ColBERT retriever over a loaded index, building its ColBERT index when needed.

    Args:
        index: a loaded index (or its directory).
        checkpoint: local folder or Hugging Face name. None: the one index already built
            for this pool, else ``colbert-ir/colbertv2.0``.
        nbits, doc_maxlen: build settings; a recorded index built with other values is
            rebuilt. None: as recorded, else 2 and 512.
        query_maxlen: query length in tokens (None: the checkpoint's).
        timeout: seconds per search request (worker start-up included).
        build_timeout: seconds the build may take.
        rebuild: rebuild even if an up-to-date index exists.

    Raises:
        MissingExtraError, ConfigError, SireragError: see :func:`build_colbert_index`.
    """
    require_colbert()
    index = _as_index(index)
    recorded = colbert_indexes(index.manifest)
    if checkpoint is None:
        checkpoint = next(iter(recorded)) if len(recorded) == 1 else DEFAULT_CHECKPOINT
    record = recorded.get(checkpoint_key(checkpoint))
    fingerprint = entries_fingerprint([e.id for e in index.pool.entries])
    stale = record is None or rebuild or record.get("entries_sha1") != fingerprint \
        or (nbits is not None and record.get("nbits") != nbits) \
        or (doc_maxlen is not None and record.get("doc_maxlen") != doc_maxlen) \
        or not (index.path / record["path"] / PLAID / "metadata.json").is_file()
    if stale:
        if record is not None and not rebuild:
            logger.info("the ColBERT index for %s is out of date with the pool or settings; rebuilding", checkpoint)
        record = build_colbert_index(index, checkpoint, nbits=nbits or 2, doc_maxlen=doc_maxlen or DOC_MAXLEN,
                                     timeout=build_timeout)
    assert record is not None  # built above when missing
    return ColBERTRetriever(index.path / record["path"], resolve_checkpoint(checkpoint),
                            query_maxlen=query_maxlen, timeout=timeout)
