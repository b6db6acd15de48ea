"""ColBERTv2 late-interaction retrieval over the pool, through ``colbert-ai`` (PLAID index).

The ColBERT index is built over the pool's entry texts (one ColBERT passage per
entry, pid = position) and stored in the index directory under
``colbert/<checkpoint-slug>/``: ``collection.tsv`` (what was indexed),
``entry_ids.json`` (pid -> pool entry id) and ``plaid/`` (colbert-ai's own files).
The manifest lists every such index under ``components.colbert.indexes``, keyed by
checkpoint.

Building and searching are separate steps: :func:`build_colbert_index` (or
:func:`ensure_colbert_index`, behind ``sirerag index INDEX --colbert CHECKPOINT``)
builds and records the index; :func:`load` only opens one that is built and up to
date with the pool, and otherwise raises an error naming the command to run. A
search never builds, downloads or writes anything.

colbert-ai runs in a worker process (:mod:`sirerag.retrievers._colbert_worker`)
under a timeout: it compiles C++ extensions on first use, changes the
multiprocessing start method when imported and can hang its parent when a step
crashes; here a crash or a hang becomes a :class:`~sirerag.core.errors.SireragError`
with the tail of the worker's stderr.

Checkpoints are local folders or Hugging Face names; when building, a name is looked
up in the local Hugging Face cache and downloaded only when it is not there (which
needs the network). Searching uses the folder recorded at build time, or the local
cache. The worker itself always runs offline.
"""
from __future__ import annotations

import hashlib
import logging
import re
import time
from pathlib import Path
from typing import Any, Sequence

from sirerag.core.errors import ConfigError, IndexFormatError, check
from sirerag.core.io import atomic_dir, collection_text, index_lock, read_manifest, write_collection, write_json
from sirerag.core.io.manifest import FileRecord, Manifest
from sirerag.pool.store import register_component
from sirerag.pool.loaded import LoadedIndex, load_index
from sirerag.retrievers._colbert_client import WorkerClient
from sirerag.retrievers._colbert_search import COLLECTION, ENTRY_IDS, PLAID, SEARCH_TIMEOUT, ColBERTRetriever
from sirerag.retrievers._colbert_setup import checkpoint_key, compile_extensions, require_colbert, resolve_checkpoint

__all__ = [
    "DEFAULT_CHECKPOINT", "ColBERTRetriever", "build_colbert_index", "checkpoint_key", "colbert_indexes",
    "collection_text", "compile_extensions", "ensure_colbert_index", "load", "resolve_checkpoint",
    "write_collection",
]

logger = logging.getLogger(__name__)

DEFAULT_CHECKPOINT = "colbert-ir/colbertv2.0"
COMPONENT = "colbert"
NBITS = (1, 2, 4)
#: default ColBERT document length in tokens: pool aggregates reach 512 tokens
DOC_MAXLEN = 512
BUILD_TIMEOUT = 3600.0


def entries_fingerprint(entry_ids: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(entry_ids).encode("utf-8")).hexdigest()


def _slug(key: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(key).name or key).strip("-.") or "checkpoint"
    return f"{base[:40]}-{hashlib.sha1(key.encode('utf-8')).hexdigest()[:8]}"


def _as_index(index: LoadedIndex | str | Path) -> LoadedIndex:
    return index if isinstance(index, LoadedIndex) else load_index(index)


def _core_files(manifest: Manifest) -> dict[str, FileRecord]:
    return {k: v for k, v in manifest.files.items() if not k.startswith(f"{COMPONENT}/")}


def colbert_indexes(manifest: Manifest) -> dict[str, dict[str, Any]]:
    """The ColBERT indexes recorded in a manifest, keyed by checkpoint."""
    component = manifest.component(COMPONENT)
    return dict(component.indexes) if component is not None else {}


def build_colbert_index(
    index: LoadedIndex | str | Path,
    checkpoint: str = DEFAULT_CHECKPOINT,
    *,
    nbits: int = 2,
    doc_maxlen: int = DOC_MAXLEN,
    kmeans_niters: int = 4,
    timeout: float = BUILD_TIMEOUT,
) -> dict[str, Any]:
    """Build (or rebuild) the ColBERT index of a pool for one checkpoint.

    Args:
        index: an index directory or a loaded :class:`~sirerag.pool.loaded.LoadedIndex`.
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
        entry_ids = list(index.pool.ids)
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
            "path": f"{COMPONENT}/{final.name}", "checkpoint": key, "checkpoint_path": str(local),
            "nbits": nbits, "doc_maxlen": doc_maxlen,
            "kmeans_niters": kmeans_niters, "entries": len(entry_ids), "entries_sha1": entries_fingerprint(entry_ids),
            "colbert_ai": version, "build_seconds": seconds, **stats,
        }
        indexes = colbert_indexes(read_manifest(index.path))
        indexes[key] = record
        index.took_component(register_component(index.path, COMPONENT, type="colbert-plaid", path=COMPONENT,
                                                indexes=indexes))
    if stats.get("truncated"):
        logger.warning("%d of %d entries are longer than doc_maxlen=%d tokens and were truncated",
                       stats["truncated"], len(entry_ids), doc_maxlen)
    logger.info("ColBERT index written to %s in %.1f s", final, seconds)
    return record



def _stale_reason(index: LoadedIndex, record: dict[str, Any] | None) -> str | None:
    """Why a recorded ColBERT index cannot serve this pool (None: it can)."""
    if record is None:
        return "has no ColBERT index for this checkpoint"
    if record.get("entries_sha1") != entries_fingerprint(list(index.pool.ids)):
        return "has a ColBERT index for this checkpoint that is out of date with the pool"
    if not (index.path / record["path"] / PLAID / "metadata.json").is_file():
        return f"has no ColBERT files in {record['path']}/{PLAID}"
    return None


def index_command(index: LoadedIndex, checkpoint: str) -> str:
    """The command that builds the ColBERT index of ``index`` for ``checkpoint``."""
    return f"sirerag index {index.path} --colbert {checkpoint}"


def ensure_colbert_index(
    index: LoadedIndex | str | Path,
    checkpoint: str = DEFAULT_CHECKPOINT,
    *,
    nbits: int | None = None,
    doc_maxlen: int | None = None,
    rebuild: bool = False,
    timeout: float = BUILD_TIMEOUT,
) -> tuple[dict[str, Any], bool]:
    """Build the ColBERT index for ``checkpoint`` unless an up-to-date one is recorded.

    Args:
        nbits, doc_maxlen: build settings; a recorded index built with other values is
            rebuilt. None: as recorded, else 2 and 512.
        rebuild: rebuild even if an up-to-date index exists.

    Returns:
        ``(record, built)``: the manifest record and whether it was (re)built now.

    Raises:
        MissingExtraError, ConfigError, SireragError: see :func:`build_colbert_index`.
    """
    index = _as_index(index)
    record = colbert_indexes(index.manifest).get(checkpoint_key(checkpoint))
    reason = _stale_reason(index, record)
    if record is not None and reason is None and not rebuild \
            and (nbits is None or record.get("nbits") == nbits) \
            and (doc_maxlen is None or record.get("doc_maxlen") == doc_maxlen):
        return record, False
    if record is not None and not rebuild:
        logger.info("the ColBERT index for %s is out of date with the pool or settings; rebuilding", checkpoint)
    return build_colbert_index(index, checkpoint, nbits=nbits or 2, doc_maxlen=doc_maxlen or DOC_MAXLEN,
                               timeout=timeout), True


def load(
    index: LoadedIndex | str | Path,
    *,
    checkpoint: str | None = None,
    query_maxlen: int | None = None,
    timeout: float = SEARCH_TIMEOUT,
) -> ColBERTRetriever:
    """ColBERT retriever over the ColBERT index built for ``checkpoint``.

    Nothing is built, downloaded or written: build first with
    ``sirerag index INDEX --colbert CHECKPOINT`` (:func:`ensure_colbert_index`).

    Args:
        index: a loaded index (or its directory).
        checkpoint: local folder or Hugging Face name it was built with. None: the one
            ColBERT index recorded for this pool.
        query_maxlen: query length in tokens (None: the checkpoint's).
        timeout: seconds per search request (worker start-up included).

    Raises:
        MissingExtraError: colbert-ai is not installed.
        ConfigError: no up-to-date ColBERT index for the checkpoint (the message names the
            command that builds it), or the checkpoint is no longer on this machine.
    """
    require_colbert()
    index = _as_index(index)
    index.check_commit()  # colbert/ of the commit the pool came from (an add or remove drops it)
    recorded = colbert_indexes(index.manifest)
    if checkpoint is None:
        if len(recorded) != 1:
            which = "no ColBERT index" if not recorded else f"{len(recorded)} ColBERT indexes ({', '.join(recorded)})"
            raise ConfigError(f"index {index.path} has {which}; "
                              + (f"build one with: {index_command(index, 'CHECKPOINT')}" if not recorded
                                 else "choose one with --checkpoint"))
        checkpoint = next(iter(recorded))
    record = recorded.get(checkpoint_key(checkpoint))
    reason = _stale_reason(index, record)
    if reason is not None or record is None:
        raise ConfigError(f"index {index.path} {reason} ({checkpoint}); build it with: "
                          f"{index_command(index, checkpoint)}")
    local = Path(record.get("checkpoint_path") or "")
    if not (record.get("checkpoint_path") and (local / "config.json").is_file()):
        local = resolve_checkpoint(checkpoint, download=False)
    return ColBERTRetriever(index.path / record["path"], local, query_maxlen=query_maxlen, timeout=timeout)
