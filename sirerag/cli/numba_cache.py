"""Process setup for numba, which UMAP and pynndescent compile with: an on-disk cache.

UMAP compiles its numba functions in every new process (about 20 CPU-seconds), and
most of them are not declared ``cache=True``, so setting numba's cache folder
alone saves little. The CLI therefore (1) points numba at a folder under the user's
cache directory before numba is imported, and (2) before a build clusters anything,
switches on numba's own file cache for the jitted functions of ``umap`` and
``pynndescent`` that were left without one. Both are process setup: library code
never does either. The same goes for oneDNN's primitive cache (:func:`configure_onednn_cache`).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from sirerag.core.io.files import user_cache_dir

logger = logging.getLogger(__name__)

CACHE_ENV = "NUMBA_CACHE_DIR"


def numba_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sirerag/numba`` (``~/.cache/sirerag/numba`` by default)."""
    return user_cache_dir("numba")


def configure_numba_cache() -> str | None:
    """Point numba's cache at :func:`numba_cache_dir` unless ``NUMBA_CACHE_DIR`` is already set.

    Before numba is imported this sets the environment variable numba reads at import
    (so worker processes inherit it too); afterwards it sets ``numba.config.CACHE_DIR``.
    Returns the folder in use (``None`` when it cannot be created).
    """
    folder = os.environ.get(CACHE_ENV)
    if not folder:
        path = numba_cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            logger.debug("no numba cache folder (%s); numba compiles in every process", exc)
            return None
        folder = str(path)
        os.environ[CACHE_ENV] = folder
    numba = sys.modules.get("numba")
    if numba is not None and not numba.config.CACHE_DIR:
        numba.config.CACHE_DIR = folder
    return folder


def cache_umap_functions() -> int:
    """Import ``umap`` and ``pynndescent`` and give every module-level jitted function of theirs
    that has no file cache numba's own one (``Dispatcher.enable_caching``), so what a
    process compiles is reused by the next; the clustering's worker processes do the same when this
    process did (:func:`sirerag.clustering.processes.file_cache_functions`). Returns how many functions
    were switched.
    """
    from sirerag.clustering.processes import file_cache_functions

    return file_cache_functions()


#: The environment variable oneDNN (torch's CPU kernels) reads for how many primitives a process keeps.
ONEDNN_CACHE_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
#: Primitives kept (oneDNN's default is 1,024). A bfloat16 primitive holds its own reordered weights and
#: every batch length is a new input shape, so a build's embedding stages kept hundreds of MB of them
#: (docs/scale.md); a primitive made again computes the same vectors.
ONEDNN_CACHE_CAPACITY = 4


def configure_onednn_cache() -> None:
    """Keep at most :data:`ONEDNN_CACHE_CAPACITY` oneDNN primitives unless ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``
    is set; effective only before torch is imported (the CLI calls it first)."""
    os.environ.setdefault(ONEDNN_CACHE_ENV, str(ONEDNN_CACHE_CAPACITY))
